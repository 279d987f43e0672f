import TetherCall
import TetherNet
import TetherWire

/// One signaling client (signaling.md §5.1–§5.3): connects with an `X-Forwarded-For` address
/// of its own, answers the challenge with a signed `register`, and once registered hands every
/// text frame to its owner unparsed — parsing a forwarded signal here would make the load
/// generator's core, not the server's, the limit. Touched only on its loop.
final class BenchClient: WebSocketDelegate, @unchecked Sendable {
    enum Stage { case idle, connecting, registering, registered, closed }

    let identity: CallIdentity
    let loop: EventLoop
    private(set) var stage = Stage.idle
    /// When the challenge arrived (monotonic ns): from here to `registered` is the server's own
    /// part of a registration, without the TCP connect, whose ephemeral-port search on the load
    /// generator's side slows as one source address holds tens of thousands of connections.
    private(set) var challengedAt: UInt64 = 0
    private var socket: WebSocketConnection?
    /// Called once: nil when registered, else why not.
    private var onRegistration: ((String?) -> Void)?
    /// Every text frame after registration.
    var onText: ([UInt8]) -> Void = { _ in }
    /// The socket ended after registration (code, reason).
    var onClose: (UInt16, String) -> Void = { _, _ in }

    init(identity: CallIdentity, loop: EventLoop) {
        self.identity = identity
        self.loop = loop
    }

    /// The server keys its per-IP limits (§6.4) by this address when it trusts the proxy header
    /// (`SIGNAL_TRUST_PROXY=true`), so every client is its own IP, as real callers are.
    static func forwardedAddress(_ index: Int) -> String {
        "10.\(index >> 16 & 0xff).\(index >> 8 & 0xff).\(index & 0xff)"
    }

    func register(url: String, forwardedFor: String, done: @escaping (String?) -> Void) {
        stage = .connecting
        onRegistration = done
        let client = UncheckedTransfer(self)
        WebSocketClient.connect(url, headers: HTTPHeaders([("X-Forwarded-For", forwardedFor)]), delegate: self, on: loop) { result in
            switch result {
            case let .success(socket): client.value.socket = socket
            case let .failure(.refused(status, body)): client.value.finish("upgrade refused \(status) \(String(decoding: body, as: UTF8.self))")
            case let .failure(.network(error)): client.value.finish("connect: \(error)")
            }
        }
    }

    func send(_ text: [UInt8]) { socket?.send(text: text) }

    func close() { socket?.close(code: WebSocketCloseCode.normal) }

    private func finish(_ failure: String?) {
        let done = onRegistration
        onRegistration = nil
        done?(failure)
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveText text: [UInt8]) {
        if stage == .registered { return onText(text) }
        switch SignalingServerMessage.parse(text) {
        case let .challenge(challenge)?:
            stage = .registering
            challengedAt = Measure.now()
            socket.send(text: Array(identity.register(challenge: challenge).json().utf8))
        case .registered?:
            stage = .registered
            finish(nil)
        case let .error(code, _, _, _)?:
            finish("error \(code)")
        default:
            finish("unexpected message before registration")
        }
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveBinary data: [UInt8]) {}

    func webSocketDidClose(_ socket: WebSocketConnection, code: UInt16, reason: String) {
        let wasRegistered = stage == .registered
        stage = .closed
        self.socket = nil
        if wasRegistered { onClose(code, reason) } else { finish("closed \(code) \(reason)") }
    }
}
