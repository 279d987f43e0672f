import Foundation
import Glibc
import TetherNet

/// An HTTP + WebSocket echo application for server tests.
final class EchoApplication: HTTPServerDelegate, @unchecked Sendable {
    var wsOptions = WebSocketConnection.Options()
    /// `EchoSocket.leavingTheBoundToTheChassis` tests the chassis' own output bound.
    var socketDelegate = EchoSocket.shared
    let opened = NSLock()
    private var sockets: [WebSocketConnection] = []

    /// The sockets upgraded so far (touch each only on its loop).
    var upgraded: [WebSocketConnection] { opened.withLock { sockets } }

    func bodyLimit(for head: HTTPRequestHead) -> Int { head.path == "/small" ? 10 : 64 * 1024 }
    /// `/screened` is refused on its head, before its body (or its body cap) is considered.
    func screen(_ head: HTTPRequestHead, peer: SocketAddress?) -> HTTPResponse? { head.path == "/screened" ? .text(403, "screened") : nil }

    func respond(to request: HTTPServerRequest) -> HTTPResponse {
        switch request.head.path {
        case "/echo": return HTTPResponse(status: 200, headers: HTTPHeaders([("Content-Type", "application/octet-stream")]), body: request.body)
        case "/headers":
            return .text(200, request.head.headers.values("X-Dup").joined(separator: "|"))
        default: return .text(404, "no route \(request.head.method) \(request.head.path)")
        }
    }

    /// `/later` is answered 50 ms later from another thread (work done elsewhere, as the
    /// services' storage lanes do); everything else at once.
    func respond(to request: HTTPServerRequest, reply: @escaping @Sendable (HTTPResponse) -> Void) {
        guard request.head.path == "/later" else { return reply(respond(to: request)) }
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { reply(.text(200, "later")) }
    }

    func upgrade(_ request: HTTPServerRequest, handshake: WebSocketHandshake.ServerDecision) -> WebSocketUpgradeDecision {
        if request.head.headers.contains("Origin") { return .refuse(.text(403, "forbidden")) }
        return .accept { [self] connection, leftover in
            let socket = WebSocketConnection(connection: connection, role: .server, options: wsOptions, delegate: socketDelegate, leftover: leftover)
            opened.withLock { sockets.append(socket) }
        }
    }
}

/// Echoes every message back in kind, and stops reading a peer that does not read its echoes
/// (the back-pressure a splice applies to its other leg).
final class EchoSocket: WebSocketDelegate, @unchecked Sendable {
    static let shared = EchoSocket(pausesItself: true)
    /// Echoes without pausing itself: only `WebSocketConnection`'s bound holds it back.
    static let leavingTheBoundToTheChassis = EchoSocket(pausesItself: false)
    private let pausesItself: Bool
    private let lock = NSLock()

    init(pausesItself: Bool) { self.pausesItself = pausesItself }
    private var largestQueue = 0

    /// The most bytes any echo socket ever had queued for sending.
    var maxQueuedBytes: Int { lock.withLock { largestQueue } }

    func webSocket(_ socket: WebSocketConnection, didReceiveText text: [UInt8]) { echo(socket) { socket.send(text: text) } }
    func webSocket(_ socket: WebSocketConnection, didReceiveBinary data: [UInt8]) { echo(socket) { socket.send(binary: data) } }

    private func echo(_ socket: WebSocketConnection, _ send: () -> Void) {
        send()
        let queued = socket.connection.queuedBytes
        lock.withLock { largestQueue = max(largestQueue, queued) }
        if pausesItself, !socket.isWritable { socket.pauseReading() }
    }

    func webSocketWritabilityChanged(_ socket: WebSocketConnection) {
        if pausesItself, socket.isWritable { socket.resumeReading() }
    }

    func webSocketDidClose(_ socket: WebSocketConnection, code: UInt16, reason: String) {}
}

/// A blocking TCP client for sending exact (including malformed) bytes.
final class RawClient {
    let fd: Int32

    init(port: UInt16) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let ok = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard ok == 0 else { throw NetError.system("connect", errno) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close(fd) }

    func send(_ bytes: [UInt8]) { _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
    func send(_ text: String) { send(Array(text.utf8)) }

    /// Reads until the peer closes (or `limit` bytes, or the 5 s timeout).
    func readAll(limit: Int = 1 << 20) -> [UInt8] { read(atLeast: limit) }

    /// Reads at least `count` bytes, or until the peer closes or the 5 s timeout.
    func read(atLeast count: Int) -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while out.count < count {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { break }
            out += buffer[..<n]
        }
        return out
    }

    func readText() -> String { String(decoding: readAll(), as: UTF8.self) }

    /// On a non-blocking socket: sends `unit` again and again (resuming a partial one where it
    /// stopped, so the stream stays well-formed) until the kernel has taken nothing for `quiet`
    /// seconds — every buffer on the way is then full — or `limit` bytes went, or `deadline`.
    /// `watch` runs every few milliseconds meanwhile. Returns the bytes sent.
    func flood(_ unit: [UInt8], limit: Int, quiet: TimeInterval = 1, until deadline: Date, watch: () throws -> Void = {}) rethrows -> Int {
        var sent = 0, lastProgress = Date(), lastWatch = Date.distantPast
        while sent < limit, Date() < deadline, Date().timeIntervalSince(lastProgress) < quiet {
            let offset = sent % unit.count
            let n = unit.withUnsafeBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                sent += n
                lastProgress = Date()
            } else {
                // Until the kernel takes more (or 1 ms, to keep measuring `quiet`).
                var ready = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = Glibc.poll(&ready, 1, 1)
            }
            if Date().timeIntervalSince(lastWatch) > 0.005 {
                try watch()
                lastWatch = Date()
            }
        }
        return sent
    }

    /// Upgrades to WebSocket and returns the bytes after the 101 head.
    func upgrade(extraHeaders: String = "") -> (status: String, rest: [UInt8]) {
        send("GET / HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\(extraHeaders)\r\n")
        var got: [UInt8] = []
        while !got.starts(with: Array("HTTP".utf8)) || !String(decoding: got, as: UTF8.self).contains("\r\n\r\n") {
            let more = read(atLeast: 1)
            if more.isEmpty { break }
            got += more
        }
        let text = String(decoding: got, as: UTF8.self)
        guard let range = text.range(of: "\r\n\r\n") else { return (text, []) }
        let headLength = text.utf8.distance(from: text.startIndex, to: range.upperBound)
        return (String(text[..<range.lowerBound]), Array(got[headLength...]))
    }
}

/// Starts an asynchronous call and waits (up to `timeout` seconds) for the value it completes with.
func waitFor<T>(timeout: TimeInterval = 10, file: StaticString = #filePath, line: UInt = #line,
                _ start: (@escaping @Sendable (T) -> Void) -> Void) throws -> T {
    let box = Locked<T?>(nil)
    let done = DispatchSemaphore(value: 0)
    start { value in
        box.mutate { $0 = value }
        done.signal()
    }
    guard done.wait(timeout: .now() + timeout) == .success, let value = box.value else {
        throw NetError.timedOut
    }
    return value
}
