/// Why a forwarded `signal` was dropped without effect (§7.2), for diagnostics and tests. The
/// peer learns nothing of it.
public enum CallSignalDrop: Sendable, Hashable, CaseIterable {
    /// This side is not registered: a late delivery from a signaling connection that is gone.
    case notRegistered
    /// `to` is not this identity's ID, or `from` is.
    case notAddressedHere
    /// `sig` does not verify under `from`.
    case badSignature
    /// The body does not match its kind's schema (§7.1).
    case malformedBody
    /// `identitySig` does not verify under `from`, or the agreement key is zero or low-order (§3.2).
    case badAgreementKey
    /// The call ended here, or its id was used by this side before.
    case staleCall
    /// Not from the current call's peer or not for the current call.
    case notCurrentCall
    /// The kind is not one this side takes from that peer in the call's state: an `offer` to the
    /// caller, an `answer` or `reject` from the caller, a second `answer` or `reject`, an
    /// `answer` before this side's offer left.
    case unexpected
}
