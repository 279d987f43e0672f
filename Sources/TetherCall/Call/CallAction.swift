public import TetherWire

/// What a `CallMachine` asks its driver to do, in order.
public enum CallAction: Equatable, Sendable {
    /// Send this envelope on the signaling connection; it is already signed.
    case sendSignal(SignalMessage)
    /// Give this command to `call`'s media transport (`createOffer` and `acceptOffer` make it;
    /// after `close` it is gone).
    case media(call: CallUUID, CallMediaCommand)
    /// Show this to the user.
    case notify(CallNotice)
}
