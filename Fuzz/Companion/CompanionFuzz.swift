// The companion channel's application frames (client.md §11, §12): the pairing verdict, the
// control envelope and the frame kind, as both endpoints read each frame the Noise channel
// hands them. Input: the frame.
//
// An envelope that decodes must encode to a frame that decodes to the same envelope (the Mac
// answers, echoes and forwards what it reads).
import TetherWire
import TetherEncoding

enum CompanionFuzz {
    static func run(_ frame: [UInt8]) {
        touch(CompanionFrameKind(frame))
        if let verdict = PairingVerdict(frame: frame) {
            expect(PairingVerdict(frame: verdict.frame) == verdict, "a pairing verdict did not survive its encoding")
        }
        guard let envelope = CompanionEnvelope(frame: frame) else { return }
        expect(CompanionEnvelope(frame: envelope.frame) == envelope, "an envelope did not survive its encoding")
        if case let .hello(revision, minimumPeer, _) = envelope.payload {
            touch(CompanionRevision.compare(peerRevision: revision, peerMinimumPeer: minimumPeer))
        }
    }
}

extension CompanionFuzz {
    /// client.md §11-§12's frames (CompanionMessagesTests): verdicts, every modelled envelope
    /// case, an unknown one, and media and empty frames.
    static var seeds: [String: [UInt8]] {
        let frames = [
            "accepted": #"{"pairing":"accepted"}"#,
            "rejected": #"{"pairing":"rejected"}"#,
            "secret": #"{"requestID":7,"payload":{"relayRoomSecret":{"_0":"\#(Base64.encode([UInt8](repeating: 0xA5, count: 32)))"}}}"#,
            "secret-stored": #"{"requestID":7,"payload":{"relayRoomSecretStored":{}}}"#,
            "hello": #"{"requestID":1,"payload":{"hello":{"revision":11,"minimumPeer":11,"wantsNotificationPermission":true}}}"#,
            "error": #"{"payload":{"error":{"_0":{"code":"unsupported","message":"no \"such\" case"}}}}"#,
            "ping": #"{"payload":{"ping":{}}}"#,
            "unpairing": #"{"requestID":9007199254740991,"payload":{"unpairing":{}}}"#,
            "unknown": #"{"payload":{"futureCase":{"x":1}}}"#,
        ]
        var seeds = frames.mapValues { Array($0.utf8) }
        seeds["media"] = [0x01, 0x00, 0x10]
        seeds["empty"] = []
        return seeds
    }
}
