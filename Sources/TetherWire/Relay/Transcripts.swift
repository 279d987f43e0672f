import TetherCrypto

/// The bytes a device signs to join an established room (client.md §7, relay.md §3.6):
/// canonical("iterm2-relay-join", [0x01, roleByte, nonce (32 raw bytes), roomName (64 ASCII), origin]).
public struct JoinTranscript: Sendable, Hashable {
    public static let protocolVersion: UInt8 = 0x01
    public let bytes: [UInt8]

    public init(role: RelayRole, nonce: [UInt8], room: RoomName, origin: String) {
        bytes = CanonicalEncoding.encode(domain: CanonicalEncoding.joinDomain,
                                         fields: [[Self.protocolVersion], [role.transcriptByte], nonce, room.transcriptField, Array(origin.utf8)])
    }
}

/// The bytes a device signs to delete its room (client.md §7): no role byte, its own domain,
/// so a join signature can never be replayed as a delete.
public struct DeleteTranscript: Sendable, Hashable {
    public let bytes: [UInt8]

    public init(challenge: [UInt8], room: RoomName, origin: String) {
        bytes = CanonicalEncoding.encode(domain: CanonicalEncoding.deleteDomain,
                                         fields: [[JoinTranscript.protocolVersion], challenge, room.transcriptField, Array(origin.utf8)])
    }
}

/// App Attest's clientDataHash for both attestation and assertion (client.md §8):
/// SHA-256(canonical("iterm2-relay-attest", [challenge (raw bytes), origin])).
public enum AttestClientData {
    public static func hash(challenge: [UInt8], origin: String) -> [UInt8] {
        SHA256.hash(preimage(challenge: challenge, origin: origin))
    }

    public static func preimage(challenge: [UInt8], origin: String) -> [UInt8] {
        CanonicalEncoding.encode(domain: CanonicalEncoding.attestDomain, fields: [challenge, Array(origin.utf8)])
    }
}
