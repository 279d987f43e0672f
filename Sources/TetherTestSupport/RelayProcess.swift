public import Foundation
import Glibc

/// The real `tether relay --local` binary on a loopback port, for SDK end-to-end tests. Without
/// `port` it is started on port 0 and the port it bound is read from its start-up line, so
/// parallel tests never race for a port.
public final class RelayProcess {
    public let port: UInt16
    public let process = Process()
    public var origin: String { "http://127.0.0.1:\(port)" }

    /// Starts the relay (built by `swift build`) with `extra` flags and waits for its start-up line.
    public init(database: String = ":memory:", port: UInt16? = nil, _ extra: [String] = []) throws {
        let binary = TetherBinary.url
        guard FileManager.default.isExecutableFile(atPath: binary.path) else {
            throw Vectors.Failure.notFound("\(binary.path): build the tether product first (make test does)")
        }
        process.executableURL = binary
        process.arguments = ["relay", "--local", "--relay-port", String(port ?? 0), "--relay-db", database] + extra
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.runWithSignalsUnblocked()
        let line = output.fileHandleForReading.readFirstLine()
        guard line.hasPrefix("relay: listening on"), let bound = Self.listeningPort(line) else {
            process.terminate()
            throw Vectors.Failure.notFound("tether relay did not start")
        }
        self.port = bound
    }

    /// The port of a start-up line: the first word after `listening on`, `host:port` (or a bare
    /// port). `tether relay|push|signal` print the port they bound, so port 0 works.
    public static func listeningPort(_ line: String) -> UInt16? {
        let words = line.split(whereSeparator: { $0 == " " || $0.isNewline })
        guard let index = words.firstIndex(of: "on"), index + 1 < words.count else { return nil }
        return UInt16(words[index + 1].split(separator: ":").last ?? "")
    }

    public func stop() {
        guard process.isRunning else { return }
        process.interrupt()
        process.waitUntilExit()
    }

    deinit { stop() }

    /// A port that was free a moment ago. Racy under `swift test --parallel` (another test may
    /// bind it before the caller does): only for a port that must be known before its server
    /// starts (a peer's cluster port, an admin port); otherwise start on port 0.
    public static func freePort() -> UInt16 {
        let (fd, port) = RefusingPort.bindLoopback()
        close(fd)
        return port
    }
}
