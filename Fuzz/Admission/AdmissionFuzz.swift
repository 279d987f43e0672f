// The relay's admission messages (relay.md §3.2): a Hello and a Proof as the room machine reads
// them, the JSON reader under both, and a Proof's `sig` checked as a signed join (forgiving
// base64, Ed25519) against a fixed verifier.
//
// Input: 1 settings byte, then the text frame.
//   [0] the nesting limit: 32 (the default) for 0, else the byte's low five bits
//
// Every string the reader returns must survive the writer's escaping (JSONValue.quoted, which
// every refusal reason goes through) and read back the same, and base64 read strictly must read
// the same forgivingly.
import TetherCrypto
import TetherRelay
import TetherWire
import TetherEncoding

enum AdmissionFuzz {
    /// A verifier whose signature over `transcript` seeds carry, so mutations of its encoding
    /// (whitespace, missing padding) can still verify.
    static let key = try! Ed25519.PrivateKey(seed: [UInt8](repeating: 7, count: 32))
    static let verifier = Base64.encode(key.publicKey.rawRepresentation)
    static let transcript = JoinTranscript(role: .phone, nonce: [UInt8](repeating: 9, count: 32),
                                           room: RoomName(header: String(repeating: "c", count: 64))!, origin: "https://relay.example").bytes

    static func run(_ data: [UInt8]) {
        var input = FuzzInput(data)
        let depth = Int(input.byte() & 31)
        let frame = input.rest()

        if let hello = Hello.parse(frame) {
            expect(Hello.parse(Array(hello.json.utf8)) == hello, "a Hello did not survive its own encoding")
        }
        if let proof = Proof.parse(frame), let signature = proof.signature {
            touch(JoinCheck(transcript: transcript, signature: signature).isValid(for: verifier))
        }
        let loose = JSONValue.parse(frame, maxDepth: depth == 0 ? 32 : depth)
        let strict = JSONValue.parseStrict(frame, maxDepth: depth == 0 ? 32 : depth)
        if strict != nil { expect(loose != nil, "strict JSON the lenient reader refuses") }
        if let loose { strings(in: loose, check) }
        if let strict { strings(in: strict, check) }
    }

    static func strings(in value: JSONValue, _ body: (String) -> Void) {
        switch value {
        case let .string(text): body(text)
        case let .array(items): for item in items { strings(in: item, body) }
        case let .object(fields):
            for (key, item) in fields {
                body(key)
                strings(in: item, body)
            }
        case .null, .bool, .number, .inexactNumber: break
        }
    }

    static func check(_ text: String) {
        expect(JSONValue.parse(Array(JSONValue.quoted(text).utf8)) == .string(text), "a string did not survive JSON escaping")
        base64(text)
    }

    /// The three readings of base64 agree where they overlap, and what decodes encodes back.
    static func base64(_ text: String) {
        let forgiving = try? Base64.decodeForgiving(text)
        if let strict = try? Base64.decode(text) {
            expect(forgiving == strict, "forgiving base64 reads strict base64 differently")
            expect(try! Base64.decode(Base64.encode(strict)) == strict, "base64 did not survive encoding")
        }
        if let canonical = try? Base64.decodeCanonical(text) { expect(Base64.encode(canonical) == text, "canonical base64 that is not") }
        if let url = try? Base64.decodeURL(text) { expect((try? Base64.decodeURL(Base64.encodeURL(url))) == url, "base64url did not survive encoding") }
        touch(forgiving)
    }
}

extension AdmissionFuzz {
    /// relay.md §3.2's messages as clients send them (AdmissionMessageTests), a Proof whose `sig`
    /// verifies against `verifier` in the spellings forgiving base64 allows, and JSON's corners.
    static var seeds: [String: [UInt8]] {
        let signature = Base64.encode(key.signature(for: transcript))
        let spaced = signature.enumerated().map { $0.offset % 16 == 15 ? "\($0.element) " : "\($0.element)" }.joined()
        let texts = [
            "hello-mac": #"{"v":1,"role":"mac"}"#,
            "hello-phone": #"{"v":1.0,"role":"phone","nonDisplacing":true}"#,
            "hello-extra": #" {"role":"phone","v":1e0,"x":{"y":[null,false]}} "#,
            "hello-bad": #"{"v":"1","role":"mac"}"#,
            "proof-sig": #"{"sig":"\#(signature)"}"#,
            "proof-sig-forgiving": #"{"sig":"\#(spaced.replacingOccurrences(of: "=", with: ""))"}"#,
            "proof-ticket": #"{"ticket":"dGlja2V0LTEyMw=="}"#,
            "proof-not-object": #"["sig"]"#,
            "escapes": #"{"s":"\u00e9\ud83d\ude00\n\t\"\\\/\b\f\r","k\u0000":-0.5e-3}"#,
            "numbers": #"[0,-0,1.5,1E+2,9007199254740993,-9007199254740992,123456789012345678901234567890]"#,
            "deep": String(repeating: "[", count: 40) + String(repeating: "]", count: 40),
            "duplicate": #"{"sig":"a","sig":"b"}"#,
        ]
        var seeds: [String: [UInt8]] = [:]
        for (name, text) in texts { seeds[name] = [0] + Array(text.utf8) }
        seeds["shallow"] = [3] + Array(#"[[[[1]]]]"#.utf8)
        seeds["invalid-utf8"] = [0] + Array(#"{"sig":""#.utf8) + [0xC0, 0x80] + Array(#""}"#.utf8)
        return seeds
    }
}
