/// How a phone proves to a relay in attestation mode that it is a genuine app (client.md §8,
/// relay.md §5): App Attest on Apple platforms; on Linux the software attester, which a relay
/// trusts only when it is configured with the attester's test root.
public protocol Attester: Sendable {
    /// An attestation object for a key bound to `clientDataHash` (the key is made, or reused,
    /// by the attester and kept for later assertions).
    func attest(clientDataHash: [UInt8]) async throws -> [UInt8]
    /// An assertion over `clientDataHash` with the attested key (its counter grows each time).
    func assert(clientDataHash: [UInt8]) async throws -> [UInt8]
}
