import Foundation

/// Starts this program's own subcommands as child processes, pinned with `taskset` when asked,
/// with stdout to a pipe (their JSON lines) and stderr to a log file in the output directory
/// (the relay logs two lines per join: a pipe nobody drained would stall it).
struct Launcher {
    let executable: String
    let directory: String
    let pin: Bool

    func start(_ arguments: [String], cpus: String, log: String) throws -> (process: Process, stdout: FileHandle) {
        let process = Process()
        if pin {
            // taskset execs the program, so the child's pid is the program's own.
            process.executableURL = URL(fileURLWithPath: "/usr/bin/taskset")
            process.arguments = ["-c", cpus, executable] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
        }
        let output = Pipe()
        process.standardOutput = output
        let logPath = directory + "/" + log
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        process.standardError = FileHandle(forWritingAtPath: logPath)
        try process.run()
        return (process, output.fileHandleForReading)
    }

    /// The first line a child wrote, read byte by byte so nothing after it is consumed.
    static func firstLine(_ handle: FileHandle) -> String {
        var line = Data()
        while true {
            let byte = handle.readData(ofLength: 1)
            if byte.isEmpty || byte.first == 0x0A { break }
            line += byte
        }
        return String(decoding: line, as: UTF8.self)
    }
}
