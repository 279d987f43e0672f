import CTetherSystem
import Foundation
import Glibc
import TetherClient
import TetherNet
import TetherWire
import TetherDevice
import TetherSync

private struct DemoFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The code the phone shows, handed to the Mac's code entry (the demo types it for the user).
private final class CodeHandOff: Sendable {
    private let code = Locked<String?>(nil)
    func set(_ value: String) { code.withLock { $0 = value } }
    func take() async -> String? {
        for _ in 0..<1500 {
            if let value = code.withLock({ $0 }) { return value }
            try? await Task.sleep(nanoseconds: 20_000_000)
        }
        return nil
    }
}

func runDemoCommand(_ arguments: [String]) async -> Never {
    if arguments.contains("--help") || arguments.contains("-h") {
        print("""
        usage: tether demo

        One command to see Tether work: starts a private relay on loopback (open mode), a Mac and a
        phone in this process, pairs them (typing the code on the Mac for you), exchanges messages,
        restarts both to show a signed rejoin, unpairs, and explains each step. Nothing is kept.

        """, terminator: "")
        exit(0)
    }
    guard arguments.isEmpty else { fail("demo: takes no arguments (see --help)") }
    signal(SIGPIPE, SIG_IGN)
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("tether-demo-\(getpid())")
    let relay = Process()
    // Interrupted, the demo still stops its relay and removes its files.
    for number in [SIGINT, SIGTERM] {
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler {
            cleanUp(relay, scratch)
            leave(130)
        }
        source.resume()
        signalSources.append(source)
    }
    do {
        try await demo(scratch: scratch, relay: relay)
        cleanUp(relay, scratch)
        leave(0)
    } catch {
        cleanUp(relay, scratch)
        FileHandle.standardError.write(Data("tether: demo: \(error)\n".utf8))
        leave(1)
    }
}

private func cleanUp(_ relay: Process, _ scratch: URL) {
    if relay.isRunning {
        relay.interrupt()
        relay.waitUntilExit()
    }
    try? FileManager.default.removeItem(at: scratch)
}

private let screen = Console()

private func step(_ number: Int, _ text: String) { screen.output("\n\(number). \(text)") }

private func say(_ text: String) { screen.output("   \(text)") }

private func demo(scratch: URL, relay: Process) async throws {
    try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    screen.output("Tether demo: a Mac and a phone pair through a relay that only ever sees ciphertext.")

    // 1. A relay of our own.
    let port = try freeLoopbackPort()
    relay.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    relay.arguments = ["relay", "--local", "--relay-port", String(port), "--relay-db", scratch.appendingPathComponent("relay.db").path]
    let relayOutput = Pipe()
    relay.standardOutput = relayOutput
    relay.standardError = FileHandle.nullDevice
    try relay.run()
    let started = String(decoding: relayOutput.fileHandleForReading.availableLine(), as: UTF8.self)
    guard started.hasPrefix("relay: listening") else { throw DemoFailure("the relay did not start") }
    let origin = "http://127.0.0.1:\(port)"
    step(1, "Started a private relay at \(origin) (open mode: no App Attest, loopback only).")

    let group = try EventLoopGroup(count: 1)
    let macLog = EventCursor<EndpointEvent>(), phoneLog = EventCursor<EndpointEvent>()
    let handOff = CodeHandOff()
    func endpoints() throws -> (MacEndpoint, PhoneEndpoint) {
        let macState = try StateDirectory(scratch.appendingPathComponent("mac"))
        let phoneState = try StateDirectory(scratch.appendingPathComponent("phone"))
        let mac = MacEndpoint(context: EndpointContext(loop: group.next(), state: macState) { macLog.append($0) },
                              transport: .direct(relayOrigin: origin)) { _ in await handOff.take() }
        let phone = PhoneEndpoint(context: EndpointContext(loop: group.next(), state: phoneState) { event in
            if case let .showCode(code) = event { handOff.set(code) }
            phoneLog.append(event)
        })
        return (mac, phone)
    }

    // 2. The Mac parks and shows its link.
    var (mac, phone) = try endpoints()
    var macTask = Task { [mac] in try await mac.run() }
    let link = try await macLog.next("pairing link") { if case let .pairingLink(link) = $0 { link } else { nil } }
    step(2, "The Mac made its long-term key and a pairing link, and parked in its room on the relay.")
    say("The room's name is a hash of the Mac's key and a random pairing id; the relay never learns either.")
    if isatty(STDOUT_FILENO) == 1, let lines = TerminalQR.render(link.url, colors: true) {
        say("A phone would scan this QR code:")
        for line in lines { screen.output("   " + line) }
    }
    say("Pairing link: \(link.url)")

    // 3. The phone joins and both derive the code.
    let parsed = try PairingLink.parse(link.url, allowLoopbackHTTP: true)
    var phoneTask = Task { [phone] in try await phone.pair(parsed) }
    let host = try await phoneLog.next("relay host") { if case let .relay(_, host) = $0 { host ?? "" } else { nil } }
    step(3, "The phone read the link, checked every field, and joined the same room on \(host).")
    say("They ran a Noise XK handshake end to end: the relay only splices ciphertext between them.")
    let code = try await phoneLog.next("code") { if case let .showCode(code) = $0 { code } else { nil } }
    step(4, "Both devices derived the same 6-digit code from the handshake. The phone shows: \(code)")
    say("On a real Mac you would type it; the demo types \(code) into the Mac for you now.")
    try await macLog.next("pairing") { $0 == .paired ? true : nil }
    try await macLog.next("session") { $0 == .connected ? true : nil }
    try await phoneLog.next("session") { $0 == .connected ? true : nil }
    step(5, "The Mac accepted the code. The phone sent it a fresh room secret, and registered that")
    say("secret's public key with the relay: from now on both must sign every join.")

    // 4. Messages.
    phone.send(Array("Hello from the phone!".utf8))
    let atMac = try await macLog.next("message at the Mac") { if case let .message(m) = $0 { String(decoding: m, as: UTF8.self) } else { nil } }
    mac.send(Array("Hello back from the Mac.".utf8))
    let atPhone = try await phoneLog.next("message at the phone") { if case let .message(m) = $0 { String(decoding: m, as: UTF8.self) } else { nil } }
    step(6, "Messages, encrypted end to end:")
    say("phone → Mac: \(atMac)")
    say("Mac → phone: \(atPhone)")

    // 5. Restart both.
    phone.closeSession()
    mac.closeSession()
    phoneTask.cancel()
    macTask.cancel()
    _ = await phoneTask.result
    _ = await macTask.result
    step(7, "Both apps quit. Starting them again from what they stored (keys, pairing, room secret)…")
    (mac, phone) = try endpoints()
    macTask = Task { [mac] in try await mac.run() }
    phoneTask = Task { [phone] in try await phone.run() }
    try await macLog.next("reconnect") { $0 == .connected ? true : nil }
    try await phoneLog.next("reconnect") { $0 == .connected ? true : nil }
    say("They reconnected with signed joins and the pinned keys: no code this time.")
    phone.send(Array("Still here after a restart.".utf8))
    let again = try await macLog.next("message after restart") { if case let .message(m) = $0 { String(decoding: m, as: UTF8.self) } else { nil } }
    say("phone → Mac: \(again)")

    // 6. Unpair.
    try await phone.unpair()
    let macEnd = await macTask.result
    phoneTask.cancel()
    step(8, "The phone unpaired: it deleted the room on the relay with a signed request and forgot the pairing.")
    if case let .failure(error) = macEnd {
        say("The Mac heard: \(error)")
    }
    say("Signing in to that room is no longer possible; pairing again starts from a new link.")
    group.shutdown()
    step(9, "Done. The relay is stopped and the demo's files are removed.")
}

private func freeLoopbackPort() throws -> UInt16 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw DemoFailure("no socket") }
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
    let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
    guard bound == 0 else { throw DemoFailure("no free port") }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
    return UInt16(bigEndian: address.sin_port)
}

private extension FileHandle {
    /// One line (without its newline), read a byte at a time so nothing after it is consumed.
    func availableLine() -> [UInt8] {
        var line: [UInt8] = []
        while let byte = try? read(upToCount: 1), let first = byte.first, first != UInt8(ascii: "\n") {
            line.append(first)
        }
        return line
    }
}
