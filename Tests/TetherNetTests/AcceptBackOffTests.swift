import Foundation
import Glibc
import TetherNet
import TetherTestSupport
import XCTest

/// The listener out of descriptors, for real: `tether-netbench` runs under a descriptor limit
/// of its own (`prlimit`), so this process's limit — shared with the tests running beside this
/// one — is never lowered.
final class AcceptBackOffTests: XCTestCase {
    /// The server's descriptor limit: a handful go to the runtime, the loop and the listener,
    /// the rest to clients; small, so exhausting it takes few sockets.
    static let serverDescriptorLimit = 48
    /// Clients beyond the limit, left waiting in the listen backlog while descriptors are out.
    static let surplusClients = 32

    func testAListenerOutOfDescriptorsBacksOffInsteadOfSpinningAndServesAgainOnceSomeClose() throws {
        let binary = TetherBinary.product("tether-netbench")
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw Vectors.Failure.notFound("\(binary.path): build the tether-netbench product first (make test does)")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/prlimit")
        process.arguments = ["--nofile=\(Self.serverDescriptorLimit)", "--", binary.path, "--port", "0", "--keepalive", "0"]
        let log = Pipe()
        process.standardError = log
        try process.runWithSignalsUnblocked()
        defer {
            process.terminate()
            process.waitUntilExit()
        }
        let line = log.fileHandleForReading.readFirstLine()
        guard let portText = line.split(separator: ":").last?.split(separator: " ").first, let port = UInt16(portText) else {
            return XCTFail("no listening line: \(line)")
        }
        let pid = process.processIdentifier

        var clients = try (0..<(Self.serverDescriptorLimit + Self.surplusClients)).map { _ in try RawClient(port: port) }
        // Every descriptor the server may have is in use once it has accepted all it can.
        eventually("the server ran out of descriptors (\(Self.openDescriptors(pid)) open)", within: 10, poll: 0.02) {
            Self.openDescriptors(pid) >= Self.serverDescriptorLimit
        }
        XCTAssertEqual(Self.openDescriptors(pid), Self.serverDescriptorLimit, "the server ran out of descriptors")

        // Level-triggered epoll keeps reporting the backlog: a listener that merely returns on
        // EMFILE is woken again at once and burns a whole core. One that backs off sleeps.
        let before = try Self.cpuSeconds(pid)
        usleep(2_000_000)   // must be a sleep: the CPU burnt over 2 s idle is what is measured
        let burnt = try Self.cpuSeconds(pid) - before
        XCTAssertLessThan(burnt, 0.2, "CPU seconds used in 2 s while out of descriptors")

        // Clients leave; once the back-off ends the backlog drains and a new client is served.
        clients.removeAll()
        let fresh = try RawClient(port: port)
        fresh.send("GET /stats HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        let response = fresh.readText()
        XCTAssertTrue(response.hasPrefix("HTTP/1.1 200 "), response)
        let count = response.components(separatedBy: "accept_backoffs ").last.flatMap { Int($0.prefix { $0.isNumber }) } ?? 0
        XCTAssertGreaterThanOrEqual(count, 1, "the back-offs are counted: \(response)")
    }

    /// Open descriptors of `pid` numbered below the limit: the slots it can allocate (a
    /// descriptor inherited from this process may sit above them).
    static func openDescriptors(_ pid: Int32) -> Int {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        return names.compactMap(Int.init).filter { $0 < serverDescriptorLimit }.count
    }

    /// User plus system CPU time of `pid`, from /proc/<pid>/stat (fields 14 and 15, in clock ticks).
    static func cpuSeconds(_ pid: Int32) throws -> Double {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // The command name (field 2) may hold spaces; the fields after it are fixed.
        guard let close = stat.lastIndex(of: ")") else { throw NetError.invalidAddress(stat) }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { throw NetError.invalidAddress(stat) }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }
}
