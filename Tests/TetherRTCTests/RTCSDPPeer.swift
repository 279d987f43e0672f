import Foundation
import TetherTestSupport

/// `Tests/Peers/rtc_sdp_peer.py` (aiortc, an independent WebRTC stack) run in the project's
/// virtualenv: one subcommand, SDP in on stdin and out on stdout, killed after 30 s.
final class RTCSDPPeer {
    private let launched: PythonProcess
    private var process: Process { launched.process }
    private var input: Pipe { launched.input }
    private var output: Pipe { launched.output }
    private var errors: Pipe { launched.errors }

    init(_ command: String) throws {
        launched = try PythonProcess(script: "rtc_sdp_peer.py", arguments: [command])
    }

    /// Everything the peer prints, once it closes its stdout (at exit, or after an `exchange` offer).
    func readOutput() -> String {
        String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    }

    /// Writes `text` (if any) to the peer's stdin, closes it and waits for the exit status and
    /// stderr.
    func finish(writing text: String? = nil) -> (status: Int32, errors: String) {
        if let text { try? input.fileHandleForWriting.write(contentsOf: Data(text.utf8)) }
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))
    }

    /// Runs `command` with `text` on stdin: its exit status, stdout and stderr.
    static func run(_ command: String, input text: String? = nil) throws -> (status: Int32, output: String, errors: String) {
        let peer = try RTCSDPPeer(command)
        if let text { try? peer.input.fileHandleForWriting.write(contentsOf: Data(text.utf8)) }
        try? peer.input.fileHandleForWriting.close()
        let output = peer.readOutput()
        let (status, errors) = peer.finish()
        return (status, output, errors)
    }
}
