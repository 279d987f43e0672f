import TetherCrypto
import TetherSync

/// What a WebSocket connection tells its owner. Called on the connection's loop.
public protocol WebSocketDelegate: AnyObject {
    func webSocket(_ socket: WebSocketConnection, didReceiveText text: [UInt8])
    func webSocket(_ socket: WebSocketConnection, didReceiveBinary data: [UInt8])
    /// The connection is gone: the close code the peer sent (or 1006 if none), and its reason.
    func webSocketDidClose(_ socket: WebSocketConnection, code: UInt16, reason: String)
    /// The send queue crossed a water mark (see `isWritable`).
    func webSocketWritabilityChanged(_ socket: WebSocketConnection)
    /// A frame or message over the size limits is about to end the socket with 1009: a text
    /// message to send first and the close reason. Nil (the default) closes with a bare 1009,
    /// as the relay's clients expect; the signaling server says `too_large` (signaling.md §4).
    func webSocketOversizeNotice(_ socket: WebSocketConnection) -> (text: [UInt8], reason: String)?
    /// The socket's output has stayed above its transport's high-water mark for
    /// `Options.stallTimeout`: the peer is not reading. The default closes it
    /// 1008 `write stalled` (relay.md's words); a service closes it in its own. A close from here
    /// drops the frames the peer has not begun to receive, so its close frame is next in line.
    func webSocketDidStall(_ socket: WebSocketConnection)
}

public extension WebSocketDelegate {
    func webSocketWritabilityChanged(_ socket: WebSocketConnection) {}
    func webSocketOversizeNotice(_ socket: WebSocketConnection) -> (text: [UInt8], reason: String)? { nil }
    func webSocketDidStall(_ socket: WebSocketConnection) { socket.close(code: WebSocketCloseCode.policyViolation, reason: "write stalled") }
}

/// A WebSocket over a TCP connection (RFC 6455), server or client side.
///
/// Pings are answered automatically; optional keepalive pings detect a dead peer. The close
/// handshake is complete: a received close is echoed; a protocol violation sends the specified
/// close code and ends the connection.
///
/// Output is bounded whatever fills it (frames the owner sends, pongs, close frames): once the
/// transport's queue passes `Options.outputReadLimit`, no further frame is read — not even the
/// rest of the read in hand — until it drains below the transport's low-water mark, and one that
/// stays above the transport's high-water mark for `Options.stallTimeout` is reported stalled. A
/// flood of pings costs at most one queued pong (RFC 6455 §5.5.3: only the most recent ping need
/// be answered).
public final class WebSocketConnection: TransportDelegate {
    public struct Options: Sendable {
        /// Largest frame payload accepted (→ 1009).
        public var maxFramePayload = 1 << 20
        /// Largest reassembled message (→ 1009).
        public var maxMessageSize = 1 << 20
        /// Send a ping this often and drop a peer that has not answered the previous one (nil: off).
        public var keepaliveInterval: Duration?
        /// How long to wait for the peer's close frame after sending ours.
        public var closeTimeout: Duration = .seconds(5)
        /// How long output may stay above the high-water mark before `webSocketDidStall` (nil:
        /// never; memory is bounded by `outputReadLimit` either way).
        public var stallTimeout: Duration?
        /// Past this many bytes queued for sending the socket is not read until its queue drains
        /// below the transport's low-water mark. 1 MiB, four times the transport's high-water
        /// mark, by default: a splice holds the sender back at the high-water mark already, and
        /// bulk frames in flight both ways (eight 64 KiB frames a direction) must not stop the
        /// echo too; a service with nothing to splice may stop at the mark itself.
        public var outputReadLimit = 1 << 20
        public init() {}
    }

    // Every open socket holds one of these, so its layout is kept lean (relay.md's parked macs
    // are mostly this object): rarely used state lives out of line, flags sit together.
    public let connection: any Transport
    // Loop-confined state (one thread touches it), so exclusivity is not checked at run time:
    // on the splice path those checks were a quarter of the instructions (callgrind).
    /// Held strongly until the socket closes (then released), so no weak side table slows the
    /// reference counting of the splice path.
    @exclusivity(unchecked) public var delegate: (any WebSocketDelegate)?
    @exclusivity(unchecked) private var parser: WebSocketFrameParser
    @exclusivity(unchecked) private var assembler: WebSocketMessageAssembler
    private let closeTimeout: Duration
    @exclusivity(unchecked) private var receivedCloseStorage = OutOfLine<(code: UInt16, reason: String)>()
    private var receivedClose: (code: UInt16, reason: String)? {
        get { receivedCloseStorage.value }
        set { receivedCloseStorage.value = newValue }
    }
    @exclusivity(unchecked) private var sweep: KeepaliveSweep?
    /// Links in the loop's keepalive list (see `KeepaliveSweep`).
    unowned(unsafe) var sweepNext: WebSocketConnection?
    unowned(unsafe) var sweepPrevious: WebSocketConnection?
    /// Out of line: only a connection waiting for the peer's close answer has one.
    @exclusivity(unchecked) private var closeTimerStorage = OutOfLine<EventLoop.TimerID>()
    private var closeTimer: EventLoop.TimerID? {
        get { closeTimerStorage.value }
        set { closeTimerStorage.value = newValue }
    }
    /// Out of line: only a socket whose output is backed up has one.
    @exclusivity(unchecked) private var stallTimerStorage = OutOfLine<EventLoop.TimerID>()
    /// The most recent ping's payload while a pong cannot be queued yet (the output is backed up).
    @exclusivity(unchecked) private var pendingPongStorage = OutOfLine<[UInt8]>()
    private let stallTimeout: Duration
    private let outputReadLimit: Int
    /// Strong self-reference while open, so a socket lives as long as its TCP connection.
    @exclusivity(unchecked) private var retainSelf: WebSocketConnection?
    public let role: WebSocketFrameParser.Role
    /// Why reading is paused: the owner (`pauseReading`), the output bound, a close that dropped
    /// unsent output; each lifts only its own.
    @exclusivity(unchecked) private var pauses = ReadingPauses()
    /// The output bound stopped a read with frames left in the parser.
    @exclusivity(unchecked) private var framesLeftUnread = false
    /// The stall timeout passed: a close from now on drops what the peer has not begun to take.
    @exclusivity(unchecked) private var stalled = false
    @exclusivity(unchecked) private var sentClose = false
    /// True once the connection ended because the peer broke the protocol (1002/1007/1009 from
    /// this side), so an application can tell a transport error from a close the peer chose.
    @exclusivity(unchecked) public private(set) var failedWithProtocolError = false
    @exclusivity(unchecked) private var finished = false
    @exclusivity(unchecked) private var awaitingPong = false

    /// The options the connection was opened with.
    public var options: Options {
        var options = Options()
        options.maxFramePayload = parser.maxFramePayload
        options.maxMessageSize = assembler.maxMessageSize
        options.keepaliveInterval = sweep?.interval
        options.closeTimeout = closeTimeout
        options.stallTimeout = stallTimeout > .zero ? stallTimeout : nil
        options.outputReadLimit = outputReadLimit
        return options
    }

    public var isWritable: Bool { connection.isWritable }
    public var isOpen: Bool { !finished && !sentClose }
    public var peer: SocketAddress? { connection.peer }

    /// Takes over `connection` after a completed handshake; `leftover` is what arrived after it.
    public init(connection: any Transport, role: WebSocketFrameParser.Role, options: Options = Options(),
                delegate: (any WebSocketDelegate)?, leftover: [UInt8] = []) {
        connection.loop.assertInEventLoop()
        self.connection = connection
        self.role = role
        closeTimeout = options.closeTimeout
        stallTimeout = options.stallTimeout ?? .zero
        outputReadLimit = options.outputReadLimit
        self.delegate = delegate
        parser = WebSocketFrameParser(role: role, maxFramePayload: options.maxFramePayload)
        assembler = WebSocketMessageAssembler(maxMessageSize: options.maxMessageSize)
        retainSelf = self
        connection.delegate = self
        if let interval = options.keepaliveInterval {
            let sweep = connection.loop.keepaliveSweep(interval: interval)
            sweep.add(self)
            self.sweep = sweep
        }
        if !connection.isWritable { outputBackedUp() }
        checkOutputReadLimit()
        if !leftover.isEmpty { leftover.withUnsafeBytes { process($0) } }
    }

    // MARK: Sending

    public func send(text: [UInt8]) { send(.text, text) }
    public func send(binary: [UInt8]) { send(.binary, binary) }
    public func ping(_ payload: [UInt8] = []) { send(.ping, Array(payload.prefix(125))) }

    /// A keepalive ping driven by the owner's own schedule (clients with their own timeouts):
    /// `pongOverdue` stays true until the peer's pong arrives.
    public func keepalivePing() {
        connection.loop.assertInEventLoop()
        awaitingPong = true
        send(.ping, [])
    }

    public var pongOverdue: Bool { awaitingPong }

    /// Sends one frame. A server's frames go out as a stack-built header and the caller's
    /// payload array in one `writev` (no copy, no allocation); a client masks a copy with a fresh
    /// random key.
    public func send(_ opcode: WebSocketOpcode, _ payload: [UInt8], fin: Bool = true) {
        connection.loop.assertInEventLoop()
        guard !finished, !sentClose || opcode == .close else { return }
        switch role {
        case .server:
            WebSocketFrameEncoder.withHeader(fin: fin, opcode: opcode, length: payload.count) { header in
                connection.write(header: header, payload: payload)
            }
        case .client:
            let key = SecureRandom.bytes(4)
            connection.write(WebSocketFrameEncoder.encode(WebSocketFrame(fin: fin, opcode: opcode, payload: payload),
                                                          maskingKey: (key[0], key[1], key[2], key[3])))
        }
        checkOutputReadLimit()
    }

    /// The output bound's one check per write.
    @inline(__always)
    private func checkOutputReadLimit() {
        if connection.queuedBytes > outputReadLimit { pause(Self.pausedByOutput) }
    }

    /// The local reason given to the delegate when a keepalive ping went unanswered (the peer
    /// itself sees no close frame, only the TCP reset: 1006).
    public static let keepaliveTimeoutReason = "keepalive timeout"

    /// Starts the close handshake; the connection ends when the peer answers (or after the timeout).
    /// `discardingUnsentOutput` (and any close of a stalled socket) first drops the frames the
    /// peer has not begun to receive: one that is not reading gets its close frame as soon as it
    /// reads again, after whole frames only, instead of a frame cut off by the close timeout.
    public func close(code: UInt16 = WebSocketCloseCode.normal, reason: String = "", discardingUnsentOutput: Bool = false) {
        connection.loop.assertInEventLoop()
        guard !finished, !sentClose else { return }
        sentClose = true
        if discardingUnsentOutput || stalled {
            // A peer that is not reading is not read either while its close frame waits: what it
            // sends now is dropped unread, and its close answer matters little (the close timeout
            // ends the connection all the same).
            pause(Self.pausedByClose)
            connection.discardUnsentOutput()
        }
        send(.close, WebSocketFrameEncoder.closePayload(code: code, reason: reason))
        if receivedClose != nil {
            finishAfterFlush(code: receivedClose!.0, reason: receivedClose!.1)
        } else {
            // unowned(unsafe): the socket outlives its timers (finish() cancels them first), and a
            // weak capture would give every socket a side table.
            closeTimer = connection.loop.schedule(after: closeTimeout) { [unowned(unsafe) self] in
                self.terminate(code: WebSocketCloseCode.abnormal, reason: "close timeout")
            }
        }
    }

    /// Drops the TCP connection without a close frame (a dead or abusive peer).
    public func terminate(code: UInt16 = WebSocketCloseCode.abnormal, reason: String = "") {
        connection.loop.assertInEventLoop()
        guard !finished else { return }
        finish(code: code, reason: reason)
        connection.close()
    }

    public func pauseReading() {
        connection.loop.assertInEventLoop()
        pause(Self.pausedByOwner)
    }

    public func resumeReading() {
        connection.loop.assertInEventLoop()
        resume(Self.pausedByOwner)
    }

    private static let pausedByOwner: UInt8 = 1
    private static let pausedByOutput: UInt8 = 2
    private static let pausedByClose: UInt8 = 4

    private func pause(_ reason: UInt8) {
        if pauses.add(reason) { connection.pauseReading() }
    }

    /// Lifts `reason`; with nothing else holding the socket it is read again, and the frames the
    /// output bound left in the parser go out first (a new read is parsed after them). They go
    /// from a task of their own: a resume may come from inside the transport's flush, which the
    /// delegate must not be entered from.
    private func resume(_ reason: UInt8) {
        guard pauses.lift(reason), !finished else { return }
        connection.resumeReading()
        // Only after a read the bound cut short: a splice resumes its sockets all the time, with
        // part of a large frame in the parser, and must not pay for a task each time.
        guard framesLeftUnread else { return }
        framesLeftUnread = false
        let this = UncheckedTransfer(self)
        connection.loop.execute {
            let socket = this.value
            if socket.pauses.isEmpty, socket.parser.bufferedByteCount > 0 { socket.process(UnsafeRawBufferPointer(start: nil, count: 0)) }
        }
    }

    // MARK: The output bound

    /// Above the high-water mark: the stall clock runs (reading stops at `outputReadLimit`).
    private func outputBackedUp() {
        guard !finished, stallTimeout > .zero, stallTimerStorage.isEmpty else { return }
        // unowned(unsafe): finish() cancels the timer before the socket can go.
        stallTimerStorage.value = connection.loop.schedule(after: stallTimeout) { [unowned(unsafe) self] in
            self.stallTimerStorage.value = nil
            guard !self.finished, !self.connection.isWritable else { return }
            self.stalled = true
            self.delegate?.webSocketDidStall(self)
        }
    }

    private func outputDrained() {
        if let timer = stallTimerStorage.value {
            connection.loop.cancel(timer)
            stallTimerStorage.value = nil
        }
        resume(Self.pausedByOutput)
    }

    /// A pong for `payload` now, or — while earlier output is still queued — once it has left,
    /// replaced meanwhile by any later ping's: a flood of pings queues one pong.
    private func answerPing(_ payload: [UInt8]) {
        if connection.queuedBytes == 0 { return send(.pong, payload) }
        if pendingPongStorage.isEmpty { connection.notifyWhenDrained() }
        pendingPongStorage.value = payload
    }

    // MARK: TransportDelegate

    public func transport(_ connection: any Transport, didRead bytes: UnsafeRawBufferPointer) { process(bytes) }

    public func transportDidClose(_ connection: any Transport, error: NetError?) {
        let (code, reason) = receivedClose ?? (WebSocketCloseCode.abnormal, "")
        finish(code: code, reason: reason)
    }

    public func transportWritabilityChanged(_ connection: any Transport) {
        if connection.isWritable { outputDrained() } else { outputBackedUp() }
        delegate?.webSocketWritabilityChanged(self)
    }

    public func transportDidDrain(_ connection: any Transport) {
        guard let payload = pendingPongStorage.value else { return }
        pendingPongStorage.value = nil
        send(.pong, payload)
    }

    // MARK: Receiving

    private func process(_ bytes: UnsafeRawBufferPointer) {
        guard !finished else { return }
        var failure: WebSocketProtocolError?
        do throws(WebSocketProtocolError) {
            // Complete frames are parsed straight out of the loop's read buffer. Once the output
            // is backed up the rest stays in the parser (one read at most) until it drains.
            try parser.consume(bytes) { frame in
                guard !finished, receivedCloseStorage.isEmpty else { return false }
                do throws(WebSocketProtocolError) {
                    if let event = try assembler.consume(frame) { handle(event) }
                } catch {
                    failure = error
                    return false
                }
                guard !finished, receivedCloseStorage.isEmpty else { return false }
                guard !pauses.contains(Self.pausedByOutput) else {
                    framesLeftUnread = true
                    return false
                }
                return true
            }
        } catch {
            failure = error
        }
        if let failure { fail(failure) }
    }

    private func handle(_ event: WebSocketMessageAssembler.Event) {
        switch event {
        case let .text(text): delegate?.webSocket(self, didReceiveText: text)
        case let .binary(data): delegate?.webSocket(self, didReceiveBinary: data)
        case let .ping(payload): answerPing(payload)
        case .pong: awaitingPong = false
        case let .close(code, reason):
            receivedClose = (code ?? WebSocketCloseCode.noStatus, reason)
            if sentClose {
                finishAfterFlush(code: code ?? WebSocketCloseCode.noStatus, reason: reason)
            } else {
                // Echo the peer's code (1000 when it sent none), then end.
                sentClose = true
                send(.close, WebSocketFrameEncoder.closePayload(code: code ?? WebSocketCloseCode.normal, reason: ""))
                finishAfterFlush(code: code ?? WebSocketCloseCode.noStatus, reason: reason)
            }
        }
    }

    /// A protocol violation: send its close code and end. The close frame carries the code only —
    /// the reason stays local (the delegate still sees it) because clients compare the transport
    /// closes to the reference's, which are bare codes (relay.md §2.7: 1009 with an empty reason).
    private func fail(_ error: WebSocketProtocolError) {
        guard !finished else { return }
        failedWithProtocolError = true
        if !sentClose {
            var reason = ""
            if error.closeCode == WebSocketCloseCode.messageTooBig, let notice = delegate?.webSocketOversizeNotice(self) {
                send(.text, notice.text)
                reason = notice.reason
            }
            sentClose = true
            send(.close, WebSocketFrameEncoder.closePayload(code: error.closeCode, reason: reason))
        }
        finishAfterFlush(code: error.closeCode, reason: error.reason)
    }

    private func finishAfterFlush(code: UInt16, reason: String) {
        finish(code: code, reason: reason)
        connection.closeAfterFlush()
    }

    private func finish(code: UInt16, reason: String) {
        guard !finished else { return }
        finished = true
        sweep?.remove(self)
        sweep = nil
        if let closeTimer { connection.loop.cancel(closeTimer) }
        if let timer = stallTimerStorage.value { connection.loop.cancel(timer) }
        stallTimerStorage.value = nil
        pendingPongStorage.value = nil
        let delegate = self.delegate
        self.delegate = nil
        delegate?.webSocketDidClose(self, code: code, reason: reason)
        retainSelf = nil
    }

    // MARK: Keepalive

    /// One sweep: a socket that has not answered the previous ping is dropped; others are pinged.
    func keepaliveTick() {
        // A socket whose close is under way is not pinged: it has said its last frame.
        guard !finished, !sentClose else { return }
        if awaitingPong {
            terminate(code: WebSocketCloseCode.abnormal, reason: Self.keepaliveTimeoutReason)
            return
        }
        awaitingPong = true
        guard role == .server else { return send(.ping, []) }
        // A server's empty ping is two fixed bytes, written at once: the sweep reaches every idle
        // socket in one tick, and queueing each ping would allocate per socket at the same time.
        withUnsafeBytes(of: (UInt8(0x89), UInt8(0x00))) { connection.writeNow($0) }
    }
}
