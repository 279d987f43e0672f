import Foundation
import TetherTestSupport
import XCTest

/// Examples/EchoBot as its README runs it: the bot registers with a real `tether signal`, a real
/// `tether call` rings it over the WebRTC data channel, the caller's text comes back, and the
/// caller's hang-up ends the bot's one call (`--once`). Driven from the outside only.
final class EchoBotEndToEndTests: XCTestCase {
    func testEchoBotAnswersATetherCallSendsTheTextBackAndExitsWhenTheCallerHangsUp() throws {
        let server = try ServiceProcess(TetherBinary.url, ["signal", "--local", "--signal-port", "0"], expecting: "signal: listening on")
        defer { server.stop() }
        let signal = "ws://127.0.0.1:\(server.port)/signal"
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("echo-bot-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: state) }

        let bot = try ServiceProcess(TetherBinary.product("example-echo-bot"),
                                     ["--signal", signal, "--state", state.appendingPathComponent("bot").path, "--once"],
                                     expecting: "online ", capturing: true)
        defer { bot.stop() }
        let botID = bot.firstLine.dropFirst("online ".count).trimmingCharacters(in: .whitespacesAndNewlines)

        let caller = Process()
        caller.executableURL = TetherBinary.url
        caller.arguments = ["call", botID, "--signal", signal, "--state", state.appendingPathComponent("caller").path]
        let input = Pipe(), output = Pipe()
        caller.standardInput = input
        caller.standardOutput = output
        caller.standardError = output
        let heard = WaitableLog<String>()
        output.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty { handle.readabilityHandler = nil } else { heard.append(String(decoding: data, as: UTF8.self)) }
        }
        try caller.runWithSignalsUnblocked()
        defer { if caller.isRunning { caller.terminate() } }
        let said = { heard.all.joined() }

        input.fileHandleForWriting.write(Data("hello, bot\n".utf8))
        eventually("the bot's echo (\(said()))", within: 30) { said().contains("message hello, bot\n") }
        // End of input hangs up, once every text is receipted.
        try input.fileHandleForWriting.close()
        eventually("the call to end (\(said()))", within: 30) { !caller.isRunning }
        XCTAssertEqual(caller.terminationStatus, 0, said())
        XCTAssertTrue(said().contains("secured "), said())
        XCTAssertTrue(said().contains("ended hung up"), said())

        eventually("the bot to exit after its one call", within: 10) { !bot.process.isRunning }
        XCTAssertEqual(bot.process.terminationStatus, 0, bot.capturedOutput)
        XCTAssertTrue(bot.capturedOutput.contains("message hello, bot\nended the peer hung up\n"), bot.capturedOutput)
    }
}
