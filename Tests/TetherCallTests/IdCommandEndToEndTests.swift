import Foundation
import TetherCall
import TetherTestSupport
import TetherWire
import TetherSync
import XCTest
import TetherEncoding

/// `tether id` run as a script and in a terminal would run it: two machine-readable lines on
/// standard output, narration and failures on standard error, the identity in one 0600 file.
final class IdCommandEndToEndTests: XCTestCase {
    private var root: URL!
    private var state: String { root.appendingPathComponent("call").path }
    private let binary = TetherBinary.url.path

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: binary) else { throw XCTSkip("build the tether product first (make test does)") }
        root = FileManager.default.temporaryDirectory.appendingPathComponent("tether-id-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        if let root { try? FileManager.default.removeItem(at: root) }
    }

    private func id(_ arguments: [String]) throws -> (status: Int32, stdout: [String], stderr: String) {
        let result = try runProcess(binary, ["id", "--state", state] + arguments)
        return (result.status, result.stdout.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init), result.stderr)
    }

    /// The identity the file holds, read as the SDK reads it.
    private func storedID() throws -> SignalingID? {
        try IdentityStore(directory: .init(URL(fileURLWithPath: state))).load()?.id
    }

    func testTheFirstRunMakesTheIdentityAndLaterRunsShowTheSameOne() throws {
        let first = try id([])
        XCTAssertEqual(first.status, 0, first.stderr)
        XCTAssertEqual(first.stdout.count, 2, "\(first.stdout)")
        let canonical = first.stdout[0]
        let stored = try XCTUnwrap(try storedID())
        XCTAssertEqual(canonical, stored.canonical)
        XCTAssertEqual(first.stdout[1], "cryptext://contact/v2/" + canonical)
        XCTAssertEqual(try ContactLink.parse(first.stdout[1]).id, stored)
        XCTAssertTrue(first.stderr.contains("Made a new calling identity in \(state)."), first.stderr)
        XCTAssertTrue(first.stderr.contains("ID: \(stored.display)"), first.stderr)

        let again = try id([])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertEqual(again.stdout, first.stdout)
        XCTAssertFalse(again.stderr.contains("Made a new"), again.stderr)
        // The private keys are in the file only: never on either stream.
        let secret = Hex.encode(try XCTUnwrap(FileManager.default.contents(atPath: state + "/call-identity")))
        for output in [first.stdout.joined(), first.stderr, again.stderr] {
            XCTAssertFalse(output.lowercased().contains(secret.prefix(64)) || output.lowercased().contains(secret.suffix(64)))
        }
    }

    func testTheStateFileAndDirectoryAreOwnerOnly() throws {
        XCTAssertEqual(try id([]).status, 0)
        let attributes = try FileManager.default.attributesOfItem(atPath: state + "/call-identity")
        XCTAssertEqual((attributes[.posixPermissions] as? NSNumber)?.intValue, 0o600)
        XCTAssertEqual((attributes[.size] as? NSNumber)?.intValue, 64)
        XCTAssertEqual((try FileManager.default.attributesOfItem(atPath: state)[.posixPermissions] as? NSNumber)?.intValue, 0o700)
    }

    func testSignalAddsTheRelayToTheLink() throws {
        let plain = try id([])
        let secure = try id(["--signal", "wss://Signal.Example.com/signal"])
        XCTAssertEqual(secure.status, 0, secure.stderr)
        XCTAssertEqual(secure.stdout, [plain.stdout[0], plain.stdout[1] + "?relay=wss://signal.example.com/signal"])
        let loopback = try id(["--signal=ws://[::1]:8791/signal"])
        XCTAssertEqual(loopback.status, 0, loopback.stderr)
        XCTAssertEqual(loopback.stdout[1], plain.stdout[1] + "?relay=ws://%5B::1%5D:8791/signal")
        XCTAssertEqual(try ContactLink.parse(loopback.stdout[1], allowLoopbackWS: true).relay?.url, "ws://[::1]:8791/signal")
    }

    /// A refused endpoint: exit 2, one line naming the rule, nothing on standard output, and no
    /// identity made for a mistyped command.
    func testABadSignalEndpointIsRefusedWithOneLine() throws {
        for (endpoint, reason) in [("ws://example.com/signal", "ws:// is allowed only to a loopback host"),
                                   ("wss://h/signal/", "path must be exactly /signal"),
                                   ("wss://u@h/signal", "user name or password"),
                                   ("https://h/signal", "must be wss://HOST[:PORT]/signal")] {
            let result = try id(["--signal", endpoint])
            XCTAssertEqual(result.status, 2, endpoint)
            XCTAssertEqual(result.stdout, [], endpoint)
            let lines = result.stderr.split(separator: "\n")
            XCTAssertEqual(lines.count, 1, result.stderr)
            XCTAssertTrue(lines.first?.hasPrefix("tether: id: --signal \(endpoint): ") ?? false, result.stderr)
            XCTAssertTrue(result.stderr.contains(reason), result.stderr)
        }
        XCTAssertFalse(FileManager.default.fileExists(atPath: state))
    }

    func testNewErasesTheIdentityAndSaysSo() throws {
        let old = try id([])
        let oldID = try XCTUnwrap(SignalingID(canonical: old.stdout[0]))
        let new = try id(["--new"])
        XCTAssertEqual(new.status, 0, new.stderr)
        XCTAssertNotEqual(new.stdout[0], old.stdout[0])
        XCTAssertEqual(new.stdout[0], try storedID()?.canonical)
        XCTAssertEqual(new.stdout[1], "cryptext://contact/v2/" + new.stdout[0])
        XCTAssertTrue(new.stderr.contains("Erased the identity \(oldID.display) and made a new one. The old ID and its links no longer reach you."), new.stderr)
        XCTAssertEqual(try id([]).stdout, new.stdout)
    }

    func testADamagedIdentityFileIsReportedAndKeptUntilNew() throws {
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        try Data(repeating: 1, count: 10).write(to: URL(fileURLWithPath: state + "/call-identity"))
        let refused = try id([])
        XCTAssertEqual(refused.status, 1)
        XCTAssertEqual(refused.stdout, [])
        XCTAssertEqual(refused.stderr, "tether: id: the identity file \(state)/call-identity is damaged (10 bytes where 64 are expected); it was left untouched; `tether id --new` replaces it with a new identity (a new ID)\n")
        XCTAssertEqual(FileManager.default.contents(atPath: state + "/call-identity"), Data(repeating: 1, count: 10))
        let replaced = try id(["--new"])
        XCTAssertEqual(replaced.status, 0, replaced.stderr)
        XCTAssertTrue(replaced.stderr.contains("Made a new calling identity"), replaced.stderr)
        XCTAssertEqual(replaced.stdout[0], try storedID()?.canonical)
    }

    func testUsageErrorsAndHelp() throws {
        for (arguments, message) in [(["extra"], "tether: id: unexpected argument extra\n"), (["--bogus"], "tether: id: unknown option --bogus\n"),
                                     (["--signal"], "tether: id: --signal needs a value\n")] {
            let result = try id(arguments)
            XCTAssertEqual(result.status, 2)
            XCTAssertEqual(result.stderr, message)
        }
        let help = try runProcess(binary, ["id", "--help"])
        XCTAssertEqual(help.status, 0)
        XCTAssertTrue(help.stdout.hasPrefix("usage: tether id [--state DIR] [--signal wss://HOST[:PORT]/signal] [--new]"), help.stdout)
        XCTAssertTrue(try runProcess(binary, ["--help"]).stdout.contains("  id        show this device's calling ID"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: state))
    }

    /// Scripted, the QR code on standard error decodes to the link on standard output.
    func testTheQRCodeDecodesToTheLink() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/zbarimg") else { throw XCTSkip("zbarimg is needed (scripts/install-deps installs it)") }
        let result = try id(["--signal", "wss://signal.example.com/signal"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try decodeQR(result.stderr), result.stdout[1])
    }

    /// In a terminal (under script(1)): the display ID, the QR code and the link on the screen.
    func testInATerminalTheIDTheQRCodeAndTheLinkAreShown() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script"), FileManager.default.isExecutableFile(atPath: "/usr/bin/zbarimg") else {
            throw XCTSkip("script(1) and zbarimg are needed")
        }
        let scripted = try id([])
        let stored = try XCTUnwrap(try storedID())
        let command = ([binary, "id", "--state", state, "--signal", "wss://signal.example.com/signal"]).map { "'\($0)'" }.joined(separator: " ")
        let result = try runProcess("/usr/bin/script", ["-qec", command, "/dev/null"])
        XCTAssertEqual(result.status, 0, result.stdout)
        let screen = result.stdout.replacingOccurrences(of: "\r", with: "")
            .replacingOccurrences(of: "\u{1B}[30;47m", with: "").replacingOccurrences(of: "\u{1B}[0m", with: "")
        let lines = screen.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first, "Your ID: \(stored.display)")
        let link = scripted.stdout[1] + "?relay=wss://signal.example.com/signal"
        XCTAssertEqual(lines.last, link)
        XCTAssertEqual(try decodeQR(screen), link)
    }

    /// The half-block QR code in `text`, rebuilt module by module and decoded by zbarimg from a
    /// PGM image (4 pixels per module, white border), as Tests/Peers/peer_tmux.py does.
    private func decodeQR(_ text: String) throws -> String {
        let blocks: [Character: (Bool, Bool)] = [" ": (false, false), "▀": (true, false), "▄": (false, true), "█": (true, true)]
        let lines = text.split(separator: "\n").map(String.init).filter { $0.contains { "▀▄█".contains($0) } }
        guard !lines.isEmpty else { throw XCTSkip("no QR code in the output") }
        let width = lines.map(\.count).max()!
        var rows: [[Bool]] = []
        for line in lines {
            let cells = Array(line.padding(toLength: width, withPad: " ", startingAt: 0))
            XCTAssertTrue(cells.allSatisfy { blocks[$0] != nil }, line)
            rows.append(cells.map { blocks[$0]?.0 ?? false })
            rows.append(cells.map { blocks[$0]?.1 ?? false })
        }
        let scale = 4, border = 8
        let sizeX = (width + 2 * border) * scale, sizeY = (rows.count + 2 * border) * scale
        var pixels = [UInt8](repeating: 255, count: sizeX * sizeY)
        for (y, row) in rows.enumerated() {
            for (x, dark) in row.enumerated() where dark {
                for dy in 0..<scale {
                    let start = ((y + border) * scale + dy) * sizeX + (x + border) * scale
                    for dx in 0..<scale { pixels[start + dx] = 0 }
                }
            }
        }
        let image = root.appendingPathComponent("qr.pgm")
        try (Data("P5 \(sizeX) \(sizeY) 255\n".utf8) + Data(pixels)).write(to: image)
        let decoded = try runProcess("/usr/bin/zbarimg", ["--raw", "-q", image.path])
        XCTAssertEqual(decoded.status, 0, decoded.stderr)
        return decoded.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
