import Foundation
import Glibc
import TetherCall
import TetherClient
import TetherWire
import TetherDevice

// MARK: - What every call command shares

/// The state directory of calling identities: `--state`, else `~/.local/state/tether/call`.
let callStateName = "call"

/// The `--signal` endpoint, or a one-line usage failure. Loopback `ws://` is allowed, as
/// `tether mac` allows loopback http: the CLI is also the integration tests' client.
func signalingEndpoint(_ text: String, command: String) -> SignalingEndpoint {
    do throws(SignalingEndpointError) { return try SignalingEndpoint(text, allowLoopbackWS: true) } catch {
        fail("\(command): --signal \(text): \(error)")
    }
}

/// A contact as the user gave it: a contact link (its `relay=` is never applied by itself,
/// §3.4) or a typed ID (§3.1), which must be a key someone could register.
func contactID(_ text: String, command: String) -> SignalingID {
    if text.lowercased().hasPrefix("cryptext:") {
        do throws(ContactLinkError) { return try ContactLink.parse(text, allowLoopbackWS: true).id } catch { fail("\(command): \(error)") }
    }
    let id: SignalingID
    do throws(SignalingID.ParseError) { id = try SignalingID.parse(userInput: text) } catch { fail("\(command): \(text): \(error)") }
    guard IdentityVerification.signingKey(of: id) != nil else { fail("\(command): \(id.display) is not a valid public key (mistyped?)") }
    return id
}

/// The identity in `state`, made now if there is none; a damaged or unreadable one is a
/// failure (exit 1), never replaced.
func loadCallIdentity(_ state: StateDirectory, command: String) -> (identity: CallIdentity, created: Bool) {
    do throws(IdentityStoreError) { return try IdentityStore(directory: state).loadOrCreate() } catch {
        fail("\(command): \(error)\(identityAdvice(error))", code: 1)
    }
}

private func identityAdvice(_ error: IdentityStoreError) -> String {
    switch error {
    case .damaged, .unreadable: "; `tether id --new` replaces it with a new identity (a new ID)"
    case .storage: ""
    }
}

// MARK: - tether id

func runIdCommand(_ arguments: [String]) -> Never {
    let help = """
    usage: tether id [--state DIR] [--signal wss://HOST[:PORT]/signal] [--new]

    Shows this device's calling identity (signaling.md §3), making it on first use: the ID
    others call (CT2-…, the whole Ed25519 public key) and the contact link to give them, with
    its QR code. The link holds no secret.
    --signal URL   the signaling server to reach you through, added to the link as ?relay=
                   (wss:// with the path /signal; ws:// only on a loopback host, for local tests)
    --state DIR    where the identity lives (default ~/.local/state/tether/call); its one file,
                   call-identity (mode 0600), holds the private keys
    --new          erase the identity and make a new one, with a new ID: whoever has the old ID
                   or link can no longer reach you through it

    Scripted (standard output not a terminal): standard output carries two lines, the ID in
    canonical form (64 uppercase hex digits) and then the contact link; narration and the QR
    code go to standard error; a failure exits non-zero (1; 2 for a usage error) with one line
    `tether: <reason>`.

    """
    if PeerOptions.asksForHelp(arguments) {
        print(help, terminator: "")
        exit(0)
    }
    let renew = arguments.contains("--new")
    let options = PeerOptions(arguments.filter { $0 != "--new" }, command: "id", valued: ["signal"])
    if options.caFile != nil { fail("id: unknown option --ca") }
    guard options.rest.isEmpty else { fail("id: unexpected argument \(options.rest[0])") }
    // Checked before the state is touched: a mistyped endpoint must not make an identity.
    let relay = options.values["signal"].map { signalingEndpoint($0, command: "id") }

    let terminal = isatty(STDOUT_FILENO) == 1
    func output(_ line: String) { print(line) }
    func say(_ line: String) {
        if terminal { print(line) } else { FileHandle.standardError.write(Data((line + "\n").utf8)) }
    }

    let state = options.stateDirectory(name: callStateName)
    let store = IdentityStore(directory: state)
    let identity: CallIdentity
    if renew {
        // The old ID is named so the person knows which one their contacts can no longer use;
        // a damaged file has none to name.
        let old = try? store.load()
        do throws(IdentityStoreError) { identity = try store.replace() } catch { fail("id: \(error)", code: 1) }
        if let old {
            say("Erased the identity \(old.id.display) and made a new one. The old ID and its links no longer reach you.")
        } else {
            say("Made a new calling identity in \(state.url.path).")
        }
    } else {
        let (loaded, created) = loadCallIdentity(state, command: "id")
        identity = loaded
        if created { say("Made a new calling identity in \(state.url.path).") }
    }

    let link = ContactLink(id: identity.id, relay: relay).url
    if terminal {
        output("Your ID: \(identity.id.display)")
        output("Contact link (no secret in it; give it to whoever should be able to call you):")
        for line in TerminalQR.render(link, colors: true) ?? [] { output(line) }
        output(link)
    } else {
        output(identity.id.canonical)
        output(link)
        say("ID: \(identity.id.display)")
        for line in TerminalQR.render(link, colors: false) ?? [] { say(line) }
    }
    exit(0)
}
