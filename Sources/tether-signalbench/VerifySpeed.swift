import Foundation
import TetherCall
import TetherCrypto
import TetherWire
import TetherEncoding

/// `verify`: the Ed25519 floor on this core. `openssl speed ed25519` (the brief's yardstick:
/// the server verifies every `register` and every `signal`, §6.1 step 4, §6.2 step 2), then the
/// same verify through TetherCrypto (libsodium first, OpenSSL's verdict kept) over a real
/// signal string, once with a parsed key and once parsing the key from the ID each time, as a
/// registration does. Run it pinned where the server runs (`taskset -c 0`): openssl inherits
/// the pinning.
enum VerifySpeed {
    static let flags: [Options.Flag] = [.init("seconds", "3", "seconds per openssl measurement (sign and verify each) and per in-process loop")]

    static func run(_ arguments: [String]) -> Never {
        let options = Options("verify", arguments, flags: flags)
        let seconds = options.double("seconds")
        var line = JSON.object([("scenario", .string("verify"))])
        let (sign, verify, text) = openssl(seconds: seconds)
        line["openssl_sign_per_s"] = .optional(sign, digits: 1)
        line["openssl_verify_per_s"] = .optional(verify, digits: 1)
        if verify == nil { line["openssl_output"] = .string(text) }

        let sender = CallIdentity(), recipient = CallIdentity()
        let signal = sender.signal(.candidate, to: recipient.id, call: .random(), body: Base64.encode(Ring.body))
        let message = signal.signedBytes
        let key = IdentityVerification.signingKey(of: sender.id)!
        line["tethercrypto_verify_per_s"] = .number(rate(seconds: seconds) { key.isValidSignature(signal.signature, for: message) }, digits: 1)
        line["tethercrypto_key_and_verify_per_s"] = .number(rate(seconds: seconds) {
            (try? Ed25519.PublicKey(rawRepresentation: signal.from.key))?.isValidSignature(signal.signature, for: message) == true
        }, digits: 1)
        line["load_cpu_s"] = .number(Measure.seconds(Measure.ownCPU()), digits: 2)
        line.printLine()
        exit(0)
    }

    /// Calls of `body` per second over `seconds`; stops the program if one returns false.
    static func rate(seconds: Double, _ body: () -> Bool) -> Double {
        let start = Measure.now(), stop = start + UInt64(seconds * 1e9)
        var calls = 0
        var now = start
        while now < stop {
            for _ in 0..<64 { precondition(body(), "a valid signature failed to verify") }
            calls += 64
            now = Measure.now()
        }
        return Double(calls) / Measure.seconds(now - start)
    }

    /// `openssl speed -seconds S ed25519`: its sign/s and verify/s (the last two numbers of the
    /// Ed25519 row), and its whole output should that row be missing.
    static func openssl(seconds: Double) -> (sign: Double?, verify: Double?, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl", "speed", "-seconds", String(max(1, Int(seconds.rounded()))), "ed25519"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return (nil, nil, "cannot run openssl: \(error)") }
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard let row = text.split(separator: "\n").last(where: { $0.contains("(Ed25519)") }) else { return (nil, nil, text) }
        let numbers = row.split(separator: " ").compactMap { Double($0) }
        guard numbers.count >= 2 else { return (nil, nil, text) }
        return (numbers[numbers.count - 2], numbers[numbers.count - 1], text)
    }
}
