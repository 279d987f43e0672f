public import Foundation

/// A script of `Tests/Peers/` started with the project's virtualenv interpreter, its standard
/// input, output and error on pipes, and a watchdog that kills it after `timeout` seconds: what
/// every Python peer needs before it speaks its own protocol.
public final class PythonProcess: @unchecked Sendable {  // the pipes and process are set once in init
    public let process = Process()
    public let input = Pipe(), output = Pipe(), errors = Pipe()
    private let watchdog: DispatchWorkItem

    public init(script: String, arguments: [String], timeout: TimeInterval = 30) throws {
        let python = PythonPackageVectors.virtualenv.appendingPathComponent("bin/python")
        guard FileManager.default.isExecutableFile(atPath: python.path) else { throw PythonPeer.Failure.interpreterMissing(python.path) }
        process.executableURL = python
        process.arguments = [Vectors.packageRoot().appendingPathComponent("Tests/Peers/\(script)").path] + arguments
        process.standardInput = input
        process.standardOutput = output
        process.standardError = errors
        // A peer that died must surface as a thrown write error or its exit status, not kill
        // the test run on a write to its closed pipe.
        signal(SIGPIPE, SIG_IGN)
        let process = self.process
        watchdog = DispatchWorkItem { if process.isRunning { process.terminate() } }
        try process.runWithSignalsUnblocked()
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout, execute: watchdog)
    }

    deinit {
        watchdog.cancel()
        if process.isRunning { process.terminate() }
    }
}
