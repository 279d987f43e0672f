/// ICE for one call's media transport (RFC 8445 with trickle, over libnice in RFC 5245 mode):
/// one stream with one component, since the data channel is bundled and rtcp-muxed.
///
/// Threading contract:
/// - Each agent has its own thread running a GLib main loop on a private main context; libnice
///   lives there and nowhere else, never on one of Tether's event loops.
/// - Every method may be called from any thread. Each checks its arguments where it is called
///   (so errors are thrown synchronously) and hands the work to the ICE thread, where jobs run
///   in the order they were posted.
/// - Everything the agent reports comes out through `handler`, called on the ICE thread, one
///   event at a time and in order. The owner hops onto its own loop with each event (and so
///   checks there that the call is still current) and never blocks in the handler.
/// - `close()` (from any thread but the ICE thread) returns once the thread has been joined:
///   after it, the handler is never called again. Called from inside the handler, it silences
///   the agent at once and the thread ends on its own shortly after.
///
/// A typical call: make the agent, put `localCredentials` in the SDP, `startGathering()` and
/// trickle each `localCandidate`; with the peer's SDP `setRemoteCredentials`, then
/// `addRemoteCandidate` per `candidate` signal and `endOfRemoteCandidates` for the empty one;
/// `send` and `.datagram` once `.selectedPair` arrived; `close()` when the call ends.
public final class ICEAgent: Sendable {
    /// The largest IPv4 UDP payload (65,507) less a TURN Send indication's framing (48 bytes:
    /// a STUN header, an IPv6 XOR-PEER-ADDRESS and the DATA header), so it fits relayed too.
    public static let maxDatagramSize = 65_459

    /// This agent's `a=ice-ufrag`/`a=ice-pwd`, fixed for its life (no ICE restart).
    public let localCredentials: ICECredentials
    public let role: ICEConfiguration.Role
    private let relayOnly: Bool
    private let tcpCandidates: Bool
    private let thread: ICEThread
    private let slot = SessionSlot()

    /// The ICE thread's session; touched only by jobs running there.
    private final class SessionSlot: @unchecked Sendable { // touched only by jobs on the ICE thread, one at a time
        var session: NiceSession?
    }

    /// Checks the configuration and starts the ICE thread; nothing is gathered before
    /// `startGathering()`.
    public init(_ configuration: ICEConfiguration, handler: @escaping @Sendable (ICEEvent) -> Void) throws(ICEError) {
        guard configuration.localAddresses.allSatisfy(IPLiteral.isValid) else { throw .invalidLocalAddress }
        let plan = try ICEServerPlan(configuration.servers, relayOnly: configuration.relayOnly)
        let credentials = ICECredentials.random()
        localCredentials = credentials
        role = configuration.role
        relayOnly = configuration.relayOnly
        tcpCandidates = configuration.tcpCandidates
        thread = ICEThread(name: "tether-ice")
        thread.start()
        thread.post { [slot, thread] in
            slot.session = NiceSession.make(context: thread.context, configuration: configuration, plan: plan, credentials: credentials, handler: handler)
        }
    }

    deinit { close() }

    /// Gathers host (unless relay-only), server-reflexive (with a STUN server, unless relay-only)
    /// and relayed (with TURN servers) candidates, trickled as `.localCandidate` and ended by
    /// `.gatheringComplete`.
    public func startGathering() throws(ICEError) {
        try post { $0.gather() }
    }

    public func setRemoteCredentials(_ credentials: ICECredentials) throws(ICEError) {
        try post { $0.setRemoteCredentials(credentials) }
    }

    /// One remote candidate, the attribute value without `a=` (signaling.md §7.1). Throws for
    /// one that is malformed or not for component 1. Returns false, and drops it, for a valid
    /// candidate this agent cannot use: TCP ones while ICE-TCP is off, and the ones the grammar
    /// calls unusable (a host name such as browsers' mDNS `….local`, which libnice does not
    /// resolve; an unknown transport or type).
    @discardableResult
    public func addRemoteCandidate(_ value: String) throws(ICEError) -> Bool {
        let candidate: ICECandidate
        do throws(ICECandidate.ParseError) {
            candidate = try ICECandidate.parse(value)
        } catch {
            if error.isUnusable { return false }
            throw .malformedCandidate(error)
        }
        guard candidate.componentID == 1 else { throw .unexpectedComponent(candidate.componentID) }
        guard candidate.transport == .udp || tcpCandidates else { return false }
        try post { $0.addRemoteCandidate(value) }
        return true
    }

    /// The peer's end of candidates (its empty `candidate` signal): from now on, checks that
    /// all fail mean `failed` rather than waiting for more candidates.
    public func endOfRemoteCandidates() throws(ICEError) {
        try post { $0.remoteCandidatesEnded() }
    }

    /// Sends one datagram on the selected pair. Like UDP it may be lost, and before a pair is
    /// selected it is dropped.
    public func send(_ datagram: [UInt8]) throws(ICEError) {
        guard datagram.count <= Self.maxDatagramSize else { throw .datagramTooLarge(datagram.count) }
        try post { $0.send(datagram) }
    }

    /// Stops checks and timers, releases TURN allocations, frees the agent and ends the thread.
    /// Blocks for that long: nothing without TURN, one round trip to each TURN server with it,
    /// about 1.4 s at most if a TURN server stopped answering. Idempotent.
    public func close() {
        if thread.isCurrent { slot.session?.silence() }
        let slot = slot
        guard thread.close({ finished in
            guard let session = slot.session else { return finished() }
            slot.session = nil
            session.teardown(finished)
        }) else { return }
        thread.join()
    }

    private func post(_ job: @escaping @Sendable (NiceSession) -> Void) throws(ICEError) {
        let slot = slot
        guard thread.post({ if let session = slot.session { job(session) } }) else { throw .closed }
    }
}
