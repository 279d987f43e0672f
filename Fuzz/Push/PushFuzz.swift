// The push relay's request readers (push.md §2, §3) and its reading of APNs' answers (§4.5):
// Profile M's `/v1/register` and `/v1/push` (the three credential headers, the HMAC over the
// body, the payload), Profile I's `/register`, `/push` and `/push/mutable`, the body-size cap;
// and the SDK's reading of the push relay's answers (compiled into TetherClient by scripts/fuzz,
// for PushRelayClient's internal reader).
//
// Input: a mode byte, then the mode's parts.
//   0 Mytty register: body             1 Mytty push: [header count] (name, value fields)… body
//   2 iTerm register: body             3 iTerm push: [kind] body
//   4 APNs answer: [status, 2 bytes] body
//   5 the push relay's answer to the SDK: [status, 2 bytes] body
// The registrations a push is checked against are fixed here (`registration`, `iterm`), so
// seeds signed with their secrets pass authentication and reach the payload checks.
import TetherCrypto
import TetherNet
import TetherPush
import TetherStore
import TetherSync
import TetherWire
import TetherEncoding

public enum PushFuzz {
    static let nowSeconds: UInt64 = 1_700_000_000
    static let relaySecret = [UInt8](repeating: 0x5A, count: 32)
    static let registration = MyttyRegistration(deviceToken: String(repeating: "ab", count: 32), environment: .sandbox,
                                                relaySecret: Base64.encode(relaySecret))
    /// Profile I's stored hash of the push secret `iTermSecret` (64 hex characters).
    static let iTermSecret = String(repeating: "5e", count: 32)
    static let iterm = ITermRegistration(secretHash: Hex.encode(SHA256.hash(try! Hex.decode(iTermSecret))), sandbox: false,
                                         registeredAt: nowSeconds * 1000 - 1000)

    public static func run(_ data: [UInt8]) {
        var input = FuzzInput(data)
        switch input.byte() % 6 {
        case 0:
            let body = input.rest()
            touch(BodySize.isTooLarge(body))
            if case let .success(fields) = MyttyProfile.registration(from: body) {
                expect(MyttyProfile.isValidDeviceToken(fields.deviceToken), "a registration with a bad device token")
            }
        case 1:
            var headers = HTTPHeaders()
            for _ in 0..<Int(input.byte() % 8) {
                headers.add(String(decoding: input.field(), as: UTF8.self), String(decoding: input.field(), as: UTF8.self))
            }
            let body = input.rest()
            let head = HTTPRequestHead(method: "POST", target: "/v1/push", headers: headers)
            guard let credentials = MyttyProfile.credentials(head, nowSeconds: nowSeconds) else { return }
            let authentic = MyttyProfile.isAuthentic(credentials, body: body, registration: registration)
            expect(authentic == MyttyPush.isValidRequestSignature(credentials.signature.lowercased() == credentials.signature ? credentials.signature : "x",
                                                                  relaySecret: relaySecret, timestamp: credentials.timestamp, body: body),
                   "Profile M's authentication disagrees with the signature check")
            expect(!MyttyProfile.isAuthentic(credentials, body: body, registration: nil), "a push authentic without a registration")
            guard authentic else { return }
            if case let .success(notification) = MyttyProfile.notification(body: body, registration: registration, topic: "com.example.app") {
                expect(JSONValue.parse(notification.payload) != nil, "an APNs payload that is not JSON")
            }
        case 2:
            if case let .success(fields) = ITermProfile.registration(from: input.rest()) {
                touch(ITermProfile.needsWrite(fields, stored: iterm, now: WallInstant(unixSeconds: Int64(nowSeconds))))
            }
        case 3:
            let kind: ITermProfile.Kind = input.bool() ? .mutable : .plain
            guard case let .success(push) = ITermProfile.push(kind, from: input.rest()) else { return }
            expect(JSONValue.parse(push.notification.payload) != nil, "an APNs payload that is not JSON")
            touch(ITermProfile.isSecretValid(push.secret, for: iterm))
        case 4:
            let status = input.uint16()
            let body = input.rest()
            let reason = APNsReason.parse(body: body)
            let outcome = APNsOutcome.rejected(status: status, reason: reason, failureClass: APNsReason.classify(status: status, reason: reason), body: body)
            for answer in [MyttyProfile.answer(outcome), ITermProfile.answer(outcome)] {
                expect(JSONValue.parse(Array(answer.json.utf8)) != nil, "an answer that is not JSON")
            }
        default:
            // As PushRelayClient.post reads a refusal.
            let status = input.uint16()
            let body = input.rest()
            let json = JSONValue.parse(body)
            let error = json?.string("error") ?? String(decoding: body.prefix(200), as: UTF8.self)
            touch(PushRelayClient.apnsStatus(status: status, json: json, error: error))
        }
    }
}

extension PushFuzz {
    /// push.md's requests as the Mytty and iTerm2 apps send them (ProfileTests), a Profile M push
    /// signed with `relaySecret`, and APNs' documented error answers.
    public static var seeds: [String: [UInt8]] {
        let token = String(repeating: "0123456789abcdef", count: 4)
        let body = Array(#"{"ciphertext":"c2VhbGVk","macID":"mac-1","title":"Mytty","placeholder":"New activity","collapseID":"k"}"#.utf8)
        let timestamp = String(nowSeconds)
        let signature = MyttyPush.requestSignature(relaySecret: relaySecret, timestamp: timestamp, body: body)
        let headers: [(String, String)] = [("x-mytty-push-id", "6f1c0a52-3b6e-4b8e-9a59-3f1c2d4e5f60"), ("X-Mytty-Timestamp", timestamp),
                                           ("x-mytty-signature", signature)]
        let push = [1, UInt8(headers.count)] + headers.flatMap { field($0.0) + field($0.1) } + body
        func text(_ mode: UInt8, _ text: String) -> [UInt8] { [mode] + Array(text.utf8) }
        return [
            "mytty-register": text(0, #"{"deviceToken":"\#(token)","environment":"sandbox"}"#),
            "mytty-register-bad": text(0, #"{"deviceToken":"xyz","environment":"production"}"#),
            "mytty-push": push,
            "mytty-push-stale": [1, 2] + field("x-mytty-timestamp") + field("99") + field("x-mytty-push-id") + field("p") + body,
            "iterm-register": text(2, #"{"token":"\#(token)","secretHash":"\#(iterm.secretHash)","sandbox":true}"#),
            "iterm-mutable": [3, 1] + Array(#"{"token":"\#(token)","secret":"\#(iTermSecret)","collapse":"0a1b","nonce":"AAECAw=="}"#.utf8),
            "iterm-plain": [3, 0] + Array(#"{"token":"\#(token)","secret":"\#(iTermSecret)","title":"Build","body":"finished \u2713"}"#.utf8),
            "apns-bad-token": [4, 0x01, 0x90] + Array(#"{"reason":"BadDeviceToken"}"#.utf8),
            "apns-unregistered": [4, 0x01, 0x9A] + Array(#"{"reason":"Unregistered","timestamp":1700000000000}"#.utf8),
            "apns-expired-token": [4, 0x01, 0x93] + Array(#"{"reason":"ExpiredProviderToken"}"#.utf8),
            "apns-not-json": [4, 0x01, 0xF4] + Array("<html>\"quoted\"\n</html>".utf8),
            "sdk-mytty-502": [5, 0x01, 0xF6] + Array(#"{"error":"BadDeviceToken","status":400}"#.utf8),
            "sdk-iterm-502": [5, 0x01, 0xF6] + Array(#"{"error":"APNs 410: {\"reason\":\"Unregistered\"}"}"#.utf8),
            "sdk-refused": [5, 0x01, 0x93] + Array(#"{"error":"bad secret"}"#.utf8),
        ]
    }
}
