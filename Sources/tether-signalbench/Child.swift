import Foundation
import Glibc

/// A process `run` starts — the server or one scenario of this program — pinned to a CPU with
/// `taskset` (which execs the program, so the pid is the program's own), stdout to a pipe,
/// stderr to a log file in the output directory (a pipe nobody drained could stall a writer).
struct Child {
    let process: Process
    let stdout: FileHandle
    let log: String

    init(_ executable: String, _ arguments: [String], cpu: String?, environment extra: [String: String] = [:], log: String) throws {
        process = Process()
        if let cpu {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/taskset")
            process.arguments = ["-c", cpu, executable] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
        }
        process.environment = ProcessInfo.processInfo.environment.merging(extra) { $1 }
        let pipe = Pipe()
        process.standardOutput = pipe
        stdout = pipe.fileHandleForReading
        self.log = log
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: log)
        try process.run()
    }

    var pid: Int32 { process.processIdentifier }

    /// The first line the child writes (nil if it exits first), read a byte at a time so that
    /// nothing after it is taken from the pipe.
    func firstLine() -> String? {
        var line = Data()
        while true {
            let byte = stdout.readData(ofLength: 1)
            if byte.isEmpty { return nil }
            if byte.first == 0x0A { return String(decoding: line, as: UTF8.self) }
            line += byte
        }
    }

    /// Everything the child writes until it exits, and its exit status.
    func output() -> (String, Int32) {
        let text = String(decoding: stdout.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        return (text, process.terminationStatus)
    }

    /// SIGTERM (`tether signal` closes every socket 1001 and exits 0, §13.1), then its status.
    func stop() -> Int32 {
        process.terminate()
        process.waitUntilExit()
        return process.terminationStatus
    }
}
