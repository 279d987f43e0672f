import TetherNet
import TetherWire

/// This node's connection to another node's cluster listener, opened when a signal first needs
/// it and again after it drops. Confined to its loop. Signals wait while it connects (at most
/// `maxQueued`: beyond that, and when connecting fails, they are answered `offline` — a signal
/// is never held for long); replies (`offline` bounces) come back over the same connection.
final class ClusterLink: WebSocketDelegate, Sendable {
    /// Signals waiting for the connection: a burst's worth, not a backlog.
    static let maxQueued = 1_024
    static let connectTimeout: Duration = .seconds(3)

    let url: String
    let loop: EventLoop
    private let secret: [UInt8]
    private unowned let cluster: SignalCluster

    // Everything that changes lives on `loop`, asserted at each access.
    private struct State {
        var connection: WebSocketConnection?
        var connecting = false
        var queued: [SignalMessage] = []
    }

    private let state: LoopBound<State>

    private var connection: WebSocketConnection? {
        get { state.value.connection }
        _modify { yield &state.value.connection }
    }
    private var connecting: Bool {
        get { state.value.connecting }
        _modify { yield &state.value.connecting }
    }
    private var queued: [SignalMessage] {
        get { state.value.queued }
        _modify { yield &state.value.queued }
    }

    init(url: String, secret: [UInt8], loop: EventLoop, cluster: SignalCluster) {
        self.url = url
        self.secret = secret
        self.loop = loop
        self.cluster = cluster
        state = LoopBound(State(), loop: loop)
    }

    /// Sends from any thread.
    func send(_ message: ClusterMessage) {
        loop.execute { [self] in sendOnLoop(message) }
    }

    private func sendOnLoop(_ message: ClusterMessage) {
        if let connection, connection.isOpen { return connection.send(text: Array(message.json.utf8)) }
        guard case let .signal(signal) = message else { return }   // a bounce for a gone link has no one to reach
        guard queued.count < Self.maxQueued else { return cluster.bounced(signal) }
        queued.append(signal)
        guard !connecting else { return }
        connecting = true
        let headers = HTTPHeaders([("Authorization", "Bearer " + String(decoding: secret, as: UTF8.self))])
        // The client answers on the loop it was given: this link's own.
        WebSocketClient.connect(url, headers: headers, delegate: self, on: loop, timeout: Self.connectTimeout) { [self] result in connected(result) }
    }

    private func connected(_ result: Result<WebSocketConnection, WebSocketClient.Failure>) {
        connecting = false
        let waiting = queued
        queued = []
        switch result {
        case let .success(connection):
            self.connection = connection
            for signal in waiting { connection.send(text: Array(ClusterMessage.signal(signal).json.utf8)) }
        case .failure:
            for signal in waiting { cluster.bounced(signal) }
        }
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveText text: [UInt8]) {
        guard let message = ClusterMessage.parse(text) else { return socket.close(code: WebSocketCloseCode.policyViolation, reason: "bad message") }
        cluster.received(message) { [self] reply in send(reply) }
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveBinary data: [UInt8]) {
        socket.close(code: WebSocketCloseCode.policyViolation, reason: "bad message")
    }

    func webSocketDidClose(_ socket: WebSocketConnection, code: UInt16, reason: String) {
        if connection === socket { connection = nil }
    }
}
