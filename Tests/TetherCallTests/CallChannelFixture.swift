import TetherCall
import TetherSync
import TetherCrypto
import TetherWire

/// The §12 identities and fixed keys, shared by the channel tests.
enum Fixture {
    static let alice = SignalingID(canonical: "BC7CBCB5636375FA1D82434D466724D92377F53B980695DD49D26D0CE12205A5")!
    static let bob = SignalingID(canonical: "4721B5B632272E65A68DDA7AC25B4185F8B01916DB185C14287DB92E2B770FAE")!
    static let callID = CallUUID("6f1c2b8a-3d4e-4f50-9a61-7b8c9d0e1f20")!
    static let aliceKey = key(0xA2), bobKey = key(0xB2)
    static let start = MonotonicInstant(nanoseconds: 5_000_000_000)

    static func key(_ byte: UInt8) -> X25519.PrivateKey {
        try! X25519.PrivateKey(rawRepresentation: [UInt8](repeating: byte, count: 32))
    }

    static func channel(_ role: CallSecureChannel.Role, now: MonotonicInstant = start) -> CallSecureChannel {
        role == .initiator
            ? CallSecureChannel(role: .initiator, callID: callID, localID: alice, remoteID: bob, localAgreementKey: aliceKey,
                                remoteAgreementKey: bobKey.publicKey, now: now)
            : CallSecureChannel(role: .responder, callID: callID, localID: bob, remoteID: alice, localAgreementKey: bobKey,
                                remoteAgreementKey: aliceKey.publicKey, now: now)
    }

    static func ms<T: BinaryInteger>(_ value: T) -> Duration { .milliseconds(Int64(value)) }
    static func seconds<T: BinaryInteger>(_ value: T) -> Duration { .seconds(Int64(value)) }
}

extension [CallChannelAction] {
    var frames: [[UInt8]] {
        compactMap { if case let .send(frame) = $0 { frame } else { nil } }
    }

    var deliveries: [CallPayload] {
        compactMap { if case let .deliver(payload) = $0 { payload } else { nil } }
    }

    var failure: CallChannelFailure? {
        lazy.compactMap { if case let .terminate(failure) = $0 { failure } else { nil } }.first
    }
}
