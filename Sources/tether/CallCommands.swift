import Foundation
import Glibc
import TetherCall
import TetherClient
import TetherNet
import TetherRTC
import TetherWire

/// `tether call <contact> --signal URL` and `tether answer --signal URL`: a real call over the
/// WebRTC data channel (TetherRTC), set up through a signaling server, with an end-to-end
/// encrypted line chat once the secure channel is up (signaling.md §7, §9, §11).
///
/// Every event is one line on standard output, in both modes, so scripts and people read the
/// same thing: `calling <ID>`, `incoming <ID>`, `answered`, `secured <safety number>`,
/// `message <text>`, `receipt`, `rotated <epoch>`, `unsent <text>`, `unconfirmed <text>`,
/// `ended <reason>`. Standard input carries the consent (`yes`/`no`, for `answer`) and then the
/// chat: one line, one text, read only as fast as the call takes texts (`CallAgent.queue`).
/// EOF, `/quit` or Ctrl-C hang up after delivery (`CallAgent.hangUp`); `/quit!` or a second
/// Ctrl-C at once. A call that ends after it was secured with every text delivered exits 0;
/// one that never got there (declined, busy, offline, a timeout, a failure) or lost a text
/// exits 1 with one `tether: <reason>` line, except that `answer` reports a call never secured
/// and goes on waiting for the next call.
func runCallCommand(_ arguments: [String]) async {
    let help = """
    usage: tether call <contact link or ID> --signal URL [--state DIR] [--relay-only] [--ice-address IP] [--ca FILE]

    Rings the contact through the signaling server at URL (wss://host/signal; ws:// for loopback
    hosts) with this device's identity (`tether id`), over a WebRTC data channel. Once the
    secure channel is up both sides show the safety number (compare it out of band), and each
    line typed is sent as one end-to-end encrypted text (lines typed earlier wait for it; input
    is read as fast as the channel sends, so a pasted burst goes out in order at the paced rate).
    --relay-only uses TURN-relayed candidates only (hides this device's address from the peer).
    --ice-address gathers candidates on that one local address instead of every interface.
    Events are printed one per line: calling, answered, secured <safety number>, message <text>,
    receipt, rotated <epoch>, unsent <text>, unconfirmed <text>, ended <reason>.
    EOF, /quit or Ctrl-C hangs up once every text sent has its receipt (at most 5 s; what is
    still undelivered then is printed as unsent or unconfirmed); /quit! or a second Ctrl-C hangs
    up at once. Exit 0 after a secured call whose texts were all delivered, 1 otherwise.

    """
    await runCall(arguments, help: help, command: "call")
}

func runAnswerCommand(_ arguments: [String]) async {
    let help = """
    usage: tether answer --signal URL [--state DIR] [--relay-only] [--ice-address IP] [--ca FILE]

    Waits at the signaling server at URL for a call to this device's identity (`tether id`),
    prints `incoming <caller ID>` and reads the consent from standard input (`yes` accepts; `no`
    or anything else declines). Then as `tether call`: the safety number, the chat (one line, one
    text), EOF, /quit or Ctrl-C to hang up after delivery, /quit! or a second Ctrl-C at once. A
    call that ends before it is secured (declined, given up, or refused: a malformed description,
    a certificate that does not match it) prints its `ended <reason>` line and the command waits
    for the next call. Exit 0 after a secured call whose texts were all delivered, 1 otherwise
    (EOF, Ctrl-C or the server ending it first).

    """
    await runCall(arguments, help: help, command: "answer")
}

private func runCall(_ arguments: [String], help: String, command: String) async -> Never {
    if PeerOptions.asksForHelp(arguments) {
        print(help, terminator: "")
        exit(0)
    }
    signal(SIGPIPE, SIG_IGN)
    var arguments = arguments
    let relayOnly = arguments.contains("--relay-only")
    arguments.removeAll { $0 == "--relay-only" }
    let options = PeerOptions(arguments, command: command, valued: ["signal", "ice-address"])
    guard let signalURL = options.values["signal"] else { fail("\(command): --signal URL is required") }
    let iceAddresses = options.values["ice-address"].map { [$0] } ?? []
    for address in iceAddresses where !isIPAddress(address) { fail("\(command): --ice-address needs an IP address") }
    let endpoint = signalingEndpoint(signalURL, command: command)
    var peer: SignalingID?
    if command == "call" {
        guard options.rest.count == 1 else { fail("call: name exactly one contact (a cryptext://contact/v2/… link or an ID)") }
        peer = contactID(options.rest[0], command: "call")
    } else if !options.rest.isEmpty {
        fail("answer: unexpected argument \(options.rest[0])")
    }
    let (identity, _) = loadCallIdentity(options.stateDirectory(name: callStateName), command: command)
    if peer == identity.id { fail("call: that is this device's own ID") }

    let console = Console()
    let session = CallSession(console: console, command: command)
    let group: EventLoopGroup
    do { group = try EventLoopGroup(count: 1) } catch { fail("\(command): \(error)", code: 1) }
    let transportOptions = RTCMediaTransport.Options(relayOnly: relayOnly, localAddresses: iceAddresses)
    let agent: CallAgent
    do throws(NetError) {
        agent = try CallAgent(identity: identity, endpoint: endpoint, loop: group.next(), tls: options.tls(), media: { call, servers in
            let transport = RTCMediaTransport(iceServers: servers, options: transportOptions)
            session.track(transport, for: call)
            return transport
        }) { event in session.handle(event) }
    } catch {
        fail("\(command): --signal: \(error)", code: 1)
    }
    session.agent = agent
    session.peer = peer
    var signalSources: [any DispatchSourceSignal] = []
    for number in [SIGINT, SIGTERM] {
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler { session.interrupted() }
        source.resume()
        signalSources.append(source)
    }
    console.note("\(command): your ID \(identity.id.display); connecting to \(endpoint.url)")
    agent.start()
    let lines = LineQueue()
    lines.startReadingStandardInput { session.inputEnded() }
    Task {
        while let line = await lines.next() { await session.typed(line) }
        session.hangUp(reason: "end of input")
    }
    let status = await session.finished()
    withExtendedLifetime(signalSources) {}
    leave(status)
}

private func isIPAddress(_ text: String) -> Bool {
    var buffer = in6_addr()
    return inet_pton(AF_INET, text, &buffer) == 1 || inet_pton(AF_INET6, text, &buffer) == 1
}

/// One call's progress as the command shows it; events come from the agent's loop, lines
/// from the input thread, signals from a dispatch queue.
private final class CallSession: @unchecked Sendable {  // `lock` guards every mutable member
    let console: Console
    let command: String
    var agent: CallAgent?
    var peer: SignalingID?
    private let lock = NSLock()
    private var call: CallUUID?
    private var secured = false
    private var awaitingConsent = false
    private var done = false
    private var completed = false
    private var status: Int32 = 1
    private var waiter: CheckedContinuation<Int32, Never>?
    /// Texts of the current call not yet receipted, by id, to name one that is lost; at most
    /// the machine's queue plus the channel's receipt window, since input waits for room.
    private var inFlight: [MessageID: String] = [:]
    private var undelivered = 0
    private var interrupts = 0
    /// The user hung up: the next `ended` finishes the command, even `answer`'s.
    private var leaving = false
    /// Standard input reached its end (its lines may still be waiting to be sent).
    private var endOfInput = false
    /// The caller's line reader waits here until `call` is dialed (online).
    private var dialWaiters: [CheckedContinuation<Void, Never>] = []
    /// The current call's transport, asked what failed when the call ends with the media failed.
    private var media: (call: CallUUID, transport: RTCMediaTransport)?

    init(console: Console, command: String) {
        self.console = console
        self.command = command
    }

    func track(_ transport: RTCMediaTransport, for call: CallUUID) { lock.withLock { media = (call, transport) } }

    /// The reason as the user reads it. "The connection failed" alone does not tell a hostile
    /// or broken peer (a malformed description, a certificate that is not the one it signed) from
    /// a network that let nothing through, so the transport's own problem follows; it names no
    /// key or address.
    private func explanation(_ reason: CallEndReason, call id: CallUUID) -> String {
        let transport: RTCMediaTransport? = lock.withLock {
            guard let media, media.call == id else { return nil }
            self.media = nil
            return media.transport
        }
        guard reason == .mediaFailed, let problem = transport?.lastProblem else { return reason.description }
        return "\(reason) (\(problem))"
    }

    /// The exit status, once the call is over and the agent has left the server.
    func finished() async -> Int32 {
        await withCheckedContinuation { continuation in
            let ready: Int32? = lock.withLock {
                if completed { return status }
                waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    /// The first call decides the status; the others are late echoes of the same end.
    private func finish(_ code: Int32, reason: String?) {
        let first: Bool = lock.withLock {
            guard !done else { return false }
            done = true
            status = code
            return true
        }
        guard first else { return }
        if let reason, code != 0 { console.note("tether: \(command): \(reason)") }
        // Off the agent's loop (this may run on it, inside the `ended` notice): the loop must
        // finish its iteration to send the `close` signal and the socket's close frame, which
        // the pause then gives a moment to leave before the process exits.
        DispatchQueue.global().async { [self] in
            agent?.stop()
            usleep(300_000)
            let continuation: CheckedContinuation<Int32, Never>? = lock.withLock {
                completed = true
                defer { waiter = nil }
                return waiter
            }
            continuation?.resume(returning: code)
        }
    }

    func handle(_ event: CallAgent.Event) {
        switch event {
        case .online:
            if let peer, lock.withLock({ call == nil }) {
                let id = agent?.dial(peer)
                let waiting = lock.withLock {
                    call = id
                    defer { dialWaiters = [] }
                    return dialWaiters
                }
                console.output("calling \(peer.canonical)")
                for waiter in waiting { waiter.resume() }
            } else if peer == nil {
                console.say("\(command): waiting for a call")
            }
        case let .offline(failure, retryIn):
            // A script whose input has ended while no call could be dialed would otherwise
            // wait for a server that may never answer.
            let abandoned = lock.withLock { endOfInput && call == nil }
            if retryIn == nil || abandoned { finish(1, reason: failure.description) }
            else { console.note("\(command): \(failure); retrying") }
        case let .call(notice):
            handle(notice)
        case .signalRefused:
            break
        }
    }

    private func handle(_ notice: CallNotice) {
        switch notice {
        case let .dialRefused(_, refusal):
            finish(1, reason: refusal.description)
        case let .incoming(from, id):
            lock.withLock {
                call = id
                awaitingConsent = true
            }
            console.output("incoming \(from.canonical)")
            if console.interactive { console.say("Accept the call from \(from.display)? Type yes or no.") }
        case .answered:
            console.output("answered")
        case let .secured(_, number):
            lock.withLock { secured = true }
            console.output("secured \(number)")
            if console.interactive { console.say("Compare the safety number with your contact; each line you type is sent encrypted.") }
        case let .message(_, .text(_, text, _)):
            console.output("message " + Console.printable(Array(text.utf8)))
        case let .message(_, .receipt(id)):
            _ = lock.withLock { inFlight.removeValue(forKey: id) }
            console.output("receipt")
        case let .sendRefused(_, id, error):
            _ = lock.withLock { inFlight.removeValue(forKey: id) }
            console.note("\(command): not sent: \(error)")
        case let .undelivered(_, id, loss):
            let text = lock.withLock {
                undelivered += 1
                return inFlight.removeValue(forKey: id)
            }
            console.output((loss == .notSent ? "unsent " : "unconfirmed ") + Console.printable(Array((text ?? "").utf8)))
        case let .rotated(_, epoch):
            console.output("rotated \(epoch)")
        case let .ended(id, reason):
            let text = explanation(reason, call: id)
            console.output("ended \(text)")
            let (wasSecured, over) = lock.withLock { (secured, done || leaving) }
            // Anyone can ring: a call that never got secured must not end `answer`, or one
            // malformed offer would stop the device from taking the call it waits for.
            if command == "answer", !wasSecured, !over {
                lock.withLock {
                    call = nil
                    awaitingConsent = false
                    inFlight = [:]
                    undelivered = 0
                }
                console.note("tether: answer: the call ended: \(text)")
                console.say("answer: waiting for a call")
                return
            }
            let lost = lock.withLock { undelivered }
            if wasSecured, lost > 0 {
                finish(1, reason: "\(lost) text\(lost == 1 ? " was" : "s were") not delivered (printed as unsent or unconfirmed)")
            } else {
                finish(wasSecured ? 0 : 1, reason: "the call ended: \(text)")
            }
        }
    }

    /// One line of input: the consent while an invitation waits, a command, or a text. A text
    /// waits for room in the call's queue (so the next line is read only then); the caller's
    /// first lines wait for the call to be dialed.
    func typed(_ line: String) async {
        if command == "call" { await dialed() }
        let (id, consent) = lock.withLock { () -> (CallUUID?, Bool) in
            let consent = awaitingConsent
            awaitingConsent = false
            return (call, consent)
        }
        guard let agent else { return }
        guard let id else { return console.note("\(command): not sent: no call yet") }
        if consent {
            let yes = ["yes", "y", "accept"].contains(line.trimmingCharacters(in: .whitespaces).lowercased())
            if yes { agent.accept(id) } else { agent.decline(id) }
            return
        }
        switch line {
        case "": return
        case "/rotate": return agent.rotate(id)
        case "/quit": return hangUp(reason: "quit")
        case "/quit!": return hangUp(reason: "quit", immediately: true)
        default: break
        }
        do throws(CallSendError) {
            let sent = try await agent.queue(line, on: id)
            lock.withLock { inFlight[sent] = line }
        } catch {
            lock.withLock { undelivered += 1 }
            console.note("\(command): not sent: \(error)")
        }
    }

    private func dialed() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = lock.withLock {
                if call != nil || done { return true }
                dialWaiters.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    func inputEnded() { lock.withLock { endOfInput = true } }

    /// Ctrl-C (or SIGTERM): the first hangs up after delivery, the next at once.
    func interrupted() {
        let count = lock.withLock {
            interrupts += 1
            return interrupts
        }
        if count == 1, console.interactive { console.say("Hanging up once every text has its receipt; Ctrl-C again to hang up now.") }
        hangUp(reason: "interrupted", immediately: count > 1)
    }

    /// The user is done (EOF, /quit, a signal): the call hangs up, after delivery unless
    /// `immediately`, and its `ended` notice finishes the command; the timer only guards
    /// against a notice that never comes (the longest a call can take: its setup deadlines
    /// when texts typed before `secured` still wait for it, or the grace).
    func hangUp(reason: String, immediately: Bool = false) {
        let (id, isSecured) = lock.withLock {
            leaving = true
            return (call, secured)
        }
        guard let id else { return finish(1, reason: reason) }
        if immediately { agent?.hangUpNow(id) } else { agent?.hangUp(id) }
        let setup = CallSetupLimits.ringingTimeout + CallSetupLimits.connectingTimeout + CallChannelLimits.confirmationTimeout
        let limit: Duration = immediately ? .seconds(2) : (isSecured ? .zero : setup) + CallSetupLimits.hangUpGrace + .seconds(3)
        DispatchQueue.global().asyncAfter(deadline: .now() + Double(limit.components.seconds)) { [self] in finish(isSecured ? 0 : 1, reason: reason) }
    }
}
