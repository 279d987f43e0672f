public import Foundation
import Glibc

/// A child process whose first stdout line announces it is ready (`tether signal`, the
/// coturn fixture, the Cloudflare stand-in); stopped with SIGTERM when the test ends.
public final class ServiceProcess {
    public let process = Process()
    public let firstLine: String
    /// Kept open and drained: a child that logs to stdout (turnserver, the stand-in) must not
    /// die of a closed pipe once its first line is read.
    private let output = Pipe()
    private let errors = Pipe()
    private let captured = WaitableLog<Data>()
    /// Captured pipes that reached end of file (the child and whatever it started are gone).
    private let ended = WaitableLog<Bool>()
    private let capturing: Bool

    /// `capturing`: everything the child writes to stdout after its first line and to stderr is
    /// kept (`capturedOutput`); otherwise stdout is drained and stderr discarded.
    public init(_ executable: URL, _ arguments: [String], environment: [String: String] = [:], expecting prefix: String,
                capturing: Bool = false) throws {
        self.capturing = capturing
        process.executableURL = executable
        process.arguments = arguments
        var merged = ProcessInfo.processInfo.environment
        for (name, value) in environment { merged[name] = value }
        process.environment = merged
        process.standardOutput = output
        let keep: @Sendable (FileHandle) -> Void = { [captured, ended] handle in
            let data = handle.availableData
            if data.isEmpty {
                handle.readabilityHandler = nil
                ended.append(true)
            } else {
                captured.append(data)
            }
        }
        if capturing {
            process.standardError = errors
            errors.fileHandleForReading.readabilityHandler = keep
        } else {
            process.standardError = FileHandle.nullDevice
        }
        try process.runWithSignalsUnblocked()
        firstLine = output.fileHandleForReading.readFirstLine()
        if capturing {
            output.fileHandleForReading.readabilityHandler = keep
        } else {
            output.fileHandleForReading.readabilityHandler = { _ = $0.availableData }
        }
        guard firstLine.hasPrefix(prefix) else {
            process.terminate()
            throw Vectors.Failure.notFound("\(executable.lastPathComponent) did not start: \(firstLine)")
        }
    }

    /// The port after `listening on ` (`host:port` or a bare port).
    public var port: UInt16 { RelayProcess.listeningPort(firstLine) ?? 0 }

    /// What a `capturing` child wrote so far (stdout after its first line, and stderr), as text.
    public var capturedOutput: String { String(decoding: captured.all.reduce(Data(), +), as: UTF8.self) }

    public func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        // What a capturing child wrote last may still be in its pipes: read them to the end.
        if capturing { _ = ended.values(within: 2, atLeast: 2) { $0 } }
        output.fileHandleForReading.readabilityHandler = nil
        errors.fileHandleForReading.readabilityHandler = nil
    }

    deinit { stop() }

    public static var python: URL { PythonPackageVectors.virtualenv.appendingPathComponent("bin/python") }

    public static func peer(_ name: String) -> String { Vectors.packageRoot().appendingPathComponent("Tests/Peers/\(name)").path }

    /// Runs a peer script to completion; its exit status and output.
    public static func runPeer(_ name: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        try TetherBinary.run(python, [peer(name)] + arguments)
    }
}
