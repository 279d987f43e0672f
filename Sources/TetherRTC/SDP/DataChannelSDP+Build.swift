extension DataChannelSDP {
    /// Tether's offer (RFC 9429 §5.2.1 reduced to one data section): `a=setup:actpass`, so the
    /// answerer picks the DTLS role; trickle ICE, so `candidates` may be empty and arrive later
    /// as `candidate` signals.
    public static func offer(origin: Origin, ice: ICECredentials, fingerprint: CertificateFingerprint, mid: String = defaultMid,
                             sctpPort: UInt16 = defaultSCTPPort, maxMessageSize: UInt64 = advertisedMaxMessageSize,
                             candidates: [ICECandidate] = [], endOfCandidates: Bool = false) -> DataChannelSDP {
        DataChannelSDP(type: .offer, origin: origin, bundled: true, mid: mid, mediaProtocol: .udp, ice: ice, fingerprints: [fingerprint],
                       setup: .actpass, sctpPort: sctpPort, maxMessageSize: maxMessageSize, candidates: candidates,
                       endOfCandidates: endOfCandidates)
    }

    /// Tether's answer to a parsed offer (RFC 9429 §5.3.1): the offer's mid, proto and bundling,
    /// Tether's own ICE credentials, certificate and SCTP parameters. Tether answers `active`
    /// (RFC 8842 lets the answerer choose): its DTLS client then sends the ClientHello as soon
    /// as ICE connects instead of waiting a round trip for the offerer's.
    public static func answer(to offer: DataChannelSDP, origin: Origin, ice: ICECredentials, fingerprint: CertificateFingerprint,
                              sctpPort: UInt16 = defaultSCTPPort, maxMessageSize: UInt64 = advertisedMaxMessageSize,
                              candidates: [ICECandidate] = [], endOfCandidates: Bool = false) -> DataChannelSDP {
        precondition(offer.type == .offer, "an answer answers an offer")
        return DataChannelSDP(type: .answer, origin: origin, bundled: offer.bundled, mid: offer.mid, mediaProtocol: offer.mediaProtocol,
                              ice: ice, fingerprints: [fingerprint], setup: .active, sctpPort: sctpPort, maxMessageSize: maxMessageSize,
                              candidates: candidates, endOfCandidates: endOfCandidates)
    }

    /// A description of this device's: its candidates in their `signalled` form, the m-line port
    /// and `c=` address its default candidate's. Nothing else in it depends on the device: the
    /// `o=` address is always 0.0.0.0, and the ufrag, password, session ID and certificate are
    /// fresh random values per call. So a relay-only description names only the TURN server's
    /// relayed addresses, or 9 and 0.0.0.0 while it has no candidate (Tether trickles them all).
    init(type: DescriptionType, origin: Origin, bundled: Bool, mid: String, mediaProtocol: MediaProtocol, ice: ICECredentials,
         fingerprints: [CertificateFingerprint], setup: Setup, sctpPort: UInt16, maxMessageSize: UInt64, candidates: [ICECandidate],
         endOfCandidates: Bool) {
        let candidates = candidates.map(\.signalled)
        let chosen = Self.defaultCandidate(among: candidates)
        self.init(type: type, origin: origin, bundled: bundled, mid: mid, mediaProtocol: mediaProtocol, port: chosen?.port ?? 9,
                  connectionAddress: chosen?.connectionAddress ?? "0.0.0.0", ice: ice, iceOptions: ["trickle"], iceLite: false,
                  fingerprints: fingerprints, setup: setup, sctpPort: sctpPort, maxMessageSize: maxMessageSize, candidates: candidates,
                  endOfCandidates: endOfCandidates)
    }

    /// The candidate most likely to work for a peer that ignored ICE (RFC 8445 §5.1.4: relayed,
    /// then server reflexive, then host), highest priority first among equals; UDP only, since
    /// the m-line's proto says UDP.
    static func defaultCandidate(among candidates: [ICECandidate]) -> ICECandidate? {
        func rank(_ type: ICECandidate.CandidateType) -> Int {
            switch type {
            case .relay: 3
            case .srflx: 2
            case .prflx: 1
            case .host: 0
            }
        }
        return candidates.filter { $0.transport == .udp && $0.componentID == 1 }
            .max { (rank($0.type), $0.priority) < (rank($1.type), $1.priority) }
    }

    /// The description as SDP (RFC 8866): CRLF after every line, session lines in the order the
    /// RFC fixes, then the one media section.
    public var text: String {
        var lines = ["v=0",
                     "o=\(origin.username) \(origin.sessionID) \(origin.sessionVersion) IN IP4 0.0.0.0",
                     "s=-",
                     "t=0 0"]
        if bundled { lines.append("a=group:BUNDLE \(mid)") }
        if !iceOptions.isEmpty { lines.append("a=ice-options:" + iceOptions.joined(separator: " ")) }
        if iceLite { lines.append("a=ice-lite") }
        lines += ["m=application \(port) \(mediaProtocol.rawValue) webrtc-datachannel",
                  "c=IN \(connectionAddress.contains(":") ? "IP6" : "IP4") \(connectionAddress)",
                  "a=mid:\(mid)",
                  "a=ice-ufrag:\(ice.ufrag)",
                  "a=ice-pwd:\(ice.pwd)"]
        lines += fingerprints.map { "a=fingerprint:\($0.value)" }
        lines += ["a=setup:\(setup.rawValue)",
                  "a=sctp-port:\(sctpPort)",
                  "a=max-message-size:\(maxMessageSize)"]
        lines += candidates.map { "a=" + $0.attributeValue }
        if endOfCandidates { lines.append("a=end-of-candidates") }
        return lines.map { $0 + "\r\n" }.joined()
    }
}
