// The signaling messages (signaling.md §5, §7): what a client sends the server (read in two steps,
// as SignalSocket reads them), what the server sends a client, what signaling nodes send each
// other (compiled into TetherSignal by scripts/fuzz, for the internal ClusterMessage), and the
// call-signal bodies inside `signal` envelopes.
//
// Input: a mode byte, then the text frame (or, for a body, the decoded JSON).
//   0 client → server    1 server → client    2 node → node    3-8 a body of kind mode - 3
// What reads must be written back by the encoder the other side uses, and read again the same.
import TetherCall
import TetherWire
import TetherEncoding

public enum SignalingFuzz {
    public static func run(_ data: [UInt8]) {
        var input = FuzzInput(data)
        let mode = Int(input.byte() % 9)
        let frame = input.rest()
        switch mode {
        case 0: client(frame)
        case 1: server(frame)
        case 2:
            guard let message = ClusterMessage.parse(frame) else { return }
            expect(ClusterMessage.parse(Array(message.json.utf8)) == message, "a cluster message did not survive its encoding")
        default:
            let kind = SignalKind.allCases[(mode - 3) % SignalKind.allCases.count]
            guard let body = CallSignalBody.parse(kind: kind, json: frame) else { return }
            expect(body.kind == kind, "a body read as another kind")
            expect(CallSignalBody.parse(kind: kind, json: body.encoded) == body, "a call-signal body did not survive its encoding")
        }
    }

    static func client(_ frame: [UInt8]) {
        guard let (type, fields) = SignalingClientMessage.classify(frame) else { return }
        switch type {
        case .register:
            guard let message = RegisterMessage.parse(fields) else { return }
            expect(reread(message.json()).flatMap(RegisterMessage.parse) == message, "a register did not survive its encoding")
        case .presence:
            guard let query = PresenceQuery.parse(fields) else { return }
            expect(Set(query.ids).count == query.ids.count && (1...PresenceQuery.maxIDs).contains(query.ids.count), "a presence query breaking §5.5")
            expect(reread(query.json()).flatMap(PresenceQuery.parse) == query, "a presence query did not survive its encoding")
        case .signal:
            guard case let .success(message) = SignalMessage.parse(fields) else { return }
            expect(message.from != message.to, "a signal to its sender")
            expect(reread(message.json()).map(SignalMessage.parse) == .success(message), "a signal did not survive its encoding")
            touch(message.signedBytes)
            touch(CallSignalBody.parse(message))
        }
    }

    static func reread(_ json: String) -> [String: JSONValue]? { SignalingClientMessage.classify(Array(json.utf8))?.fields }

    static func server(_ frame: [UInt8]) {
        guard let message = SignalingServerMessage.parse(frame) else { return }
        // Clients never write server messages; the server writes its own error codes only, so an
        // error read from anywhere need not encode back.
        if case .error = message { return }
        expect(SignalingServerMessage.parse(Array(message.json().utf8)) == message, "a server message did not survive its encoding")
    }
}

extension SignalingFuzz {
    /// signaling.md §5, §7 and §12's messages (SignalingWireTests, ClusterMessageTests,
    /// CallSignalBodyTests): every client and server type, both cluster shapes, every body kind.
    public static var seeds: [String: [UInt8]] {
        let a = String(repeating: "A1", count: 32), b = String(repeating: "B2", count: 32)
        let call = "1b4e28ba-2fa1-4d3b-883f-0016d3cca427"
        let sig = Base64.encode([UInt8](repeating: 0x5E, count: 64))
        let key = Base64.encode([UInt8](repeating: 0x4B, count: 32))
        let offer = CallSignalBody.offer(.init(sdp: "v=0\r\no=- 1 0 IN IP4 0.0.0.0\r\ns=-\r\nt=0 0\r\n", agreementKey: [UInt8](repeating: 0x4B, count: 32),
                                               identitySignature: [UInt8](repeating: 0x5E, count: 64)))
        let signal = #"{"type":"signal","v":2,"kind":"offer","from":"\#(a)","to":"\#(b)","call":"\#(call)","body":"\#(offer.base64)","sig":"\#(sig)"}"#
        let texts: [String: (UInt8, String)] = [
            "register": (0, #"{"type":"register","v":2,"id":"\#(a)","sig":"\#(sig)"}"#),
            "presence": (0, #"{"type":"presence","v":2,"ids":["\#(a)","\#(b)"]}"#),
            "signal": (0, signal),
            "signal-duplicate-key": (0, #"{"type":"signal","v":2,"v":2}"#),
            "challenge": (1, #"{"type":"challenge","v":2,"challenge":"\#(Base64.encode([UInt8](repeating: 1, count: 32)))"}"#),
            "registered": (1, #"{"type":"registered","v":2,"id":"\#(a)","iceServers":[{"urls":["stun:stun.example:3478"]},"#
                + #"{"urls":["turn:t.example?transport=udp","turns:t.example:443"],"username":"1700000000:x","credential":"c\/d="}],"iceExpiresAt":1700003600}"#),
            "server-signal": (1, signal),
            "server-presence": (1, #"{"type":"presence","v":2,"online":{"\#(b)":true,"\#(a)":false}}"#),
            "server-error": (1, #"{"type":"error","v":2,"code":"offline","message":"the callee is not online","call":"\#(call)","kind":"offer"}"#),
            "cluster-signal": (2, #"{"t":"signal","signal":\#(signal)}"#),
            "cluster-offline": (2, #"{"t":"offline","to":"\#(a)","from":"\#(b)","call":"\#(call)","kind":"answer"}"#),
            "body-offer": (3, String(decoding: offer.encoded, as: UTF8.self)),
            "body-answer": (4, #"{"sdp":"v=0\r\n","agreementKey":"\#(key)","identitySig":"\#(sig)","extra":[1]}"#),
            "body-candidate": (5, #"{"candidate":"candidate:1 1 udp 2122260223 192.0.2.1 54321 typ host","sdpMid":"0","sdpMLineIndex":0}"#),
            "body-end-of-candidates": (5, #"{"candidate":"","sdpMid":null,"sdpMLineIndex":0}"#),
            "body-channel": (6, "{}"),
            "body-reject": (7, #"{"reason":"busy"}"#),
            "body-close": (8, #"{"reason":"hangup"}"#),
        ]
        return texts.mapValues { [$0.0] + Array($0.1.utf8) }
    }
}
