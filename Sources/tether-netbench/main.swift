// tether-netbench: a forwarding server on TetherNet that speaks exactly the subset of the relay
// protocol that ../shared/bench/wsload drives (open admission, mac/phone splice), so the network
// core can be measured against floor-relay before the real relay exists. Not a relay: no
// attestation, signatures, storage or limits. `GET /stats` reports the accept back-off count
// (the descriptor-exhaustion test reads it).
//
//   tether-netbench [--host 127.0.0.1] [--port 9202] [--loops N] [--keepalive S]
//                   [--tls-cert chain.pem --tls-key key.pem]
//   tether-netbench park ws[s]://127.0.0.1:PORT/ -n N --pid SERVER_PID [--ca ca.pem]
import Foundation
import Glibc
import TetherCrypto
import TetherNet
import TetherWire
import TetherEncoding

struct Options {
    var host = "127.0.0.1"
    var port: UInt16 = 9202
    var loops = 1
    var keepalive: UInt64 = 30
    var tlsCert: String?
    var tlsKey: String?

    init(_ arguments: [String]) {
        var it = arguments.dropFirst().makeIterator()
        while let argument = it.next() {
            switch argument {
            case "--host": host = it.next() ?? host
            case "--port": port = UInt16(it.next() ?? "") ?? port
            case "--loops": loops = Int(it.next() ?? "") ?? loops
            case "--keepalive": keepalive = UInt64(it.next() ?? "") ?? keepalive
            case "--tls-cert": tlsCert = it.next()
            case "--tls-key": tlsKey = it.next()
            default:
                FileHandle.standardError.write(Data("usage: tether-netbench [--host H] [--port P] [--loops N] [--keepalive S] [--tls-cert F --tls-key F]\n".utf8))
                exit(2)
            }
        }
    }
}

/// One room: at most one admitted socket per role. Lives on one loop.
final class Room {
    let name: String
    var mac: Leg?
    var phone: Leg?
    init(name: String) { self.name = name }
}

/// One WebSocket in a room, through admission and then the splice.
final class Leg: WebSocketDelegate, @unchecked Sendable {
    enum State { case hello, proof(role: String), admitted(role: String) }

    unowned let rooms: Rooms
    /// The room, held directly: the splice must not look it up per frame.
    let room: Room
    var socket: WebSocketConnection?
    var state = State.hello

    init(roomName: String, rooms: Rooms) {
        self.rooms = rooms
        room = rooms.room(roomName)
    }

    var peer: Leg? {
        guard case let .admitted(role) = state else { return nil }
        return role == "mac" ? room.phone : room.mac
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveText text: [UInt8]) {
        switch state {
        case .hello:
            guard let object = try? JSONSerialization.jsonObject(with: Data(text)) as? [String: Any],
                  let role = object["role"] as? String, role == "mac" || role == "phone" else {
                return socket.close(code: 1008, reason: "bad hello")
            }
            state = .proof(role: role)
            socket.send(text: Array("{\"nonce\":\"\(Base64.encode(SecureRandom.bytes(32)))\"}".utf8))
        case let .proof(role):
            admit(role: role, socket: socket)
        case .admitted:
            socket.close(code: 1003, reason: "text after admission")
        }
    }

    private func admit(role: String, socket: WebSocketConnection) {
        let room = self.room
        if role == "phone", room.mac == nil {
            socket.send(text: Array(#"{"ok":false,"error":"mac offline"}"#.utf8))
            return socket.close(code: 1008, reason: "mac offline")
        }
        let previous = role == "mac" ? room.mac : room.phone
        if role == "mac" { room.mac = self } else { room.phone = self }
        state = .admitted(role: role)
        previous?.socket?.close(code: 1000, reason: "displaced")
        let reply = role == "phone" ? "{\"ok\":true,\"registrationToken\":\"\(Base64.encode(SecureRandom.bytes(24)))\"}" : #"{"ok":true}"#
        socket.send(text: Array(reply.utf8))
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveBinary data: [UInt8]) {
        guard let peer, let out = peer.socket else { return }
        out.send(binary: data)
        // Back-pressure: stop reading this leg while the other cannot keep up.
        if !out.isWritable { socket.pauseReading() }
    }

    func webSocketWritabilityChanged(_ socket: WebSocketConnection) {
        if socket.isWritable { peer?.socket?.resumeReading() }
    }

    func webSocketDidClose(_ socket: WebSocketConnection, code: UInt16, reason: String) {
        self.socket = nil
        guard case let .admitted(role) = state else { return }
        let room = self.room
        if role == "mac", room.mac === self { room.mac = nil; room.phone?.socket?.close(code: 1001, reason: "peer gone") }
        if role == "phone", room.phone === self { room.phone = nil; room.mac?.socket?.close(code: 1001, reason: "peer gone") }
        if room.mac == nil, room.phone == nil { rooms.remove(room) }
    }
}

/// The rooms of one loop (touched only on that loop).
final class Rooms: @unchecked Sendable {
    private var rooms: [String: Room] = [:]
    func room(_ name: String) -> Room {
        if let room = rooms[name] { return room }
        let room = Room(name: name)
        rooms[name] = room
        return room
    }
    func remove(_ room: Room) { if rooms[room.name] === room { rooms[room.name] = nil } }
}

final class Application: HTTPServerDelegate, @unchecked Sendable {
    let group: EventLoopGroup
    /// The server's accept back-off count, reported by `GET /stats` (set once the server exists).
    var acceptBackOffs: NetCounter?
    let roomsPerLoop: [Rooms]
    let wsOptions: WebSocketConnection.Options

    init(group: EventLoopGroup, keepalive: UInt64) {
        self.group = group
        roomsPerLoop = group.loops.map { _ in Rooms() }
        var options = WebSocketConnection.Options()
        options.maxFramePayload = 256 * 1024
        options.maxMessageSize = 256 * 1024
        options.keepaliveInterval = keepalive > 0 ? .seconds(keepalive) : nil
        wsOptions = options
    }

    func respond(to request: HTTPServerRequest) -> HTTPResponse {
        guard request.head.path == "/stats" else { return .text(404, "not found") }
        return .text(200, "accept_backoffs \(acceptBackOffs?.value ?? 0)\n")
    }

    func upgrade(_ request: HTTPServerRequest, handshake: WebSocketHandshake.ServerDecision) -> WebSocketUpgradeDecision {
        if request.head.headers.contains("Origin") { return .refuse(.text(403, "forbidden")) }
        let values = request.head.headers.values("x-relay-room")
        guard values.count == 1, let room = RoomName(header: String(values[0])) else { return .refuse(.text(400, "bad room")) }
        // A room lives on one loop, chosen from its name.
        let index = room.bucket % group.loops.count
        let target = group.loops[index]
        let rooms = roomsPerLoop[index]
        let options = wsOptions
        return .accept { transport, leftover in
            let start: @Sendable (any Transport) -> Void = { transport in
                // The socket holds its leg (delegate) and the leg its socket until the close breaks the cycle.
                let leg = Leg(roomName: room.hex, rooms: rooms)
                leg.socket = WebSocketConnection(connection: transport, role: .server, options: options, delegate: leg, leftover: leftover)
            }
            if transport.loop === target {
                start(transport)
            } else {
                // TLS moves with its session, like plain TCP.
                transport.handoff(to: target) { start($0) }
            }
        }
    }
}

signal(SIGPIPE, SIG_IGN)
if CommandLine.arguments.dropFirst().first == "park" {
    try ParkClient.run(Array(CommandLine.arguments.dropFirst(2)))
}
let options = Options(CommandLine.arguments)
// Block the stop signals before any loop thread exists, so only sigwait below receives them.
var stop = sigset_t()
sigemptyset(&stop)
sigaddset(&stop, SIGINT)
sigaddset(&stop, SIGTERM)
pthread_sigmask(SIG_BLOCK, &stop, nil)
let group = try EventLoopGroup(count: options.loops)
var configuration = HTTPServer.Configuration()
configuration.host = options.host
configuration.port = options.port
if let cert = options.tlsCert, let key = options.tlsKey {
    configuration.tls = try TLSServerContext(certificateChainPath: cert, privateKeyPath: key)
}
let application = Application(group: group, keepalive: options.keepalive)
let server = HTTPServer(group: group, configuration: configuration, delegate: application)
application.acceptBackOffs = server.acceptBackOffs
let port = try server.start()
FileHandle.standardError.write(Data("tether-netbench listening on \(options.host):\(port) with \(options.loops) loop(s)\(configuration.tls == nil ? "" : ", TLS")\n".utf8))
var received: Int32 = 0
sigwait(&stop, &received)
server.stopAccepting()
group.shutdown()
