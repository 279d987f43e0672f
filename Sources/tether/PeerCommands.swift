import Foundation
import Glibc
import TetherAttest
import TetherClient
import TetherCrypto
import TetherNet
import TetherSync
import TetherWire
import TetherDevice

/// Options every peer command shares.
struct PeerOptions {
    var command: String
    var state: String?
    var caFile: String?
    var rest: [String] = []
    var values: [String: String] = [:]

    /// Parses `--name VALUE` for the given names (and `--state`, `--ca`); other arguments are
    /// left in `rest`.
    init(_ arguments: [String], command: String, valued: Set<String> = []) {
        self.command = command
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let name = argument.hasPrefix("--") ? String(argument.dropFirst(2)) : nil
            if let name, name == "state" || name == "ca" || valued.contains(name) {
                guard index + 1 < arguments.count else { fail("\(command): --\(name) needs a value") }
                let value = arguments[index + 1]
                switch name {
                case "state": state = value
                case "ca": caFile = value
                default: values[name] = value
                }
                index += 2
            } else if let name, name.contains("=") {
                // `--state=` is the flag with an empty value, refused as such below.
                let parts = name.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                self = PeerOptions(Array(arguments[..<index]) + ["--" + parts[0], parts[1]] + Array(arguments[(index + 1)...]), command: command, valued: valued)
                return
            } else {
                if let name, name != "help" { fail("\(command): unknown option --\(name)") }
                rest.append(argument)
                index += 1
            }
        }
    }

    /// The state directory: `--state`, else `$XDG_STATE_HOME/tether/<role>` (or
    /// `~/.local/state/tether/<role>`).
    ///
    /// A pairing directory this run makes is removed again if the run fails before a pairing is
    /// stored in it (`FreshPairingState`): a mistyped flag, an unreachable relay or a refused
    /// certificate leave no directory, and no device key, behind.
    func stateDirectory(role: PairingRecord.Role) -> StateDirectory {
        let path = state ?? Self.defaultStatePath(role: role)
        let fresh = !FileManager.default.fileExists(atPath: path)
        let directory = stateDirectory(name: role.rawValue)
        if fresh { FreshPairingState.made(directory) }
        return directory
    }

    /// The same for any use of the SDK's state (`call` for calling identities).
    func stateDirectory(name: String) -> StateDirectory {
        let path = state ?? Self.defaultStatePath(name: name)
        guard !path.isEmpty else { fail("\(command): --state needs a directory") }
        do throws(StateDirectory.Failure) { return try StateDirectory(path: path) } catch {
            fail("\(command): --state \(path): \(error)")
        }
    }

    /// The state directory only if it already exists: a command that cannot go on without a
    /// pairing never creates one (a mistyped command must leave nothing behind).
    func existingStateDirectory(role: PairingRecord.Role) -> StateDirectory? {
        FileManager.default.fileExists(atPath: state ?? Self.defaultStatePath(role: role)) ? stateDirectory(role: role) : nil
    }

    /// `--help`, `-h` or the word `help` anywhere a command takes its arguments.
    static func asksForHelp(_ arguments: [String]) -> Bool {
        arguments.contains("--help") || arguments.contains("-h") || arguments.first == "help"
    }

    static func defaultStatePath(role: PairingRecord.Role) -> String { defaultStatePath(name: role.rawValue) }

    static func defaultStatePath(name: String) -> String {
        let environment = ProcessInfo.processInfo.environment
        let base = environment["XDG_STATE_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? ((environment["HOME"] ?? NSHomeDirectory()) + "/.local/state")
        return base + "/tether/" + name
    }

    func tls() -> TLSClientContext? {
        guard let caFile = caFile ?? ProcessInfo.processInfo.environment["TETHER_CA_FILE"] else { return nil }
        do { return try TLSClientContext(caFile: caFile) } catch { fail("\(command): --ca \(caFile): \(error)") }
    }
}

/// Runs an endpoint until it fails (exit 1 with the reason on one line), the other device
/// unpairs (exit 0), or SIGINT/SIGTERM arrives (the session is closed, exit 0). Standard input
/// feeds `lines`; its end in a terminal (Ctrl-D) means the person is done, so the session closes
/// and the command exits 0, while a script's input may end with the chat going on (received lines
/// are still printed), so then nothing happens.
func runPeer(console: Console, endpoint: any CompanionEndpoint, lines: LineQueue, _ body: @escaping @Sendable () async throws(CompanionError) -> Void) async -> Never {
    signal(SIGPIPE, SIG_IGN)
    // The session runs in a task of its own, so a stop signal can cancel it: the endpoint's loops
    // check for cancellation before they park or join again, and a stopping Mac does not re-join
    // the room in the moment before it exits.
    let work = Task { () async -> CompanionError? in
        do throws(CompanionError) {
            try await body()
            return nil
        } catch {
            return error
        }
    }
    let interactive = console.interactive
    lines.startReadingStandardInput { () -> Void in
        if interactive { stop(endpoint, cancelling: work) }
    }
    for number in [SIGINT, SIGTERM] {
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler { stop(endpoint, cancelling: work) }
        source.resume()
        signalSources.append(source)
    }
    let outcome = await work.value
    // A stop signal cancelled the session (which may end with or without an error): `stop`
    // leaves once the close handshake is over.
    while shuttingDown.withLock({ $0 }) { try? await Task.sleep(nanoseconds: 1_000_000_000) }
    switch outcome {
    case nil:
        leave(0)
    case .unpairedByPeer?:
        console.say(CompanionError.unpairedByPeer.description)
        leave(0)
    case let error?:
        // One line, as scripts expect: the reason, then what to do when it does not say.
        FileHandle.standardError.write(Data("tether: \(error)\(advice(for: error).map { " — " + $0 } ?? "")\n".utf8))
        leave(1)
    }
}

/// Ends the command for a stop signal or the end of a person's input: the socket the endpoint
/// holds (parked or in a session) is taken, the endpoint's task cancelled (so it does not join
/// again), and the socket closed with a close frame; the process leaves once the relay has
/// answered the close, or after 2 s.
func stop(_ endpoint: any CompanionEndpoint, cancelling work: Task<CompanionError?, Never>) -> Never {
    shuttingDown.withLock { $0 = true }
    let socket = endpoint.heldSocket
    work.cancel()
    Task {
        if let socket {
            socket.close()
            _ = await socket.ended()
        }
        leave(0)
    }
    usleep(2_000_000)
    leave(0)
}

/// What to do about a failure whose own words do not say it.
func advice(for error: CompanionError) -> String? {
    if case .relay(.refused("mac offline")) = error {
        return "The Mac is not waiting on the relay: its pairing link has probably expired, or `tether mac` was stopped. Show a new link on the Mac and use that."
    }
    return nil
}

nonisolated(unsafe) var signalSources: [any DispatchSourceSignal] = []
/// Set when a stop signal arrived: the session's own close is not news to narrate.
let shuttingDown = Locked(false)

/// Narrates endpoint events for a person (interactive) or a script (scripted).
func narrate(_ event: EndpointEvent, console: Console, role: PairingRecord.Role, linkLifetime: Duration = MacEndpoint.pairingLinkLifetime) {
    if event == .paired || event == .connected { FreshPairingState.pairedOnce() }
    if shuttingDown.withLock({ $0 }) { return }
    switch event {
    case let .pairingLink(link):
        if console.interactive {
            console.say("Scan this code with the phone, or open the link below on it:")
            for line in TerminalQR.render(link.url, colors: true) ?? [] { console.output(line) }
        } else if let lines = TerminalQR.render(link.url, colors: false) {
            for line in lines { console.note(line) }
        }
        console.output(link.url)
        console.say("Waiting for the phone. The link expires after \(describeLifetime(linkLifetime)) without use.")
    case .waitingForPeer:
        if role == .mac { console.say("Parked on the relay; waiting for the phone.") }
    case let .relay(origin, disclosed):
        let host = RelayOrigin.host(of: origin) ?? origin
        if let disclosed {
            console.say("Relay: \(disclosed) (not the official relay: pair only if you set it up)")
        } else {
            console.say("Relay: \(host)")
        }
    case .enterCode:
        console.say("A phone connected. Type the 6-digit code the phone shows, then Enter:")
    case let .wrongCode(left):
        console.say("That code does not match. \(left) attempt\(left == 1 ? "" : "s") left:")
    case let .showCode(code):
        console.say("Check that your Mac asks for this code, and type it there:")
        console.output(code)
    case .codeWithdrawn:
        if console.interactive { console.say("(the code is no longer valid)") }
    case let .pairingRestarted(reason):
        console.say("\(reason) Making a new pairing link.")
    case .paired:
        console.say("Paired.")
    case .connected:
        console.say("Connected end-to-end. Type a line and press Enter to send it.")
    case let .message(frame):
        console.output(Console.printable(frame))
    case let .disconnected(reason, delay):
        console.say("Disconnected: \(reason). Retrying in \(String(format: "%.0f", delay.secondsDouble.rounded(.up))) s.")
        if role == .phone, reason.contains("mac offline") {
            console.say("The Mac is not waiting on the relay yet: start `tether mac` (or wait for it to reconnect).")
        }
    }
}

// MARK: - tether mac

func runMacCommand(_ arguments: [String]) async -> Never {
    let help = """
    usage: tether mac --relay https://HOST[:PORT] [--state DIR] [--ca FILE]
           tether mac --resolver https://HOST/shardmap.json [--state DIR] [--ca FILE]
           tether mac [--state DIR]          (reconnect a paired Mac)

    The Mac side of a pairing. Unpaired, it parks on the relay and prints the pairing link and
    its QR code; type the six digits the phone shows. Paired, it reconnects with a signed join.
    Then each line typed is sent to the phone and each line received is printed.
    http:// relays are accepted for loopback hosts only (local tests).
    --link-lifetime SECONDS   how long an unused link lives (default 120)

    Scripted (standard input or output not a terminal): standard output carries the pairing
    link alone on a line (again for each new link) and each received line; the code is read
    from standard input; narration and the QR code go to standard error; a failure exits non-zero
    (1; 2 for a usage error) with one line `tether: <reason>`. Ctrl-C/SIGTERM end the session (exit 0).

    """
    let options = PeerOptions(arguments, command: "mac", valued: ["relay", "resolver", "link-lifetime"])
    if PeerOptions.asksForHelp(arguments) {
        print(help, terminator: "")
        exit(0)
    }
    guard options.rest.isEmpty else { fail("mac: unexpected argument \(options.rest[0])") }
    let console = Console()

    var transport: PairingLink.Transport?
    switch (options.values["relay"], options.values["resolver"]) {
    case (nil, nil): break
    case let (relay?, nil):
        guard let origin = RelayOrigin.canonicalize(webOrigin(relay), allowLoopbackHTTP: true) else {
            fail("mac: --relay must be an https origin such as https://relay.example.com (http only for loopback): \(relay)")
        }
        transport = .direct(relayOrigin: origin)
    case let (nil, resolver?):
        guard let url = RelayOrigin.canonicalizeResolver(webOrigin(resolver), allowLoopbackHTTP: true) else {
            fail("mac: --resolver must be an https URL (http only for loopback): \(resolver)")
        }
        transport = .resolved(resolverURL: url)
    default: fail("mac: give --relay or --resolver, not both")
    }
    // Every flag is checked before the state directory exists, so a typo makes none.
    var linkLifetime = MacEndpoint.pairingLinkLifetime
    if let lifetime = options.values["link-lifetime"] {
        guard let seconds = Double(lifetime.hasSuffix("s") ? String(lifetime.dropLast()) : lifetime), seconds > 0, seconds.isFinite else {
            fail("mac: --link-lifetime needs a positive number of seconds (such as 90 or 90s): \(lifetime)")
        }
        linkLifetime = .seconds(seconds)
    }
    let tls = options.tls()
    let notPaired = "mac: not paired yet; give --relay https://HOST[:PORT] (or --resolver URL)"
    guard let state = transport == nil ? options.existingStateDirectory(role: .mac) : options.stateDirectory(role: .mac) else { fail(notPaired) }
    if state.pairedRole == .phone { fail("mac: \(state.url.path) holds a phone's pairing; use another --state", code: 1) }
    if transport == nil, state.pairedRole == nil { fail(notPaired) }
    if transport != nil, state.pairedRole == .mac { console.note("tether: already paired; reconnecting (--relay/--resolver apply to a new pairing only)") }

    let lines = LineQueue()
    let group: EventLoopGroup
    do { group = try EventLoopGroup(count: 1) } catch { fail("mac: \(error)", code: 1) }
    let chat = ChatPump(lines: lines)
    let context = EndpointContext(loop: group.next(), tls: tls, state: state) { [linkLifetime] event in
        narrate(event, console: console, role: .mac, linkLifetime: linkLifetime)
        if event == .paired || event == .connected { chat.start() }
    }
    // A new pairing on a direct relay: its link must carry the origin the relay signs with.
    if state.pairedRole == nil, case let .direct(origin?)? = transport,
       let advertised = await RelayIdentity.origin(of: origin, loop: group.next(), tls: tls), advertised != origin {
        fail("mac: the relay at \(origin) signs with the origin \(advertised); pair with --relay \(advertised) (a link with another spelling would pair, then fail every reconnect)", code: 1)
    }
    let mac = MacEndpoint(context: context, transport: transport, pairingLinkLifetime: linkLifetime) { _ in await lines.next() }
    chat.send = { mac.send($0) }
    await runPeer(console: console, endpoint: mac, lines: lines) { () throws(CompanionError) in try await mac.run() }
}

// MARK: - tether phone

func runPhoneCommand(_ arguments: [String]) async -> Never {
    let help = """
    usage: tether phone 'iterm2://pair?…' [--state DIR] [--ca FILE] [--attester DIR --app-id ID]
           tether phone [--state DIR]        (reconnect a paired phone)

    The phone side of a pairing: shows the relay and the six-digit code to type on the Mac,
    then the same line chat as `tether mac`. Run again later, it reconnects.
    --attester DIR    attest with the software attester whose root `tether attester init DIR`
                      made (for relays in attestation mode configured with that root)
    --app-id ID       the relay's APP_ID (TEAMID.bundle.id), with --attester
    --attest-env E    production (default) or development, as the relay's APPATTEST_ENV

    Scripted (standard input or output not a terminal): standard output carries the code alone
    on a line and each received line; narration goes to standard error; a failure exits non-zero
    (1; 2 for a usage error) with one line `tether: <reason>`. Ctrl-C/SIGTERM end the session (exit 0).

    """
    let options = PeerOptions(arguments, command: "phone", valued: ["attester", "app-id", "attest-env"])
    if PeerOptions.asksForHelp(arguments) {
        print(help, terminator: "")
        exit(0)
    }
    guard options.rest.count <= 1 else { fail("phone: one pairing link at most") }
    let console = Console()
    var link: PairingLink?
    if let text = options.rest.first {
        // A link pasted with its line end or surrounding spaces is still the link.
        do { link = try PairingLink.parse(text.trimmingCharacters(in: .whitespacesAndNewlines), allowLoopbackHTTP: true) } catch {
            let detail = error == .invalidRelay || error == .invalidResolver ? ": relays must be https (http only on a loopback host)" : ""
            fail("phone: \(error.userMessage)\(detail)", code: 1)
        }
    }
    let tls = options.tls()
    let notPaired = "phone: not paired yet; give the pairing link the Mac shows"
    guard let state = link == nil ? options.existingStateDirectory(role: .phone) : options.stateDirectory(role: .phone) else { fail(notPaired, code: 1) }
    if state.pairedRole == .mac { fail("phone: \(state.url.path) holds a Mac's pairing; use another --state", code: 1) }
    let stored: PairingLink?
    do { stored = try state.phonePairing() } catch { fail("\(error)", code: 1) }
    if let link, let stored, stored.roomName != link.roomName {
        fail("phone: already paired with another Mac; run `tether unpair` first", code: 1)
    }
    if link == nil, stored == nil { fail(notPaired, code: 1) }

    let lines = LineQueue()
    let group: EventLoopGroup
    do { group = try EventLoopGroup(count: 1) } catch { fail("phone: \(error)", code: 1) }
    let chat = ChatPump(lines: lines)
    let context = EndpointContext(loop: group.next(), tls: tls, state: state) { event in
        narrate(event, console: console, role: .phone)
    }
    // A new pairing: the link's relay must sign with the origin the link carries.
    if stored == nil, case let .direct(origin?)? = link?.transport,
       let advertised = await RelayIdentity.origin(of: origin, loop: group.next(), tls: tls), advertised != origin {
        fail("phone: this link names the relay \(origin), but that relay signs with the origin \(advertised): make a new link on the Mac with --relay \(advertised)", code: 1)
    }
    let phone = PhoneEndpoint(context: context, attester: softwareAttester(options))
    chat.send = { phone.send($0) }
    chat.start()
    let pairing = stored == nil ? link : nil
    if let stored {
        narrate(.relay(origin: storedOrigin(stored), disclosedHost: stored.disclosedHost), console: console, role: .phone)
    }
    await runPeer(console: console, endpoint: phone, lines: lines) { () throws(CompanionError) in
        if let pairing { try await phone.pair(pairing) } else { try await phone.run() }
    }
}

/// The software attester `--attester DIR --app-id ID` names, if any.
private func softwareAttester(_ options: PeerOptions) -> SoftwareAttester? {
    guard let directory = options.values["attester"] else {
        if options.values["app-id"] != nil { fail("phone: --app-id goes with --attester DIR") }
        return nil
    }
    guard let appID = options.values["app-id"], !appID.isEmpty else { fail("phone: --attester needs --app-id (the relay's APP_ID)") }
    let environment: AppAttestVerifier.Environment
    switch options.values["attest-env"] ?? "production" {
    case "production": environment = .production
    case "development": environment = .development
    case let other: fail("phone: --attest-env must be production or development, not \(other)")
    }
    guard !directory.isEmpty else { fail("phone: --attester needs a directory") }
    do {
        let authority = try AttesterAuthorityFiles(directory: directory).load()
        return SoftwareAttester(appID: appID, environment: environment, authority: authority)
    } catch {
        fail("phone: --attester \(directory): \(error)")
    }
}

private func storedOrigin(_ link: PairingLink) -> String {
    switch link.transport {
    case let .direct(origin): origin ?? "(none)"
    case let .resolved(url): url
    }
}

/// `ws://` and `wss://` are accepted where an origin is expected (as http/https).
func webOrigin(_ text: String) -> String {
    if text.lowercased().hasPrefix("wss://") { return "https://" + text.dropFirst(6) }
    if text.lowercased().hasPrefix("ws://") { return "http://" + text.dropFirst(5) }
    return text
}

/// Standard input lines into the chat, once the session may carry them.
final class ChatPump: @unchecked Sendable {
    private let lines: LineQueue
    private let lock = NSLock()
    private var started = false
    var send: @Sendable ([UInt8]) -> Void = { _ in }

    init(lines: LineQueue) { self.lines = lines }

    func start() {
        guard lock.withLock({ () -> Bool in
            defer { started = true }
            return !started
        }) else { return }
        let lines = self.lines, send = self.send
        Task.detached {
            // An empty frame means nothing on the wire (receivers drop it, client.md §12.1).
            while let line = await lines.next() {
                if !line.isEmpty { send(Array(line.utf8)) }
            }
        }
    }
}

// MARK: - tether unpair

func runUnpairCommand(_ arguments: [String]) async -> Never {
    let help = """
    usage: tether unpair [--state DIR] [--ca FILE]

    Ends the pairing held in the state directory (either role): deletes the room on the relay
    with a signed request, then forgets the pairing. Without --state, the default Mac and phone
    directories are both checked.

    """
    let options = PeerOptions(arguments, command: "unpair")
    if PeerOptions.asksForHelp(arguments) {
        print(help, terminator: "")
        exit(0)
    }
    guard options.rest.isEmpty else { fail("unpair: unexpected argument \(options.rest[0])") }
    let directories: [StateDirectory] = options.state != nil
        ? [options.existingStateDirectory(role: .mac)].compactMap { $0 }
        : [PairingRecord.Role.mac, .phone].filter { FileManager.default.fileExists(atPath: PeerOptions.defaultStatePath(role: $0)) }
            .map { options.stateDirectory(role: $0) }
    let paired = directories.filter { $0.pairedRole != nil }
    guard !paired.isEmpty else { fail("unpair: \(CompanionError.notPaired)", code: 1) }
    let group: EventLoopGroup
    do { group = try EventLoopGroup(count: 1) } catch { fail("unpair: \(error)", code: 1) }
    for state in paired {
        let context = EndpointContext(loop: group.next(), tls: options.tls(), state: state) { _ in }
        do throws(CompanionError) {
            if state.pairedRole == .mac { try await MacEndpoint.unpair(context: context) } else { try await PhoneEndpoint.unpair(context: context) }
        } catch {
            fail("unpair: \(error)", code: 1)
        }
        print("Unpaired: the room is deleted on the relay and the pairing is forgotten (\(state.url.path)).")
    }
    leave(0)
}

/// "2 minutes", "3 seconds", "1 minute 30 seconds": how long a pairing link lives, in words.
func describeLifetime(_ lifetime: Duration) -> String { CompanionError.describe(lifetime) }

/// Pairing directories this run made. A run that ends with a failure removes each that still
/// holds no pairing, with the device key it may have made: nothing of a failed first attempt
/// stays behind (a second attempt makes a new key, as a first one does).
enum FreshPairingState {
    private static let paths = Locked<[String]>([])
    private static let everPaired = Locked(false)

    static func made(_ directory: StateDirectory) { paths.withLock { $0.append(directory.url.path) } }

    /// The run paired (or reached a session): what it made is the user's from then on, even if
    /// the pairing is later ended (an unpair keeps the device key, as it always did).
    static func pairedOnce() { everPaired.withLock { $0 = true } }

    /// Called on a failing exit.
    static func removeUnpaired() {
        guard !everPaired.withLock({ $0 }) else { return }
        for path in paths.withLock({ $0 }) {
            guard let directory = try? StateDirectory(path: path), directory.pairedRole == nil else { continue }
            try? FileManager.default.removeItem(atPath: path)
        }
    }
}
