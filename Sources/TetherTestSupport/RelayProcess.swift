public import Foundation
import Glibc

/// The real `tether relay --local` binary on a free loopback port, for SDK end-to-end tests.
public final class RelayProcess {
    public let port: UInt16
    public let process = Process()
    public var origin: String { "http://127.0.0.1:\(port)" }

    /// Starts the relay (built by `swift build`) with `extra` flags and waits for its start-up line.
    public init(database: String = ":memory:", port: UInt16? = nil, _ extra: [String] = []) throws {
        let binary = Vectors.packageRoot().appendingPathComponent(".build/debug/tether")
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw Vectors.Failure.notFound("\(binary.path): build the tether product first (make test does)")
        }
        self.port = port ?? Self.freePort()
        process.executableURL = binary
        process.arguments = ["relay", "--local", "--relay-port", String(self.port), "--relay-db", database] + extra
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.runWithSignalsUnblocked()
        guard output.fileHandleForReading.readFirstLine().hasPrefix("relay: listening on") else {
            process.terminate()
            throw Vectors.Failure.notFound("tether relay did not start")
        }
    }

    public func stop() {
        guard process.isRunning else { return }
        process.interrupt()
        process.waitUntilExit()
    }

    deinit { stop() }

    /// A port that was free a moment ago.
    public static func freePort() -> UInt16 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return UInt16(bigEndian: address.sin_port)
    }
}
