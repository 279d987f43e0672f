// tether-bench: measures Tether's primitives and, in the same run, OpenSSL's own `openssl speed`
// figures for the same operations, so wrapper overhead is visible at a glance.
//
//   swift run -c release tether-bench [--seconds S] [--no-openssl]
//
// Targets (issue 2): AEAD throughput within 10% of OpenSSL at 16 KiB, within 2x at 64 B.
import CTetherBenchFloor
import Foundation
import TetherCrypto
import TetherNoise

struct Options {
    var seconds = 1.0
    var compareWithOpenSSL = true
    var only: String?

    init(_ arguments: [String]) {
        var it = arguments.dropFirst().makeIterator()
        while let argument = it.next() {
            switch argument {
            case "--seconds": seconds = Double(it.next() ?? "") ?? seconds
            case "--no-openssl": compareWithOpenSSL = false
            case "--only": only = it.next()
            case "-h", "--help":
                print("usage: tether-bench [--seconds S] [--no-openssl] [--only SUBSTRING]")
                exit(0)
            default:
                FileHandle.standardError.write(Data("tether-bench: unknown argument \(argument)\n".utf8))
                exit(2)
            }
        }
    }
}

/// Runs `body` repeatedly for about `seconds` and returns nanoseconds per call.
func measure(seconds: Double, _ body: () -> Void) -> Double {
    for _ in 0..<50 { body() }   // warm caches and lazy OpenSSL fetches
    var iterations = 0
    var batch = 1
    let clock = ContinuousClock()
    let start = clock.now
    var elapsed = Duration.zero
    while elapsed < .seconds(seconds) {
        for _ in 0..<batch { body() }
        iterations += batch
        elapsed = clock.now - start
        if elapsed < .milliseconds(10) { batch *= 2 }
    }
    let (s, attos) = elapsed.components
    return (Double(s) * 1e9 + Double(attos) / 1e9) / Double(iterations)
}

/// One row: a Tether operation and the `openssl speed` invocation that measures the same thing.
struct Case {
    let name: String
    let bytes: Int?           // payload size for throughput rows
    let opensslArguments: [String]?
    let parse: ((String) -> Double?)?   // `openssl speed -mr` output → ns/op
    let target: Double?       // maximum allowed ratio tether / openssl
    let run: () -> Void
}

/// ns/op from the ops-per-second field `field` of the `openssl speed -mr` line starting `prefix`.
func operationsParser(prefix: String, field: Int) -> (String) -> Double? {
    { output in
        for line in output.split(separator: "\n") where line.hasPrefix(prefix) {
            let fields = line.split(separator: ":")
            if fields.count > field, let ops = Double(fields[field]), ops > 0 { return 1e9 / ops }
        }
        return nil
    }
}

/// ns/op from a `+F:` line of a single-size cipher or digest run.
func throughputParser(bytes: Int) -> (String) -> Double? {
    { output in
        for line in output.split(separator: "\n") where line.hasPrefix("+F:") {
            let fields = line.split(separator: ":")
            if let bytesPerSecond = fields.last.flatMap({ Double($0) }), bytesPerSecond > 0 { return Double(bytes) / bytesPerSecond * 1e9 }
        }
        return nil
    }
}

func runOpenSSL(_ arguments: [String]) -> String? {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    process.arguments = arguments
    let pipe = Pipe()
    process.standardOutput = pipe
    process.standardError = FileHandle.nullDevice
    do { try process.run() } catch { return nil }
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return process.terminationStatus == 0 ? String(decoding: data, as: UTF8.self) : nil
}

let options = Options(CommandLine.arguments)
let seconds = options.seconds
let opensslSeconds = String(max(1, Int(seconds.rounded())))
var sink: UInt8 = 0

// Fixed inputs (benchmarks need repeatable work, not secrets).
let x25519Key = try! X25519.PrivateKey(rawRepresentation: [UInt8](repeating: 0x42, count: 32))
let x25519Peer = X25519.PrivateKey().publicKey
let edKey = try! Ed25519.PrivateKey(seed: [UInt8](repeating: 7, count: 32))
let edMessage = [UInt8](repeating: 0x61, count: 20)   // openssl speed signs 20 bytes
let edSignature = edKey.signature(for: edMessage)
// `openssl speed -aead` is a TLS-like sequence: a fresh IV, 13 bytes of AAD, the payload.
let aad = [UInt8](repeating: 0xaa, count: 13)
let nonce = [UInt8](repeating: 1, count: 12)
let oneKiB = [UInt8](repeating: 0x5c, count: 1024)

var cases: [Case] = [
    Case(name: "X25519 shared secret", bytes: nil, opensslArguments: ["speed", "-mr", "-elapsed", "-seconds", opensslSeconds, "ecdhx25519"],
         parse: operationsParser(prefix: "+F5:", field: 3), target: nil, run: { sink ^= (try! x25519Key.sharedSecret(with: x25519Peer))[0] }),
    Case(name: "Ed25519 sign (20 B)", bytes: nil, opensslArguments: ["speed", "-mr", "-elapsed", "-seconds", opensslSeconds, "ed25519"],
         parse: operationsParser(prefix: "+F6:", field: 4), target: nil, run: { sink ^= edKey.signature(for: edMessage)[0] }),
    Case(name: "Ed25519 verify (20 B)", bytes: nil, opensslArguments: ["speed", "-mr", "-elapsed", "-seconds", opensslSeconds, "ed25519"],
         parse: operationsParser(prefix: "+F6:", field: 5), target: nil, run: { sink ^= edKey.publicKey.isValidSignature(edSignature, for: edMessage) ? 1 : 0 }),
]

/// Buffers that live for the whole run, so a case measures the API and not the harness.
final class AEADBench {
    var cipher: AEAD
    let plaintext: UnsafeMutableRawBufferPointer
    let output: UnsafeMutableRawBufferPointer
    let nonce = UnsafeMutableRawBufferPointer.allocate(byteCount: 12, alignment: 8)
    let aad = UnsafeMutableRawBufferPointer.allocate(byteCount: 13, alignment: 8)
    let size: Int

    init(_ algorithm: AEAD.Algorithm, size: Int) {
        cipher = try! AEAD(algorithm, key: [UInt8](repeating: 3, count: 32))
        self.size = size
        plaintext = .allocate(byteCount: size, alignment: 16)
        output = .allocate(byteCount: size + AEAD.tagByteCount, alignment: 16)
        plaintext.initializeMemory(as: UInt8.self, repeating: 0x5c)
        nonce.initializeMemory(as: UInt8.self, repeating: 1)
        aad.initializeMemory(as: UInt8.self, repeating: 0xaa)
    }

    func seal() {
        try! cipher.seal(plaintext: UnsafeRawBufferPointer(plaintext), nonce: UnsafeRawBufferPointer(nonce),
                         authenticating: UnsafeRawBufferPointer(aad),
                         ciphertext: UnsafeMutableRawBufferPointer(rebasing: output[..<size]),
                         tag: UnsafeMutableRawBufferPointer(rebasing: output[size...]))
    }
}

var floors: [String: Double] = [:]
for (algorithm, opensslName, evpName) in [(AEAD.Algorithm.chaCha20Poly1305, "chacha20-poly1305", "ChaCha20-Poly1305"),
                                          (.aes256GCM, "aes-256-gcm", "AES-256-GCM")] {
    for size in [64, 1024, 16384] {
        let bench = AEADBench(algorithm, size: size)
        let plaintext = [UInt8](repeating: 0x5c, count: size)
        let name = "\(evpName) seal \(size) B"
        if options.only.map({ name.contains($0) }) ?? true {
            floors[name] = tether_bench_aead_floor_ns(evpName, size, 13, seconds)
        }
        // The pointer API: the caller owns the output buffer, as the Noise transport will.
        cases.append(Case(name: name, bytes: size,
                          opensslArguments: ["speed", "-mr", "-elapsed", "-seconds", opensslSeconds, "-aead", "-evp", opensslName, "-bytes", String(size)],
                          parse: throughputParser(bytes: size), target: size == 16384 ? 1.10 : size == 64 ? 2.0 : nil, run: { bench.seal() }))
        var arrayCipher = try! AEAD(algorithm, key: [UInt8](repeating: 3, count: 32))
        cases.append(Case(name: "\(name) (array API)", bytes: size, opensslArguments: nil, parse: nil, target: nil, run: {
            sink ^= (try! arrayCipher.seal(plaintext, nonce: nonce, authenticating: aad))[0]
        }))
    }
}

cases.append(Case(name: "BLAKE2s-256 1 KiB", bytes: 1024,
                  opensslArguments: ["speed", "-mr", "-elapsed", "-seconds", opensslSeconds, "-evp", "blake2s256", "-bytes", "1024"],
                  parse: throughputParser(bytes: 1024), target: nil, run: { sink ^= BLAKE2s.hash(oneKiB)[0] }))
cases.append(Case(name: "SHA-256 1 KiB", bytes: 1024,
                  opensslArguments: ["speed", "-mr", "-elapsed", "-seconds", opensslSeconds, "-evp", "sha256", "-bytes", "1024"],
                  parse: throughputParser(bytes: 1024), target: nil, run: { sink ^= SHA256.hash(oneKiB)[0] }))

print("tether-bench: \(seconds) s per case, wall clock; OpenSSL \(runOpenSSL(["version"])?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "not found")")
func pad(_ s: String, _ n: Int) -> String { s.count >= n ? s : s + String(repeating: " ", count: n - s.count) }
func lpad(_ s: String, _ n: Int) -> String { s.count >= n ? s : String(repeating: " ", count: n - s.count) + s }
print(pad("operation", 38) + lpad("tether ns/op", 14) + lpad("MB/s", 10) + lpad("C-floor ns/op", 15) + lpad("ratio", 7)
      + lpad("openssl-speed ns/op", 21) + lpad("ratio", 7) + "  target (vs openssl speed)")
var opensslCache: [[String]: String] = [:]
var missed = 0
for c in cases where options.only.map({ c.name.contains($0) }) ?? true {
    let ns = measure(seconds: seconds, c.run)
    var line = pad(c.name, 38) + lpad(String(format: "%.0f", ns), 14)
    line += lpad(c.bytes.map { String(format: "%.0f", Double($0) / ns * 1e3) } ?? "-", 10)
    if let floor = floors[c.name], floor > 0 {
        line += lpad(String(format: "%.0f", floor), 15) + lpad(String(format: "%.2f", ns / floor), 7)
    } else {
        line += lpad("-", 15) + lpad("", 7)
    }
    if options.compareWithOpenSSL, let arguments = c.opensslArguments, let parse = c.parse {
        if opensslCache[arguments] == nil { opensslCache[arguments] = runOpenSSL(arguments) ?? "" }
        if let reference = parse(opensslCache[arguments]!) {
            let ratio = ns / reference
            line += lpad(String(format: "%.0f", reference), 21) + lpad(String(format: "%.2f", ratio), 7)
            if let target = c.target {
                let ok = ratio <= target
                if !ok { missed += 1 }
                line += String(format: "  ≤ %.2f %@", target, ok ? "ok" : "MISSED")
            }
        } else {
            line += lpad("n/a", 21)
        }
    }
    print(line)
}
if sink == 0xff { print("") }   // keep results observable

// MARK: - Noise (issue 3): handshakes per second and transport throughput against raw AEAD.

@MainActor func noiseSection() throws {
    print("")
    print(pad("Noise", 38) + lpad("ns/op", 14) + lpad("MB/s", 10) + lpad("raw AEAD ns/op", 16) + lpad("ratio", 7) + "  target")
    let responderStatic = X25519.PrivateKey(), initiatorStatic = X25519.PrivateKey()
    let prologue = Array("iterm2-companion/v1/pid:0123456789abcdef".utf8)
    let handshakeNs = measure(seconds: seconds) {
        var phone = try! HandshakeState(.companionXK, role: .initiator, prologue: prologue, staticKey: initiatorStatic,
                                        remoteStaticKey: responderStatic.publicKey)
        var mac = try! HandshakeState(.companionXK, role: .responder, prologue: prologue, staticKey: responderStatic)
        _ = try! mac.readMessage(try! phone.writeMessage())
        _ = try! phone.readMessage(try! mac.writeMessage())
        _ = try! mac.readMessage(try! phone.writeMessage())
        sink ^= try! phone.transportChannel().handshakeHash[0]
    }
    print(pad("XK handshake, both sides", 38) + lpad(String(format: "%.0f", handshakeNs), 14)
          + lpad("-", 10) + "   (\(String(format: "%.0f", 1e9 / handshakeNs)) handshakes/s)")

    var phone = try HandshakeState(.companionXK, role: .initiator, prologue: prologue, staticKey: initiatorStatic,
                                   remoteStaticKey: responderStatic.publicKey)
    var mac = try HandshakeState(.companionXK, role: .responder, prologue: prologue, staticKey: responderStatic)
    _ = try mac.readMessage(try phone.writeMessage())
    _ = try phone.readMessage(try mac.writeMessage())
    _ = try mac.readMessage(try phone.writeMessage())
    let sender = NoiseFrameSender(try phone.transportChannel().sending!)
    for size in [64, 1024, 16384, 65536] {
        let frame = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 16)
        frame.initializeMemory(as: UInt8.self, repeating: 0x42)
        let frameView = UnsafeRawBufferPointer(frame)
        let noiseNs = measure(seconds: seconds) {
            try! sender.send(frameView) { sink ^= $0[0] }
        }
        let raw = AEADBench(.chaCha20Poly1305, size: size)
        let rawNs = measure(seconds: seconds) { raw.seal() }
        let ratio = noiseNs / rawNs
        var line = pad("transport frame \(size) B", 38) + lpad(String(format: "%.0f", noiseNs), 14)
        line += lpad(String(format: "%.0f", Double(size) / noiseNs * 1e3), 10) + lpad(String(format: "%.0f", rawNs), 16) + lpad(String(format: "%.2f", ratio), 7)
        if size == 16384 {
            let ok = ratio <= 1.15
            if !ok { missed += 1 }
            line += "  ≤ 1.15 \(ok ? "ok" : "MISSED")"
        }
        print(line)
    }
}

if options.only.map({ "Noise".contains($0) || $0 == "noise" }) ?? true {
    try noiseSection()
}
if missed > 0 { print("tether-bench: \(missed) target(s) missed") }
