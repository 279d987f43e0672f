import Foundation
import Glibc
import TetherCrypto
import TetherTestSupport
import TetherWire
import TetherEncoding

/// A real coturn on loopback (Tests/Peers/coturn_fixture.py `serve`: REST-API auth with a
/// fresh secret, STUN and TURN over UDP and TCP on one port), stopped when the test ends.
final class CoturnFixture {
    let secret = Base64.encode(SecureRandom.bytes(18))
    let port: UInt16
    private let process = Process()
    /// Kept open and drained: the fixture must not die of a closed pipe.
    private let output = Pipe()

    init() throws {
        process.executableURL = PythonPackageVectors.virtualenv.appendingPathComponent("bin/python")
        process.arguments = [Vectors.packageRoot().appendingPathComponent("Tests/Peers/coturn_fixture.py").path, "serve", "--secret", secret]
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.runWithSignalsUnblocked()
        let line = output.fileHandleForReading.readFirstLine()
        output.fileHandleForReading.readabilityHandler = { _ = $0.availableData }
        guard line.hasPrefix("listening on "), let port = UInt16(line.dropFirst("listening on ".count).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            process.terminate()
            throw Vectors.Failure.notFound("coturn fixture did not start (needs Debian coturn): \(line)")
        }
        self.port = port
    }

    deinit { stop() }

    func stop() {
        output.fileHandleForReading.readabilityHandler = nil
        guard process.isRunning else { return }
        ProcessStop.resume(process.processIdentifier)
        process.terminate()
        process.waitUntilExit()
    }

    var pid: Int32 { process.processIdentifier }

    /// signaling.md §8.2: username `<expiry>:<user>`, password base64(HMAC-SHA1(secret, username)).
    func credentials(ttl: Int = 3600) -> (username: String, password: String) {
        let username = "\(Int(Date().timeIntervalSince1970) + ttl):\(hexString(SecureRandom.bytes(16)))"
        return (username, Base64.encode(HMAC.authenticationCode(.sha1, key: Array(secret.utf8), data: Array(username.utf8))))
    }

    /// The TURN entry a `registered` message would carry for this server.
    func turnServer(transport: String = "udp", password: String? = nil) -> ICEServer {
        let issued = credentials()
        return ICEServer(urls: ["turn:127.0.0.1:\(port)?transport=\(transport)"], username: issued.username, credential: password ?? issued.password)
    }

    var stunServer: ICEServer { ICEServer(urls: ["stun:127.0.0.1:\(port)"]) }
}
