public import TetherNet
public import TetherWire
import Foundation
public import TetherEncoding
import TetherSync

/// How a client proves its right to a slot (client.md §6.3).
public enum JoinProof: Sendable {
    /// `{}`: a Mac parking for pairing, or a phone in an open-mode pairing room.
    case park
    /// A ticket from `/attest` (a phone in a fresh pairing under attestation).
    case ticket(String)
    /// A signed join with the room secret (an established room, either role).
    case signed(RoomSecret)
}

/// Why a join did not end admitted.
public enum AdmissionError: Error, Equatable, Sendable, CustomStringConvertible {
    /// No WebSocket opened: the connection was refused, TLS failed, or the attempt timed out.
    case unreachable(String)
    /// The upgrade was refused before the WebSocket opened (403, 400, 421, 429, 503, …).
    case upgradeRefused(status: Int, body: String, owner: String?)
    /// `{"ok":false,"error":…}` (then close 1008 with the same reason).
    case refused(String)
    /// The socket closed before a Result arrived.
    case closed(code: UInt16, reason: String)
    /// The relay spoke something that is not the admission protocol.
    case protocolViolation(String)

    /// What a reconnect loop should do about this failure: retry, re-resolve, wait long, or give
    /// up.
    public var signal: RelaySignal {
        switch self {
        case .unreachable, .protocolViolation: .transient
        case let .upgradeRefused(status, _, owner): RelaySignal.http(status: status, owner: owner)
        case let .refused(reason): reason == "mac offline" || reason == "rate limited" ? .transient : .fatal
        case let .closed(code, reason): RelaySignal.close(code: code, reason: reason)
        }
    }

    public var description: String {
        switch self {
        case let .unreachable(why): "relay unreachable: \(why)"
        case let .upgradeRefused(status, body, _): "relay refused the connection (\(status)): \(body)"
        case let .refused(reason): "Relay refused admission: \(reason)"
        case let .closed(code, reason): "relay closed the connection (\(code)\(reason.isEmpty ? "" : " \(reason)"))"
        case let .protocolViolation(what): "relay protocol violation: \(what)"
        }
    }
}

/// An admitted socket: binary frames in and out, and how it ended.
public final class AdmittedSocket: @unchecked Sendable { // the connection and session are touched only on their loop, reached by execute
    /// The role the socket was admitted in.
    public let role: RelayRole
    /// Minted for every admitted phone (useful only in a pairing room, for `/register`).
    public let registrationToken: String?
    /// Each binary frame the peer sent, in order; finishes when the socket closes.
    public let frames: InboundFrames
    private let connection: WebSocketConnection
    private let session: AdmissionSession

    init(role: RelayRole, registrationToken: String?, frames: InboundFrames, connection: WebSocketConnection, session: AdmissionSession) {
        self.role = role
        self.registrationToken = registrationToken
        self.frames = frames
        self.connection = connection
        self.session = session
    }

    /// Sends one binary frame (the relay forwards it unchanged to the admitted peer).
    public func send(_ frame: [UInt8]) {
        let socket = self
        connection.connection.loop.execute { socket.connection.send(binary: frame) }
    }

    /// Closes the socket (1000); ``ended()`` returns once the close handshake finishes.
    public func close() {
        let socket = self
        connection.connection.loop.execute { socket.connection.close(code: WebSocketCloseCode.normal) }
    }

    /// The relay's close once the socket has ended (nil while open).
    public var closeReceived: (code: UInt16, reason: String)? { session.closeReceived }

    /// Bytes received and not yet taken from `frames` (read on the socket's loop).
    func bufferedByteCount() async -> Int {
        let session = self.session
        return await withCheckedContinuation { continuation in
            connection.connection.loop.execute { continuation.resume(returning: session.bufferedBytes) }
        }
    }

    /// Whether the last keepalive ping is still unanswered (read on the socket's loop).
    func keepalivePongOverdue() async -> Bool {
        let socket = self
        return await withCheckedContinuation { answer in
            connection.connection.loop.execute { answer.resume(returning: socket.connection.pongOverdue) }
        }
    }

    /// Returns once the socket has ended, with the close it ended with (without consuming frames).
    public func ended() async -> (code: UInt16, reason: String) { await session.ended() }
}

/// The binary frames of an admitted socket, in order; taking one lets the socket read more
/// (see `AdmissionSession.bufferHighWater`).
public struct InboundFrames: AsyncSequence, Sendable {
    public typealias Element = [UInt8]
    let stream: AsyncStream<[UInt8]>
    let session: AdmissionSession

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: AsyncStream<[UInt8]>.Iterator
        let session: AdmissionSession

        public mutating func next() async -> [UInt8]? {
            let frame = await base.next()
            if let frame { session.consumed(frame.count) }
            return frame
        }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: stream.makeAsyncIterator(), session: session) }
}

/// Joins a room (client.md §6): upgrade with the room header and fixed User-Agent, Hello,
/// Challenge, Proof, Result.
public enum RelayAdmission {
    /// Joins `room` as `role` and returns the admitted socket. `nonDisplacing` is a phone's
    /// notification extension joining briefly: refused `slot occupied` rather than displacing the
    /// app's socket. `timeout` bounds the connection and the WebSocket upgrade.
    public static func join(_ room: RelayRoom, role: RelayRole, proof: JoinProof, nonDisplacing: Bool = false,
                            on loop: EventLoop, tls: TLSClientContext? = nil,
                            timeout: Duration = .seconds(30)) async throws(AdmissionError) -> AdmittedSocket {
        let outcome: Result<AdmittedSocket, AdmissionError> = await withCheckedContinuation { continuation in
            let session = AdmissionSession(room: room, role: role, proof: proof, nonDisplacing: nonDisplacing) { continuation.resume(returning: $0) }
            WebSocketClient.connect(room.webSocketURL, headers: HTTPHeaders(room.headers), tls: tls, delegate: session, on: loop,
                                    timeout: timeout) { result in
                switch result {
                case let .success(connection): session.opened(connection)
                case let .failure(.network(error)): session.fail(.unreachable("\(error)"))
                case let .failure(.refused(status, body)):
                    session.fail(.upgradeRefused(status: status, body: String(decoding: body, as: UTF8.self), owner: nil))
                }
            }
        }
        return try outcome.get()
    }
}

/// One join in progress, then the admitted socket's delegate. Touched only on its loop.
final class AdmissionSession: WebSocketDelegate, @unchecked Sendable { // stage and connection only on its loop; the ending under a lock
    private enum Stage { case connecting, awaitingChallenge, awaitingResult, admitted, finished }

    let room: RelayRoom
    let role: RelayRole
    let proof: JoinProof
    let nonDisplacing: Bool
    private var stage = Stage.connecting
    private var connection: WebSocketConnection?
    private var completion: ((Result<AdmittedSocket, AdmissionError>) -> Void)?
    private var frames: AsyncStream<[UInt8]>.Continuation?
    /// The close once it came, and who waits for it: the one part of a session other threads read.
    private struct Ending {
        var closed: (code: UInt16, reason: String)?
        var waiters: [Int: CheckedContinuation<(code: UInt16, reason: String), Never>] = [:]
        var nextWaiter = 0
    }

    private let ending = Locked(Ending())

    init(room: RelayRoom, role: RelayRole, proof: JoinProof, nonDisplacing: Bool,
         completion: @escaping (Result<AdmittedSocket, AdmissionError>) -> Void) {
        self.room = room
        self.role = role
        self.proof = proof
        self.nonDisplacing = nonDisplacing
        self.completion = completion
    }

    var closeReceived: (code: UInt16, reason: String)? { ending.withLock { $0.closed } }

    /// Waits for the close; a cancelled waiter returns at once with code 0.
    func ended() async -> (code: UInt16, reason: String) {
        let id = ending.withLock {
            $0.nextWaiter += 1
            return $0.nextWaiter
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let done: (code: UInt16, reason: String)? = ending.withLock {
                    if let closed = $0.closed { return closed }
                    if Task.isCancelled { return (0, "") }
                    $0.waiters[id] = continuation
                    return nil
                }
                if let done { continuation.resume(returning: done) }
            }
        } onCancel: {
            let waiter = ending.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(returning: (0, ""))
        }
    }

    func opened(_ connection: WebSocketConnection) {
        self.connection = connection
        stage = .awaitingChallenge
        connection.send(text: Array(Hello(role: role, nonDisplacing: nonDisplacing).json.utf8))
    }

    func fail(_ error: AdmissionError) {
        stage = .finished
        finish(.failure(error))
        connection?.terminate()
    }

    private func finish(_ result: Result<AdmittedSocket, AdmissionError>) {
        let completion = self.completion
        self.completion = nil
        completion?(result)
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveText text: [UInt8]) {
        socket.connection.loop.assertInEventLoop()
        control(text)
    }

    func webSocket(_ socket: WebSocketConnection, didReceiveBinary data: [UInt8]) {
        socket.connection.loop.assertInEventLoop()
        // The shipping clients accept the relay's JSON in a binary frame too (client.md §6.2).
        guard stage == .admitted else { return control(data) }
        // Frames the application has not taken yet are bounded: past the high-water mark the
        // socket stops reading, so TCP (and the relay's splice) holds the sender back.
        bufferedBytes += data.count
        frames?.yield(data)
        if !readingPaused, bufferedBytes > Self.bufferHighWater {
            readingPaused = true
            connection?.pauseReading()
        }
    }

    private func control(_ bytes: [UInt8]) {
        guard case let .object(fields)? = JSONValue.parse(bytes) else { return fail(.protocolViolation("not a JSON object")) }
        switch stage {
        case .awaitingChallenge:
            guard case let .string(nonceText)? = fields["nonce"], let nonce = try? Base64.decode(nonceText), nonce.count == 32 else {
                return fail(.protocolViolation("no 32-byte nonce in the challenge"))
            }
            stage = .awaitingResult
            connection?.send(text: Array(proofJSON(nonce: nonce).utf8))
        case .awaitingResult:
            guard case let .bool(ok)? = fields["ok"] else { return fail(.protocolViolation("no ok in the result")) }
            guard ok else {
                let reason: String
                if case let .string(text)? = fields["error"] { reason = text } else { reason = "" }
                return fail(.refused(reason))
            }
            var token: String?
            if case let .string(text)? = fields["registrationToken"] { token = text }
            guard let connection else { return }
            stage = .admitted
            scheduleKeepalive()
            let (stream, continuation) = AsyncStream<[UInt8]>.makeStream()
            frames = continuation
            finish(.success(AdmittedSocket(role: role, registrationToken: token, frames: InboundFrames(stream: stream, session: self),
                                           connection: connection, session: self)))
        case .admitted:
            // A text frame after admission is a protocol error (client.md §6.5).
            connection?.close(code: 1003, reason: "malformed frame")
        case .connecting, .finished:
            break
        }
    }

    /// Pings every 15 s keep NAT state alive and meet the relay's 30 s sweep; a ping without a
    /// pong within 10 s means the path is dead: the socket is closed 1001 (client.md §14).
    static let keepaliveInterval: Duration = .seconds(15)
    static let pongTimeout: Duration = .seconds(10)

    private func scheduleKeepalive() {
        guard let loop = connection?.connection.loop else { return }
        _ = loop.schedule(after: Self.keepaliveInterval) { [weak self] in
            guard let self, self.stage == .admitted, let connection = self.connection, connection.isOpen else { return }
            connection.keepalivePing()
            _ = loop.schedule(after: Self.pongTimeout) { [weak self] in
                guard let self, let connection = self.connection, connection.isOpen, connection.pongOverdue else { return }
                // The path is dead: a close frame for form's sake, then the socket goes at once
                // rather than waiting out a close handshake nobody will answer.
                connection.close(code: WebSocketCloseCode.goingAway, reason: WebSocketConnection.keepaliveTimeoutReason)
                connection.terminate(code: WebSocketCloseCode.goingAway, reason: WebSocketConnection.keepaliveTimeoutReason)
            }
            self.scheduleKeepalive()
        }
    }

    static let bufferHighWater = 4 << 20
    static let bufferLowWater = 1 << 20
    /// Bytes delivered to the frame stream and not yet taken by the application (loop only).
    private(set) var bufferedBytes = 0
    private var readingPaused = false

    /// The application took a frame of `count` bytes.
    func consumed(_ count: Int) {
        guard let loop = connection?.connection.loop else { return }
        loop.execute { [self] in
            bufferedBytes -= count
            if readingPaused, bufferedBytes <= Self.bufferLowWater {
                readingPaused = false
                connection?.resumeReading()
            }
        }
    }

    private func proofJSON(nonce: [UInt8]) -> String {
        switch proof {
        case .park: return "{}"
        case let .ticket(ticket): return #"{"ticket":"\#(ticket)"}"#
        case let .signed(secret):
            let transcript = JoinTranscript(role: role, nonce: nonce, room: room.name, origin: room.origin)
            return #"{"sig":"\#(Base64.encode(secret.joinSigningKey().signature(for: transcript.bytes)))"}"#
        }
    }

    func webSocketDidClose(_ socket: WebSocketConnection, code: UInt16, reason: String) {
        socket.connection.loop.assertInEventLoop()
        let waiters = ending.withLock { ending in
            ending.closed = (code, reason)
            defer { ending.waiters = [:] }
            return Array(ending.waiters.values)
        }
        for waiter in waiters { waiter.resume(returning: (code, reason)) }
        if stage != .admitted, stage != .finished {
            stage = .finished
            return finish(.failure(.closed(code: code, reason: reason)))
        }
        stage = .finished
        frames?.finish()
        frames = nil
    }
}
