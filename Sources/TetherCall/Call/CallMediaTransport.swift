/// A call's media: the peer connection and its one data channel (signaling.md §7.4), driven by
/// the machine's `CallMediaCommand`s and reporting `CallMediaEvent`s. One transport serves one
/// call; the driver makes it on `createOffer` or `acceptOffer` and drops it after `close`. Free of
/// WebRTC types, so a libnice/usrsctp data channel and `InMemoryMediaTransport` fit alike.
///
/// Threading contract:
/// - `perform` is called by one thread at a time (the driver's loop) and returns at once; the
///   work happens elsewhere. A transport never reports from inside `perform`, so the driver is
///   never re-entered while it handles an action.
/// - Reports reach the delegate on a thread of the transport's choosing, one at a time, in the
///   order they happened. The driver hops each onto its own loop, tags it with the transport's
///   call (`CallEvent.media(call:_:)`) and hands it to the machine there.
/// - After `close` nothing more is reported, except what was already on its way; the machine
///   ignores such stale reports.
public protocol CallMediaTransport: AnyObject, Sendable {
    /// Receives the reports; held weakly. Set it before the first command.
    var delegate: (any CallMediaTransportDelegate)? { get set }

    /// Carries out one command (asynchronously, in order).
    func perform(_ command: CallMediaCommand)
}

/// Where a `CallMediaTransport` reports (on any thread; see its threading contract).
public protocol CallMediaTransportDelegate: AnyObject, Sendable {
    /// `transport` reports `event`: a description, a candidate, the data channel's state or a
    /// message, or a failure.
    func mediaTransport(_ transport: any CallMediaTransport, didReport event: CallMediaEvent)
}
