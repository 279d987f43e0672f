import TetherNet
import TetherWire
import TetherEncoding

/// A mac and a phone spliced in a fresh open-mode room, playing 64-byte ping-pong: the mac sends
/// a frame, the phone echoes it, the mac times the round trip and sends the next — one frame in
/// flight, as an interactive terminal session is. Every round trip is recorded with the time it
/// completed, so the load process can cut the run into windows afterwards. Touched only on its loop.
final class PingPair: @unchecked Sendable {
    static let frameSize = 64

    let loop: EventLoop
    let room: RoomName
    private let mac = ParkLeg(role: .mac)
    private let phone = ParkLeg(role: .phone)
    private var running = false
    private var sequence: UInt64 = 0
    private var sentAt: UInt64 = 0
    /// Completion times and round trips (ns), in step.
    private(set) var completedAt: [UInt64] = []
    private(set) var roundTrips: [UInt64] = []
    /// Echoes that came back different, and sockets lost while running.
    private(set) var frameErrors = 0
    private(set) var lost: [String] = []

    /// wss:// when set (the relay serving TLS itself).
    let tls: TLSClientContext?

    init(loop: EventLoop, tls: TLSClientContext? = nil) {
        self.loop = loop
        self.tls = tls
        // A fresh random room: open mode admits both roles with an empty proof.
        room = RoomName(header: Hex.encode((0..<32).map { _ in UInt8.random(in: 0...255) }))!
        completedAt.reserveCapacity(1 << 16)
        roundTrips.reserveCapacity(1 << 16)
    }

    /// Parks the mac, then admits the phone (a phone is only admitted beside an admitted mac);
    /// `done` runs on the loop with nil once both are in.
    func open(url: String, done: @escaping (String?) -> Void) {
        mac.join(url: url, room: room, tls: tls, on: loop) { [self] error in
            if let error { return done("mac: \(error)") }
            phone.join(url: url, room: room, tls: tls, on: loop) { error in done(error.map { "phone: \($0)" }) }
        }
        phone.onFrame = { [unowned self] frame in phone.send(frame) }
        mac.onFrame = { [unowned self] frame in returned(frame) }
        mac.onClose = { [unowned self] code, reason in if running { lost.append("mac \(code) \(reason)") } }
        phone.onClose = { [unowned self] code, reason in if running { lost.append("phone \(code) \(reason)") } }
    }

    func start() {
        running = true
        ping()
    }

    func stop() { running = false }

    private func ping() {
        sequence += 1
        var frame = [UInt8](repeating: 0x5a, count: Self.frameSize)
        withUnsafeBytes(of: sequence.bigEndian) { frame.replaceSubrange(0..<8, with: $0) }
        sentAt = ProcessStats.now()
        mac.send(frame)
    }

    private func returned(_ frame: [UInt8]) {
        let now = ProcessStats.now()
        let echoed = frame.count == Self.frameSize ? frame[0..<8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) } : 0
        if echoed != sequence { frameErrors += 1 }
        completedAt.append(now)
        roundTrips.append(now - sentAt)
        if running { ping() }
    }
}
