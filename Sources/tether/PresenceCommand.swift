import Foundation
import TetherCall
import TetherNet
import TetherWire
import TetherSync

/// `tether presence <contact>… --signal URL`: which contacts are online at a signaling server
/// (signaling.md §5.5), for scripts. Presence is asked from a registered connection, so the
/// command registers a throwaway identity made for this one query: it reveals nothing about the
/// user's own ID, and it never collides with the user's identity being online elsewhere
/// (`duplicate_id`).
func runPresenceCommand(_ arguments: [String]) async {
    let help = """
    usage: tether presence <contact link or ID>... --signal URL [--ca FILE]

    Asks the signaling server at URL (wss://host/signal; ws:// for loopback hosts) whether each
    contact (a cryptext://contact/v2/… link or an ID, at most 16) is online, and prints one line
    per contact, in the order given: its ID (64 hex digits) and `online` or `offline`. A link's
    own relay= endpoint is never used by itself: --signal names the server. The query registers
    a fresh throwaway identity, never the one `tether id` shows. Exits 0 once every contact is
    answered, 1 when the server cannot be reached or refuses, 2 on bad arguments.

    """
    if PeerOptions.asksForHelp(arguments) {
        print(help, terminator: "")
        exit(0)
    }
    let options = PeerOptions(arguments, command: "presence", valued: ["signal"])
    guard options.state == nil else { fail("presence: --state is not an option: the query uses a throwaway identity") }
    guard let signal = options.values["signal"] else { fail("presence: --signal URL is required (the server to ask)") }
    let endpoint = signalingEndpoint(signal, command: "presence")
    guard !options.rest.isEmpty else { fail("presence: name at least one contact (a cryptext://contact/v2/… link or an ID)") }
    var contacts: [SignalingID] = []
    for argument in options.rest {
        let id = contactID(argument, command: "presence")
        guard !contacts.contains(id) else { fail("presence: \(id.display) is named twice") }
        contacts.append(id)
    }
    guard contacts.count <= PresenceQuery.maxIDs else { fail("presence: at most \(PresenceQuery.maxIDs) contacts per query") }
    let asked = contacts

    let group: EventLoopGroup
    do { group = try EventLoopGroup(count: 1) } catch { fail("presence: \(error)", code: 1) }
    let outcome = await withCheckedContinuation { (done: CheckedContinuation<Result<[SignalingID: Bool], PresenceFailure>, Never>) in
        let once = ResumeOnce(done)
        do throws(NetError) {
            let client = try SignalingClient(endpoint: endpoint, identity: CallIdentity(), loop: group.next(), tls: options.tls(),
                                             reconnects: false) { event in
                switch event {
                case .registered:
                    // The query goes once the server made the throwaway ID routable.
                    Task {
                        guard let client = once.client else { return }
                        switch await client.presence(asked) {
                        case let .success(online): once.resume(.success(online))
                        case let .failure(error): once.resume(.failure(.query(error)))
                        }
                    }
                case let .disconnected(failure, _): once.resume(.failure(.signaling(failure)))
                case .signal, .signalRefused: break
                }
            }
            once.client = client
            client.start()
        } catch {
            done.resume(returning: .failure(.network(error)))
        }
    }
    switch outcome {
    case let .success(online):
        for id in contacts { print("\(id.canonical) \(online[id] == true ? "online" : "offline")") }
        leave(0)
    case let .failure(failure):
        fail("presence: \(failure)", code: 1)
    }
}

private enum PresenceFailure: Error, CustomStringConvertible {
    case network(NetError)
    case signaling(SignalingFailure)
    case query(SignalingClient.QueryError)

    var description: String {
        switch self {
        case let .network(error): "--signal: \(error)"
        case let .signaling(failure): failure.description
        case let .query(error): error.description
        }
    }
}

/// The query's one answer: the first of a disconnect or a presence reply wins.
private final class ResumeOnce: @unchecked Sendable {  // `client` is set before the client starts; the continuation is locked
    private let continuation: Locked<CheckedContinuation<Result<[SignalingID: Bool], PresenceFailure>, Never>?>
    var client: SignalingClient?

    init(_ continuation: CheckedContinuation<Result<[SignalingID: Bool], PresenceFailure>, Never>) { self.continuation = Locked(continuation) }

    func resume(_ result: Result<[SignalingID: Bool], PresenceFailure>) {
        guard let continuation = continuation.withLock({ held in
            defer { held = nil }
            return held
        }) else { return }
        continuation.resume(returning: result)
    }
}
