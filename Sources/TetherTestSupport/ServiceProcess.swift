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

    /// `capturing`: everything the child writes to stdout after its first line and to stderr is
    /// kept (`capturedOutput`); otherwise stdout is drained and stderr discarded.
    public init(_ executable: URL, _ arguments: [String], environment: [String: String] = [:], expecting prefix: String,
                capturing: Bool = false) throws {
        process.executableURL = executable
        process.arguments = arguments
        var merged = ProcessInfo.processInfo.environment
        for (name, value) in environment { merged[name] = value }
        process.environment = merged
        process.standardOutput = output
        if capturing {
            process.standardError = errors
            errors.fileHandleForReading.readabilityHandler = { [captured] in captured.append($0.availableData) }
        } else {
            process.standardError = FileHandle.nullDevice
        }
        try process.runWithSignalsUnblocked()
        firstLine = output.fileHandleForReading.readFirstLine()
        if capturing {
            output.fileHandleForReading.readabilityHandler = { [captured] in captured.append($0.availableData) }
        } else {
            output.fileHandleForReading.readabilityHandler = { _ = $0.availableData }
        }
        guard firstLine.hasPrefix(prefix) else {
            process.terminate()
            throw Vectors.Failure.notFound("\(executable.lastPathComponent) did not start: \(firstLine)")
        }
    }

    /// The port after `listening on ` (`host:port` or a bare port).
    public var port: UInt16 {
        let words = firstLine.split(whereSeparator: { $0 == " " || $0.isNewline })
        guard let index = words.firstIndex(of: "on"), index + 1 < words.count else { return 0 }
        return UInt16(words[index + 1].split(separator: ":").last ?? "") ?? 0
    }

    /// What a `capturing` child wrote so far (stdout after its first line, and stderr), as text.
    public var capturedOutput: String { String(decoding: captured.all.reduce(Data(), +), as: UTF8.self) }

    public func stop() {
        guard process.isRunning else {
            output.fileHandleForReading.readabilityHandler = nil
            errors.fileHandleForReading.readabilityHandler = nil
            return
        }
        process.terminate()
        process.waitUntilExit()
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
