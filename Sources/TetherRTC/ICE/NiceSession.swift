import CNice
import CTetherNice
import Glibc

/// One libnice agent with its one stream and component, confined to the ICE thread: it is made,
/// used and torn down only by jobs on that thread, and libnice calls it back only there (the
/// agent lives on the thread's main context and is only called from it).
final class NiceSession {
    private static let component: guint = 1

    private let agent: OpaquePointer
    private let streamID: guint
    private let context: OpaquePointer
    private let relayOnly: Bool
    private let plan: ICEServerPlan
    private let handler: @Sendable (ICEEvent) -> Void
    /// No event reaches the owner once set: after `failed` (final) and from the start of teardown.
    private var silenced = false
    private var gatheringStarted = false
    private var relayedCandidates = 0

    /// Makes the agent; on failure reports `failed(setupFailed)` and returns nil.
    static func make(context: OpaquePointer, configuration: ICEConfiguration, plan: ICEServerPlan, credentials: ICECredentials,
                     handler: @escaping @Sendable (ICEEvent) -> Void) -> NiceSession? {
        // Regular nomination (RFC 8445 §8.1.1 dropped aggressive nomination), trickle (JSEP),
        // and consent freshness (RFC 7675, which WebRTC peers require and expect answered).
        let options = NICE_AGENT_OPTION_REGULAR_NOMINATION.rawValue | NICE_AGENT_OPTION_ICE_TRICKLE.rawValue
            | NICE_AGENT_OPTION_CONSENT_FRESHNESS.rawValue
        guard let agent = nice_agent_new_full(context, NICE_COMPATIBILITY_RFC5245, NiceAgentOption(rawValue: options)) else {
            handler(.stateChanged(.failed(.setupFailed("agent"))))
            return nil
        }
        let pointer = agent
        func fail(_ what: String) -> NiceSession? {
            g_object_unref(UnsafeMutableRawPointer(pointer))
            handler(.stateChanged(.failed(.setupFailed(what))))
            return nil
        }
        tether_nice_set_boolean(agent, "controlling-mode", configuration.role == .controlling ? 1 : 0)
        // UPnP-IGD would multicast to the LAN for a port mapping: a leak of its own for a
        // relay-only call, and a second path nobody asked for otherwise.
        tether_nice_set_boolean(agent, "upnp", 0)
        tether_nice_set_boolean(agent, "ice-udp", 1)
        tether_nice_set_boolean(agent, "ice-tcp", configuration.tcpCandidates ? 1 : 0)
        if configuration.relayOnly {
            guard tether_nice_has_property(agent, "force-relay") != 0 else { return fail("force-relay") }
            tether_nice_set_boolean(agent, "force-relay", 1)
            guard tether_nice_get_boolean(agent, "force-relay") != 0 else { return fail("force-relay") }
        }
        for text in configuration.localAddresses {
            var address = NiceAddress()
            nice_address_init(&address)
            guard nice_address_set_from_string(&address, text) != 0, nice_agent_add_local_address(agent, &address) != 0 else {
                return fail("local address")
            }
        }
        let stream = nice_agent_add_stream(agent, component)
        guard stream != 0 else { return fail("stream") }
        guard nice_agent_set_local_credentials(agent, stream, credentials.ufrag, credentials.pwd) != 0 else { return fail("local credentials") }
        if let range = configuration.portRange {
            nice_agent_set_port_range(agent, stream, component, guint(range.lowerBound), guint(range.upperBound))
        }
        let session = NiceSession(agent: pointer, streamID: stream, context: context, relayOnly: configuration.relayOnly, plan: plan, handler: handler)
        session.connect()
        return session
    }

    private init(agent: OpaquePointer, streamID: guint, context: OpaquePointer, relayOnly: Bool, plan: ICEServerPlan,
                 handler: @escaping @Sendable (ICEEvent) -> Void) {
        self.agent = agent
        self.streamID = streamID
        self.context = context
        self.relayOnly = relayOnly
        self.plan = plan
        self.handler = handler
    }

    private var niceAgent: OpaquePointer { agent }

    // The signal and receive callbacks get the session unretained: it outlives them, because
    // teardown disconnects and detaches them before the session is dropped.
    private func connect() {
        var handlers = TetherNiceHandlers(
            context: Unmanaged.passUnretained(self).toOpaque(),
            new_candidate: { context, candidate in NiceSession.from(context).newCandidate(candidate!) },
            gathering_done: { context, stream in NiceSession.from(context).gatheringDone(stream) },
            state_changed: { context, stream, _, state in NiceSession.from(context).stateChanged(stream, state) },
            selected_pair: { context, stream, _, local, remote in NiceSession.from(context).selectedPair(stream, local!, remote!) })
        tether_nice_connect(niceAgent, &handlers)
        nice_agent_attach_recv(niceAgent, streamID, Self.component, context, { _, _, _, length, buffer, context in
            guard let buffer else { return }
            let bytes = [UInt8](UnsafeRawBufferPointer(start: buffer, count: Int(length)))
            NiceSession.from(context).emit(.datagram(bytes))
        }, Unmanaged.passUnretained(self).toOpaque())
    }

    private static func from(_ context: UnsafeMutableRawPointer?) -> NiceSession {
        Unmanaged<NiceSession>.fromOpaque(context!).takeUnretainedValue()
    }

    private func emit(_ event: ICEEvent) {
        guard !silenced else { return }
        handler(event)
    }

    private func fail(_ failure: ICEFailure) {
        emit(.stateChanged(.failed(failure)))
        silenced = true
    }

    // MARK: Jobs from the owner

    /// No event after this one returns: for a close from inside the handler.
    func silence() { silenced = true }

    func gather() {
        guard !gatheringStarted, !silenced else { return }
        gatheringStarted = true
        // libnice takes IP addresses only; a name is resolved here, on the ICE thread, where
        // blocking in getaddrinfo delays nobody but this call. One that does not resolve is
        // left out, and relay-only then fails with noRelayCandidate once gathering ends.
        if let stun = plan.stun, let address = Self.resolve(stun.host) {
            tether_nice_set_string(niceAgent, "stun-server", address)
            tether_nice_set_uint(niceAgent, "stun-server-port", guint(stun.port))
        }
        for relay in plan.relays {
            guard let address = Self.resolve(relay.url.host) else { continue }
            let type: NiceRelayType = switch relay.url.relayTransport {
            case .tcp?: NICE_RELAY_TYPE_TURN_TCP
            case .tls?: NICE_RELAY_TYPE_TURN_TLS
            case .udp?, nil: NICE_RELAY_TYPE_TURN_UDP
            }
            guard nice_agent_set_relay_info(niceAgent, streamID, Self.component, address, guint(relay.url.port), relay.username,
                                            relay.credential, type) != 0 else { return fail(.setupFailed("relay server")) }
        }
        guard nice_agent_gather_candidates(niceAgent, streamID) != 0 else { return fail(.setupFailed("gathering")) }
    }

    func setRemoteCredentials(_ credentials: ICECredentials) {
        guard !silenced else { return }
        guard nice_agent_set_remote_credentials(niceAgent, streamID, credentials.ufrag, credentials.pwd) != 0 else {
            return fail(.setupFailed("remote credentials"))
        }
    }

    func addRemoteCandidate(_ value: String) {
        guard !silenced else { return }
        // libnice's parser wants the whole SDP line.
        guard let candidate = nice_agent_parse_remote_candidate_sdp(niceAgent, streamID, "a=" + value) else {
            return fail(.remoteCandidateRefused)
        }
        defer { nice_candidate_free(candidate) }
        let list = g_slist_append(nil, candidate)
        defer { g_slist_free(list) }
        guard nice_agent_set_remote_candidates(niceAgent, streamID, Self.component, list) >= 0 else { return fail(.remoteCandidateRefused) }
    }

    func remoteCandidatesEnded() {
        guard !silenced else { return }
        _ = nice_agent_peer_candidate_gathering_done(niceAgent, streamID)
    }

    /// Before a pair is selected libnice refuses to send; like any datagram, this one is then
    /// lost, and the protocol above (DTLS) retransmits.
    func send(_ bytes: [UInt8]) {
        guard !silenced else { return }
        bytes.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: gchar.self) { _ = nice_agent_send(niceAgent, streamID, Self.component, guint($0.count), $0.baseAddress) }
        }
    }

    /// Silences the session at once; then stops receiving, drops the signal handlers, releases
    /// the TURN allocations (`nice_agent_close_async`) and frees the agent, and calls `finished`.
    func teardown(_ finished: @escaping @Sendable () -> Void) {
        silenced = true
        nice_agent_attach_recv(niceAgent, streamID, Self.component, context, nil, nil)
        tether_nice_disconnect(niceAgent)
        // The deallocating Refresh retransmits on libnice's STUN timers; shortened here so that
        // a TURN server that stopped answering delays the close by about 1.4 s (200 + 400 +
        // 800 ms over UDP; 1 s over TCP), not the ~25 s of the defaults.
        tether_nice_set_uint(niceAgent, "stun-initial-timeout", 200)
        tether_nice_set_uint(niceAgent, "stun-max-retransmissions", 2)
        tether_nice_set_uint(niceAgent, "stun-reliable-timeout", 1000)
        let closing = Unmanaged.passRetained(Closing(agent: agent, finished: finished)).toOpaque()
        nice_agent_close_async(niceAgent, { _, _, data in
            let closing = Unmanaged<Closing>.fromOpaque(data!).takeRetainedValue()
            g_object_unref(UnsafeMutableRawPointer(closing.agent))
            closing.finished()
        }, closing)
    }

    private final class Closing {
        let agent: OpaquePointer
        let finished: @Sendable () -> Void
        init(agent: OpaquePointer, finished: @escaping @Sendable () -> Void) {
            self.agent = agent
            self.finished = finished
        }
    }

    // MARK: libnice's signals

    private func newCandidate(_ candidate: UnsafeMutablePointer<NiceCandidate>) {
        guard candidate.pointee.stream_id == streamID else { return }
        let type = candidate.pointee.type
        // Peer-reflexive local candidates are learnt during checks and never signalled
        // (RFC 8445 §7.2.5.3.1); relay-only offers nothing but relayed ones.
        guard type != NICE_CANDIDATE_TYPE_PEER_REFLEXIVE, !relayOnly || type == NICE_CANDIDATE_TYPE_RELAYED else { return }
        if type == NICE_CANDIDATE_TYPE_RELAYED { relayedCandidates += 1 }
        // Written from libnice's fields, not by nice_agent_generate_local_candidate_sdp: that
        // names a relayed candidate's mapped address (this device as the TURN server sees it)
        // as its related address, which `signalled` withholds.
        emit(.localCandidate(Self.candidate(candidate.pointee).signalled.attributeValue))
    }

    private func gatheringDone(_ stream: guint) {
        guard stream == streamID else { return }
        emit(.gatheringComplete)
        if relayOnly, relayedCandidates == 0 { fail(.noRelayCandidate) }
    }

    private func stateChanged(_ stream: guint, _ state: guint) {
        guard stream == streamID else { return }
        switch NiceComponentState(rawValue: state) {
        case NICE_COMPONENT_STATE_DISCONNECTED: emit(.stateChanged(.disconnected))
        case NICE_COMPONENT_STATE_GATHERING: emit(.stateChanged(.gathering))
        case NICE_COMPONENT_STATE_CONNECTING: emit(.stateChanged(.connecting))
        case NICE_COMPONENT_STATE_CONNECTED: emit(.stateChanged(.connected))
        case NICE_COMPONENT_STATE_READY: emit(.stateChanged(.ready))
        case NICE_COMPONENT_STATE_FAILED: fail(.connectivityChecksFailed)
        default: break
        }
    }

    private func selectedPair(_ stream: guint, _ local: UnsafeMutablePointer<NiceCandidate>, _ remote: UnsafeMutablePointer<NiceCandidate>) {
        guard stream == streamID else { return }
        emit(.selectedPair(local: Self.candidate(local.pointee), remote: Self.candidate(remote.pointee)))
    }

    // MARK: Conversions

    static func candidate(_ nice: NiceCandidate) -> ICECandidate {
        let type: ICECandidate.CandidateType = switch nice.type {
        case NICE_CANDIDATE_TYPE_SERVER_REFLEXIVE: .srflx
        case NICE_CANDIDATE_TYPE_PEER_REFLEXIVE: .prflx
        case NICE_CANDIDATE_TYPE_RELAYED: .relay
        default: .host
        }
        let transport: ICECandidate.Transport
        let tcpType: ICECandidate.TCPType?
        switch nice.transport {
        case NICE_CANDIDATE_TRANSPORT_TCP_ACTIVE: (transport, tcpType) = (.tcp, .active)
        case NICE_CANDIDATE_TRANSPORT_TCP_PASSIVE: (transport, tcpType) = (.tcp, .passive)
        case NICE_CANDIDATE_TRANSPORT_TCP_SO: (transport, tcpType) = (.tcp, .so)
        default: (transport, tcpType) = (.udp, nil)
        }
        var address = nice.addr, base = nice.base_addr
        let foundation = withUnsafeBytes(of: nice.foundation) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let hasBase = type != .host && nice_address_is_valid(&base) != 0
        // An active TCP candidate has no port of its own (libnice leaves 0); RFC 6544 §4.5 writes 9.
        let port = UInt16(truncatingIfNeeded: nice_address_get_port(&address))
        return ICECandidate(foundation: foundation, componentID: Int(nice.component_id), transport: transport, priority: nice.priority,
                            connectionAddress: string(&address), port: port == 0 ? 9 : port, type: type,
                            relatedAddress: hasBase ? string(&base) : nil,
                            relatedPort: hasBase ? UInt16(truncatingIfNeeded: nice_address_get_port(&base)) : nil, tcpType: tcpType)
    }

    private static func string(_ address: UnsafeMutablePointer<NiceAddress>) -> String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        nice_address_to_string(address, &buffer)
        return text(buffer)
    }

    private static func text(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The first address `host` resolves to (IPv4 first: loopback and most TURN deployments), as
    /// a literal; nil when it does not resolve.
    static func resolve(_ host: String) -> String? {
        if IPLiteral.isValid(host) { return host }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_DGRAM.rawValue)
        hints.ai_flags = AI_ADDRCONFIG
        var results: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &results) == 0, let results else { return nil }
        defer { freeaddrinfo(results) }
        var found: [Int32: String] = [:]
        var entry: UnsafeMutablePointer<addrinfo>? = results
        while let item = entry {
            var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
            let family = item.pointee.ai_family
            if found[family] == nil, let address = item.pointee.ai_addr {
                let ok: Bool = switch family {
                case AF_INET: address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { inet_ntop(AF_INET, &$0.pointee.sin_addr, &text, socklen_t(text.count)) != nil }
                case AF_INET6: address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { inet_ntop(AF_INET6, &$0.pointee.sin6_addr, &text, socklen_t(text.count)) != nil }
                default: false
                }
                if ok { found[family] = self.text(text) }
            }
            entry = item.pointee.ai_next
        }
        return found[AF_INET] ?? found[AF_INET6]
    }
}
