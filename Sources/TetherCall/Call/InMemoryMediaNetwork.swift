import Dispatch
import TetherCrypto
import TetherWire
import TetherEncoding

/// Where `InMemoryMediaTransport`s find each other: the offerer's fake SDP carries a token the
/// answerer's `acceptOffer` looks up here. One serial queue runs every transport of the network
/// and every report, so messages arrive reliably and in order, and never inside the call that
/// sent them.
public final class InMemoryMediaNetwork: @unchecked Sendable { // the registry and every transport's state only on `queue`, a serial queue
    /// Every transport's state and this registry are touched only on this queue.
    let queue: DispatchQueue
    /// Offers not yet closed, by token (weakly: a dropped transport leaves the network).
    private var offers: [String: WeakTransport] = [:]

    private struct WeakTransport {
        weak var transport: InMemoryMediaTransport?
    }

    /// A network whose deliveries run on a serial queue of this label.
    public init(label: String = "tether.call.in-memory-media") {
        queue = DispatchQueue(label: label)
    }

    /// A new transport for one call, on this network.
    public func makeTransport() -> InMemoryMediaTransport {
        InMemoryMediaTransport(network: self)
    }

    /// Waits until everything queued so far (commands, reports, messages) has run.
    public func drain() {
        queue.sync {}
    }

    func register(_ transport: InMemoryMediaTransport, token: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        offers[token] = WeakTransport(transport: transport)
    }

    func unregister(token: String) {
        dispatchPrecondition(condition: .onQueue(queue))
        offers[token] = nil
    }

    func offerer(token: String) -> InMemoryMediaTransport? {
        dispatchPrecondition(condition: .onQueue(queue))
        return offers[token]?.transport
    }

    /// A token no other transport has: random, so two networks' SDPs never match by accident.
    static func newToken() -> String { Hex.encode(SecureRandom.bytes(8)) }
}
