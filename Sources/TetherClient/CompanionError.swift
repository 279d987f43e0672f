public import TetherWire
public import TetherDevice

/// Why pairing, a reconnect or an unpair did not work. Each is one the user can act on, and its
/// description is the one line the commands print.
public enum CompanionError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The relay refused or dropped a join (see ``AdmissionError``).
    case relay(AdmissionError)
    /// A room call to the relay failed: attestation, registration or delete (see
    /// ``RelayCallError``).
    case calls(RelayCallError)
    /// The end-to-end channel failed (see ``SecureChannelError``); the endpoint reconnects with a
    /// fresh handshake.
    case channel(SecureChannelError)
    /// No relay could be found for the room (see ``ResolveError``).
    case resolve(ResolveError)
    /// The state directory could not be read or written (a corrupt record, a permission).
    case state(StateDirectory.Failure)
    /// The pairing link is not one this SDK accepts.
    case invalidLink(PairingLinkError)
    /// The Mac declined (a wrong code three times, a timeout or an abort).
    case pairingDeclined
    /// Three wrong codes were typed on the Mac: the pairing is void, make a new one.
    case wrongCode
    /// No phone used the pairing link in time; a new one is made.
    case pairingExpired(lifetime: Duration)
    /// A step did not finish in time (the handshake, the verdict).
    case timedOut(String)
    /// The peer broke the pairing protocol (an unexpected or malformed message).
    case protocolViolation(String)
    /// The two apps' revisions cannot talk.
    case incompatible(CompanionRevision.Verdict)
    /// This device holds no pairing.
    case notPaired
    /// The relay no longer knows the room (reaped or deleted): pair again.
    case needsRepairing(String)
    /// The relay refused this device's join signature for an established room: the relay's
    /// origin is not the one the pairing binds, or the room now belongs to another pairing.
    case signatureRefused(origin: String)
    /// The other device ended the pairing.
    case unpairedByPeer
    /// The attester could not produce an attestation or assertion.
    case attestation(String)
    /// Standard input ended before the code was typed.
    case noCodeEntered

    public var description: String {
        switch self {
        case let .relay(error): "\(error)"
        case let .calls(error): "\(error)"
        case let .channel(error): "\(error)"
        case let .resolve(error): "\(error)"
        case let .state(error): "\(error)"
        case let .invalidLink(error): "\(error)"
        case .pairingDeclined: "The pairing was declined on your Mac. Make sure the code matches and try again."
        case .wrongCode: "The code was entered wrongly three times; start a new pairing."
        case let .pairingExpired(lifetime): "The pairing link expired (\(Self.describe(lifetime)) without a phone); a new one was made."
        case let .timedOut(what): "timed out: \(what)"
        case let .protocolViolation(what): "the other device broke the protocol: \(what)"
        case let .incompatible(verdict): verdict == .upgradeSelf ? "this app must be upgraded" : "the other device's app must be upgraded"
        case .notPaired: "not paired: run `tether mac --relay URL` and `tether phone LINK` to pair"
        case let .needsRepairing(why): "the pairing is gone from the relay (\(why)); it needs re-pairing"
        case let .signatureRefused(origin): "the relay refused this device's signature: its RELAY_ORIGIN must be exactly \(origin), "
            + "or the room was paired again elsewhere (then unpair and pair again)"
        case .unpairedByPeer: "the other device unpaired; this pairing is gone"
        case let .attestation(why): "attestation failed: \(why)"
        case .noCodeEntered: "standard input ended before the code was entered"
        }
    }

    /// What a reconnect loop should do about it (client.md §14).
    var signal: RelaySignal {
        switch self {
        case let .relay(error): error.signal
        case let .calls(error): error.signal
        case .channel, .timedOut, .protocolViolation: .transient
        case let .resolve(error): error == .noTransport ? .fatal : .transient
        default: .fatal
        }
    }
}

extension CompanionError {
    /// `2 minutes`, `3 seconds`, `1 minute 30 seconds`: a lifetime as a person reads it.
    public static func describe(_ lifetime: Duration) -> String {
        let whole = max(1, Int(lifetime.secondsDouble.rounded()))
        func unit(_ count: Int, _ name: String) -> String { "\(count) \(name)\(count == 1 ? "" : "s")" }
        let (minutes, rest) = (whole / 60, whole % 60)
        switch (minutes, rest) {
        case (0, _): return unit(rest, "second")
        case (_, 0): return unit(minutes, "minute")
        default: return unit(minutes, "minute") + " " + unit(rest, "second")
        }
    }
}
