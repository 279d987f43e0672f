import Dispatch
import Glibc
import TetherCall
import TetherSync
import TetherTestSupport
import TetherWire

/// The smallest real driver of a `CallMachine`: one serial queue as its loop, a real clock, an
/// `InMemoryMediaTransport` per call, and a signaling "server" that is the other driver's loop.
/// Media reports hop onto the loop and are tagged with their transport's call, as the
/// `CallMediaTransport` threading contract asks.
final class CallLoopDriver: CallMediaTransportDelegate, @unchecked Sendable {
    private let loop: DispatchQueue
    private let network: InMemoryMediaNetwork
    // Confined to `loop`.
    private var machine: CallMachine
    private var transports: [CallUUID: InMemoryMediaTransport] = [:]
    private var calls: [ObjectIdentifier: CallUUID] = [:]
    private var noticeLog: [CallNotice] = []
    /// Where signals go; set once before the first event.
    nonisolated(unsafe) var peer: CallLoopDriver?

    init(identity: CallIdentity, network: InMemoryMediaNetwork) {
        machine = CallMachine(identity: identity)
        self.network = network
        loop = DispatchQueue(label: "call-driver")
    }

    private var now: CallTime {
        CallTime(monotonic: MonotonicInstant(nanoseconds: DispatchTime.now().uptimeNanoseconds), wall: WallInstant(unixSeconds: 1_700_000_000))
    }

    func handle(_ event: CallEvent) {
        loop.async { self.run(event) }
    }

    func mediaTransport(_ transport: any CallMediaTransport, didReport event: CallMediaEvent) {
        let id = ObjectIdentifier(transport)
        loop.async {
            // A transport already closed and forgotten reports nothing the machine wants.
            guard let call = self.calls[id] else { return }
            self.run(.media(call: call, event))
        }
    }

    private func run(_ event: CallEvent) {
        for action in machine.handle(event, now: now) {
            switch action {
            case let .sendSignal(signal): peer?.handle(.signal(signal))
            case let .media(call, command):
                if command == .createOffer || { if case .acceptOffer = command { true } else { false } }() {
                    let transport = network.makeTransport()
                    transport.delegate = self
                    transports[call] = transport
                    calls[ObjectIdentifier(transport)] = call
                }
                transports[call]?.perform(command)
                if command == .close, let transport = transports.removeValue(forKey: call) {
                    calls[ObjectIdentifier(transport)] = nil
                }
            case let .notify(notice): noticeLog.append(notice)
            }
        }
    }

    var notices: [CallNotice] { loop.sync { noticeLog } }

    /// The transport of `call`, for the tests' hooks.
    func transport(_ call: CallUUID) -> InMemoryMediaTransport? { loop.sync { transports[call] } }

    /// Polls until `condition` holds of the notices (false after 5 s).
    func waitFor(_ condition: ([CallNotice]) -> Bool) -> Bool {
        Eventually.holds(within: 5, every: 0.001) { condition(notices) }
    }
}
