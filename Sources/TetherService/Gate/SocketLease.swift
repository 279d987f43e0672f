import Synchronization

/// One admitted socket's place under the gate's caps, given back when the socket closes:
/// `release()` (idempotent), or, should the owner forget, when the lease is freed.
public final class SocketLease: Sendable {
    /// The client key the socket counts against (never logged).
    public let ip: String
    /// Admission order across every loop (relay.md §3.9 evicts the oldest pending socket).
    public let arrival: UInt64
    private let gate: ConnectionGate
    private let released = Atomic(false)

    init(ip: String, arrival: UInt64, gate: ConnectionGate) {
        self.ip = ip
        self.arrival = arrival
        self.gate = gate
    }

    /// Frees the socket's place; later calls do nothing.
    public func release() {
        guard !released.exchange(true, ordering: .acquiringAndReleasing) else { return }
        gate.releaseSocket(ip: ip)
    }

    /// True once the place has been given back.
    public var isReleased: Bool { released.load(ordering: .acquiring) }

    deinit { release() }
}
