import TetherCrypto
import TetherWire

/// The established rooms of the storm, derived from their index alone: the serve process stores
/// their verifiers and the load process signs their joins, and neither has to tell the other
/// anything. Benchmark rooms only — a real room's secret is random (`RoomSecret.generate()`).
enum BenchRooms {
    /// Room `index`'s name, as a Mac would derive it from its static key and a pairing id.
    static func name(_ index: Int) -> RoomName {
        RoomName(responderStaticKey: SHA256.hash(Array("tether-relaybench rs \(index)".utf8)), pairingID: "relaybench-\(index)")
    }

    /// Room `index`'s secret (32 bytes, as `RoomSecret` requires).
    static func secret(_ index: Int) -> RoomSecret {
        // SHA-256 is always 32 bytes, the one size `RoomSecret` accepts.
        try! RoomSecret(bytes: SHA256.hash(Array("tether-relaybench secret \(index)".utf8)))
    }
}
