import TetherNet
import TetherWire
import TetherEncoding

/// One socket of a ping pair, admitted with an empty proof (`.park` in the SDK's terms: open mode
/// admits both roles with `{}`) and then handing its binary frames straight to its owner on the
/// loop. The pairs do not go through `RelayAdmission`, whose frames arrive through an
/// `AsyncStream`: a task hop on each side of every round trip would put the load process's
/// scheduling into the relay's RTT. Touched only on its loop.
final class ParkLeg: WebSocketDelegate, @unchecked Sendable {
    enum Stage { case connecting, awaitingChallenge, awaitingResult, admitted, closed }

    let role: RelayRole
    private(set) var stage = Stage.connecting
    private(set) var socket: WebSocketConnection?
    /// Called once: nil when admitted, else why not.
    private var onAdmission: ((String?) -> Void)?
    /// Every binary frame after admission.
    var onFrame: ([UInt8]) -> Void = { _ in }
    /// The socket ended after admission (code, reason).
    var onClose: (UInt16, String) -> Void = { _, _ in }

    init(role: RelayRole) { self.role = role }

    /// Connects to `url` and joins `room` on `loop`; `done` runs on the loop.
    func join(url: String, room: RoomName, tls: TLSClientContext? = nil, on loop: EventLoop, done: @escaping (String?) -> Void) {
        onAdmission = done
        let leg = UncheckedTransfer(self)
        WebSocketClient.connect(url, headers: HTTPHeaders([("x-relay-room", room.hex)]), tls: tls, delegate: self, on: loop) { result in
            let leg = leg.value
            switch result {
            case let .success(socket):
                leg.socket = socket
                leg.stage = .awaitingChallenge
                socket.send(text: Array(Hello(role: leg.role).json.utf8))
            case let .failure(error):
                leg.finish("connect: \(error)")
            }
        }
    }

    func send(_ frame: [UInt8]) { socket?.send(binary: frame) }

    private func finish(_ error: String?) {
        let done = onAdmission
        onAdmission = nil
        done?(error)
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveText text: [UInt8]) {
        let reply = JSONValue.parse(text)
        switch stage {
        case .awaitingChallenge:
            guard reply?.string("nonce") != nil else { return fail(socket, "no nonce") }
            stage = .awaitingResult
            socket.send(text: Array("{}".utf8))
        case .awaitingResult:
            guard reply?.bool("ok") == true else { return fail(socket, "refused: \(reply?.string("error") ?? "?")") }
            stage = .admitted
            finish(nil)
        case .connecting, .admitted, .closed:
            break
        }
    }

    private func fail(_ socket: WebSocketConnection, _ why: String) {
        finish(why)
        socket.close(code: 1000)
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveBinary data: [UInt8]) {
        if stage == .admitted { onFrame(data) }
    }

    func webSocketDidClose(_ socket: WebSocketConnection, code: UInt16, reason: String) {
        let wasAdmitted = stage == .admitted
        stage = .closed
        self.socket = nil
        if wasAdmitted { onClose(code, reason) } else { finish("closed \(code) \(reason)") }
    }
}
