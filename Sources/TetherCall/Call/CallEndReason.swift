/// Why a call ended, as the user should hear it. Descriptions name no ID and no key.
public enum CallEndReason: Equatable, Sendable, CustomStringConvertible {
    /// The §7.5 deadline that passed on this side.
    public enum Timeout: Sendable, Hashable {
        /// The caller heard neither `answer` nor `reject` within 45 s of the dial.
        case ringing
        /// The callee's invitation went unanswered for 45 s (the caller's `close` never came).
        case invitation
        /// ICE and the data channel did not come up within 30 s.
        case connecting
        /// The Noise handshake and key confirmation did not finish within 15 s of the data
        /// channel opening.
        case handshake
    }

    /// This side's user hung up or cancelled the outgoing call (`close` `hangup` sent).
    case hungUp
    /// The peer sent `close` `hangup` (for an invitation: the caller gave up).
    case peerHungUp
    /// This side's user declined the invitation (`reject` `declined` sent).
    case declined
    /// The callee declined (`reject` `declined`).
    case peerDeclined
    /// The callee is in another call (`reject` `busy`).
    case peerBusy
    /// The callee could not take the call (`reject` `error`).
    case peerUnavailable
    /// A deadline passed here (`close` `timeout` sent when the peer knows the call).
    case timeout(Timeout)
    /// The peer's deadline passed (`close` `timeout`).
    case peerTimedOut
    /// The peer's side failed (`close` `error`).
    case peerFailed
    /// The secure channel failed closed (§9.6; `close` `error` sent).
    case channelFailed(CallChannelFailure)
    /// The media transport reported a failure (`close` `error` sent).
    case mediaFailed
    /// The data channel closed under the call and no `close` from the peer followed within
    /// `CallSetupLimits.closeSignalGrace` (`close` `error` sent).
    case mediaClosed
    /// A 65th remote candidate before the remote description, or a 65th local one before the
    /// description it follows (`close` `error` sent).
    case candidateQueueOverflow
    /// A 17th data-channel message before this side's handler was ready (`close` `error` sent).
    case heldFrameOverflow
    /// The user accepted when the TURN credentials had less than 30 s left (`reject` `error`
    /// sent); reconnect to get new ones.
    case credentialsExpiring
    /// The signaling connection went away before the call could do without it.
    case signalingLost
    /// The server answered `offline` for a signal the call still needed: the peer is not
    /// connected (or left during setup), so nothing can reach it.
    case peerOffline
    /// Glare (§13.1): both sides rang each other and this side, the greater ID, gave its call up
    /// for the peer's (`close` `hangup` sent); the peer's invitation follows.
    case crossedCall

    /// The reason in words, as `tether call` prints it after `ended`.
    public var description: String {
        switch self {
        case .hungUp: "hung up"
        case .peerHungUp: "the peer hung up"
        case .declined: "declined"
        case .peerDeclined: "the peer declined"
        case .peerBusy: "the peer is busy"
        case .peerUnavailable: "the peer could not take the call"
        case .timeout(.ringing): "no answer"
        case .timeout(.invitation): "the invitation expired"
        case .timeout(.connecting): "the connection could not be established in time"
        case .timeout(.handshake): "the secure channel did not come up in time"
        case .peerTimedOut: "the peer timed out"
        case .peerFailed: "the peer's side failed"
        case let .channelFailed(failure): "the secure channel failed: \(failure)"
        case .mediaFailed: "the connection failed"
        case .mediaClosed: "the connection closed"
        case .candidateQueueOverflow: "too many connection candidates"
        case .heldFrameOverflow: "too many early messages"
        case .credentialsExpiring: "the relay credentials are about to expire; reconnect first"
        case .signalingLost: "the signaling connection was lost"
        case .peerOffline: "the peer is not online"
        case .crossedCall: "both sides called at once; taking the peer's call"
        }
    }
}
