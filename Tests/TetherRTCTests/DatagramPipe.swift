import Glibc
import TetherRTC

/// Two DTLS transports joined by in-memory datagram queues, one each way. Datagrams wait in
/// the queue until `pump()`, which is where a test drops, duplicates or reorders them; time
/// passes only in `advance()`, which sleeps until the next timer and fires both.
final class DatagramPipe {
    enum End: Hashable, CaseIterable {
        case client, server
        var other: End { self == .client ? .server : .client }
    }

    /// One datagram as sent: who sent it and its number among that end's datagrams (from 0).
    struct Sent {
        let from: End
        let index: Int
        let bytes: [UInt8]
    }

    let certificates: [End: DTLSCertificate]
    private(set) var transports: [End: DTLSTransport] = [:]
    var client: DTLSTransport { transports[.client]! }
    var server: DTLSTransport { transports[.server]! }

    /// What of each sent datagram reaches the other end: none (dropped), one, or more
    /// (duplicated). Everything passes unchanged by default.
    var tamper: (Sent) -> [[UInt8]] = { [$0.bytes] }
    /// Deliver each batch of queued datagrams last-first.
    var reorder = false
    /// Deliver at once, from inside the sender's `send` closure, instead of queueing.
    var synchronous = false

    private var queue: [(to: End, bytes: [UInt8])] = []
    private(set) var sent: [End: [[UInt8]]] = [.client: [], .server: []]
    private(set) var received: [End: [[UInt8]]] = [.client: [], .server: []]
    private(set) var closes: [End: [DTLSError?]] = [.client: [], .server: []]
    private(set) var connections: [End: Int] = [.client: 0, .server: 0]

    /// - Parameters:
    ///   - expected: what each end expects of the other's fingerprint, if not the truth.
    ///   - roles: the DTLS role of each end (a test can make both clients).
    init(expected: [End: CertificateFingerprint] = [:], roles: [End: DTLSRole] = [.client: .client, .server: .server],
         options: DTLSTransport.Options = DTLSTransport.Options()) throws {
        let certificates = [End.client: try DTLSCertificate(), .server: try DTLSCertificate()]
        self.certificates = certificates
        for end in End.allCases {
            let transport = try DTLSTransport(role: roles[end]!, certificate: certificates[end]!,
                                              remoteFingerprint: expected[end] ?? certificates[end.other]!.fingerprint,
                                              options: options) { [weak self] datagram in self?.send(datagram, from: end) }
            transport.onConnected = { [weak self] in self?.connections[end]! += 1 }
            transport.onApplicationData = { [weak self] bytes in self?.received[end]!.append([UInt8](bytes)) }
            transport.onClose = { [weak self] error in self?.closes[end]!.append(error) }
            transports[end] = transport
        }
    }

    private func send(_ datagram: [UInt8], from end: End) {
        let sent = Sent(from: end, index: self.sent[end]!.count, bytes: datagram)
        self.sent[end]!.append(datagram)
        for bytes in tamper(sent) {
            if synchronous {
                transports[end.other]!.receive(bytes)
            } else {
                queue.append((end.other, bytes))
            }
        }
    }

    /// Delivers queued datagrams, and what they provoke, until both queues are empty.
    func pump() {
        var rounds = 0
        while !queue.isEmpty {
            rounds += 1
            precondition(rounds < 1000, "the transports keep talking")
            var batch = queue
            queue = []
            if reorder { batch.reverse() }
            for (end, bytes) in batch { transports[end]!.receive(bytes) }
        }
    }

    /// Starts both ends and pumps.
    func handshake() {
        client.start()
        server.start()
        pump()
    }

    /// Sleeps until the earlier of the two timers, fires both, and pumps. False if neither
    /// has a timer.
    @discardableResult
    func advance() -> Bool {
        let timeouts = End.allCases.compactMap { transports[$0]!.nextTimeout }
        guard let wait = timeouts.min() else { return false }
        let (seconds, attoseconds) = wait.components
        // Must be a sleep: the transports' timers run on the real clock; this waits for the next.
        usleep(UInt32(seconds * 1_000_000 + attoseconds / 1_000_000_000_000) + 1000)
        for end in End.allCases { transports[end]!.handleTimeout() }
        pump()
        return true
    }

    /// Advances until `done` or `limit` timer rounds have passed.
    func advance(until done: () -> Bool, limit: Int = 50) {
        var rounds = 0
        while !done(), rounds < limit, advance() { rounds += 1 }
    }

    var bothConnected: Bool { client.state == .connected && server.state == .connected }
}
