public import Foundation

/// The `tether` binary `swift build` made, for tests that drive it as an operator would.
public enum TetherBinary {
    public static var url: URL { product("tether") }

    /// Where the build's products are: `$TETHER_BUILD_DIR`, else the directory of the running test
    /// bundle when it holds a `tether` (so `swift test --build-path X` drives X's binary, not a
    /// stale `.build`), else `<package root>/.build/debug`.
    public static let directory: URL = {
        if let explicit = ProcessInfo.processInfo.environment["TETHER_BUILD_DIR"], !explicit.isEmpty {
            return URL(fileURLWithPath: explicit, isDirectory: true)
        }
        if let running = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            let beside = URL(fileURLWithPath: running).deletingLastPathComponent()
            if FileManager.default.isExecutableFile(atPath: beside.appendingPathComponent("tether").path) { return beside }
        }
        return Vectors.packageRoot().appendingPathComponent(".build/debug", isDirectory: true)
    }()

    /// A product of the build (`tether`, `tether-netbench`, ...).
    public static func product(_ name: String) -> URL { directory.appendingPathComponent(name) }

    /// Runs `tether arguments` to completion; returns its exit status and standard output and
    /// error together. `environment` is laid over the test's own.
    public static func run(_ arguments: [String], environment: [String: String] = [:], in directory: URL? = nil) throws -> (status: Int32, output: String) {
        try run(url, arguments, environment: environment, in: directory)
    }

    /// Runs any program (a peer script's interpreter, say) the same way.
    public static func run(_ executable: URL, _ arguments: [String], environment: [String: String] = [:], in directory: URL? = nil) throws -> (status: Int32, output: String) {
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { _, new in new }
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.runWithSignalsUnblocked()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: data, as: UTF8.self))
    }
}
