import TetherWire
import XCTest
import TetherEncoding

final class AdmissionMessageTests: XCTestCase {
    private func hello(_ text: String) -> Hello? { Hello.parse(Array(text.utf8)) }
    private func proof(_ text: String) -> Proof? { Proof.parse(Array(text.utf8)) }

    func testValidHellos() {
        XCTAssertEqual(hello(#"{"v":1,"role":"mac"}"#), Hello(role: .mac))
        XCTAssertEqual(hello(#"{"v":1,"role":"phone"}"#), Hello(role: .phone))
        XCTAssertEqual(hello(#"{"v":1.0,"role":"phone","nonDisplacing":true}"#), Hello(role: .phone, nonDisplacing: true))
        XCTAssertEqual(hello(#" {"role":"mac","v":1,"extra":[1,{"x":null}]} "#), Hello(role: .mac), "unknown fields ignored")
        XCTAssertEqual(hello(#"{"v":1,"role":"phone","nonDisplacing":1}"#), Hello(role: .phone), "only the boolean true counts")
        XCTAssertEqual(hello(#"{"v":1,"role":"phone","nonDisplacing":"true"}"#), Hello(role: .phone))
        XCTAssertEqual(hello(#"{"v":1e0,"role":"mac"}"#), Hello(role: .mac))
    }

    func testBadHellos() {
        for bad in [#"{"v":"1","role":"mac"}"#, #"{"v":true,"role":"mac"}"#, #"{"v":2,"role":"mac"}"#, #"{"v":1,"role":"Mac"}"#,
                    #"{"v":1,"role":"tablet"}"#, #"{"v":1}"#, #"{"role":"mac"}"#, "null", "[]", "1", "", "{", #"{"v":1,"role":"mac"} x"#,
                    #"{"v":01,"role":"mac"}"#, #"{"v":1,"role":"mac",}"#, "{\"v\":1,\"role\":\"ma\u{0}c\"}"] {
            XCTAssertNil(hello(bad), bad)
        }
        XCTAssertNil(Hello.parse([0x7B, 0xFF, 0x7D]), "invalid UTF-8")
    }

    func testProofs() {
        XCTAssertEqual(proof("{}"), Proof())
        XCTAssertEqual(proof(#"{"sig":"abc","ticket":"T"}"#), Proof(signature: "abc", ticket: "T"))
        XCTAssertEqual(proof(#"{"sig":5,"ticket":null}"#), Proof(), "non-string credentials are absent")
        XCTAssertEqual(proof("null"), Proof(), "not an object: no credential (signature/ticket required), not a crash")
        XCTAssertEqual(proof("[1]"), Proof())
        XCTAssertEqual(proof("42"), Proof())
        XCTAssertNil(proof("not json"), "bad proof")
        XCTAssertNil(proof(""))
        XCTAssertEqual(proof(#"{"ticket":"a+b/c=="}"#)?.ticket, "a+b/c==", "kept exactly as sent")
        XCTAssertEqual(proof(#"{"sig":"\u0041\ud83d\ude00"}"#)?.signature, "A😀")
        XCTAssertNil(proof(#"{"sig":"\ud83d"}"#), "a lone surrogate")
    }

    func testRelayMessagesAndClientEncodings() {
        XCTAssertEqual(AdmissionReply.challenge(nonce: Array(0..<32)), #"{"nonce":"AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="}"#)
        XCTAssertEqual(AdmissionReply.admitted(), #"{"ok":true}"#)
        XCTAssertEqual(AdmissionReply.admitted(registrationToken: "K"), #"{"ok":true,"registrationToken":"K"}"#)
        XCTAssertEqual(AdmissionReply.refused("mac offline"), #"{"ok":false,"error":"mac offline"}"#)
        XCTAssertEqual(Hello(role: .phone).json, #"{"v":1,"role":"phone"}"#)
        XCTAssertEqual(Hello(role: .phone, nonDisplacing: true).json, #"{"v":1,"role":"phone","nonDisplacing":true}"#)
        XCTAssertEqual(Hello.parse(Array(Hello(role: .mac, nonDisplacing: true).json.utf8)), Hello(role: .mac, nonDisplacing: true))
        XCTAssertEqual(Proof(signature: "s").json, #"{"sig":"s"}"#)
    }

    func testJSONValueNesting() {
        XCTAssertNil(JSONValue.parse(Array((String(repeating: "[", count: 40) + String(repeating: "]", count: 40)).utf8)), "too deep")
        XCTAssertEqual(JSONValue.parse(Array(#"{"a":[true,false,null,-1.5e2,"x"]}"#.utf8)),
                       .object(["a": .array([.bool(true), .bool(false), .null, .number(-150), .string("x")])]))
    }
}
