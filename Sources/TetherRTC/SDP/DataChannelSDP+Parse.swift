import TetherWire
import TetherEncoding

extension DataChannelSDP {
    /// The largest description read: the whole signal body is at most 32,768 bytes
    /// (signaling.md §13.1), so no genuine description is larger.
    public static let maxBytes = 32768
    /// The most lines read: a data section has about a dozen besides its candidates, and a
    /// peer with many interfaces and TURN servers lists a few dozen of those.
    public static let maxLines = 256

    /// Reads a description strictly: RFC 8866's line order for the session part, exactly one
    /// data section, every attribute Tether relies on present and well formed, `a=setup`
    /// allowed for `type`. Unknown attributes are ignored; ICE, fingerprint and setup attributes
    /// count at session level unless the section has its own (RFC 8839, RFC 8122, RFC 8842).
    /// Candidates Tether cannot use (hostnames such as mDNS names, other transports, other
    /// components) are skipped; malformed ones are refused. The pre-RFC 8841 form
    /// `m=application 9 DTLS/SCTP 5000` with `a=sctpmap` is refused: the stacks Tether meets
    /// (libwebrtc, Firefox, Safari, aiortc) send the RFC form.
    public static func parse(_ text: String, as type: DescriptionType) throws(ParseError) -> DataChannelSDP {
        var reader = DescriptionReader(type: type)
        for line in try SDPLine.split(text, maxBytes: maxBytes, maxLines: maxLines) { try reader.read(line) }
        return try reader.finish()
    }

    /// Reads the answer to `offer` (Tether's own): as `parse(_:as: .answer)`, and it must answer
    /// the offer's data section.
    public static func parseAnswer(_ text: String, to offer: DataChannelSDP) throws(ParseError) -> DataChannelSDP {
        let answer = try parse(text, as: .answer)
        guard answer.mid == offer.mid else { throw ParseError(line: 0, .midMismatch) }
        return answer
    }
}

/// The attributes ICE, DTLS and trickle ICE allow at either level, as read at one of them.
private struct LevelAttributes {
    var ufrag: String?
    var pwd: String?
    var iceOptions: [String] = []
    var fingerprints: [CertificateFingerprint] = []
    /// The line of the first fingerprint of any hash function, to tell "none" from "no sha-256".
    var fingerprintLine: Int?
    var setup: DataChannelSDP.Setup?
    var connectionAddress: String?
}

/// The state of one pass over the lines.
private struct DescriptionReader {
    typealias ParseError = DataChannelSDP.ParseError

    let type: DataChannelSDP.DescriptionType
    var origin: DataChannelSDP.Origin?
    var sawTime = false
    var lastType: Character = "v"
    var session = LevelAttributes()
    var media = LevelAttributes()
    var mediaLine: Int?
    var port: UInt16 = 0
    var mediaProtocol = DataChannelSDP.MediaProtocol.udp
    var bundle: [Substring]?
    var bundleLine = 0
    var iceLite = false
    var mid: String?
    var sctpPort: UInt16?
    var maxMessageSize: UInt64?
    var candidates: [ICECandidate] = []
    var endOfCandidates = false

    init(type: DataChannelSDP.DescriptionType) { self.type = type }

    /// RFC 8866 §5's order: the session's lines, then each media section's. Letters in the same
    /// rank may alternate (a time description's `t` and `r`).
    private static let sessionRanks: [Character: Int] = ["v": 0, "o": 1, "s": 2, "i": 3, "u": 4, "e": 5, "p": 6, "c": 7, "b": 8,
                                                         "t": 9, "r": 9, "z": 10, "k": 11, "a": 12]
    private static let mediaRanks: [Character: Int] = ["m": 0, "i": 1, "c": 2, "b": 3, "k": 4, "a": 5]
    private static let repeatable: Set<Character> = ["e", "p", "b", "t", "r", "a"]
    private static let known: Set<Character> = Set(sessionRanks.keys).union(mediaRanks.keys)

    mutating func read(_ line: SDPLine) throws(ParseError) {
        let n = line.number
        // The first three lines are fixed: v, o, s (RFC 8866 §5).
        if n <= 3 {
            let expected: Character = ["v", "o", "s"][n - 1]
            guard line.type == expected else { throw ParseError(line: n, .missingLine(String(expected))) }
        }
        guard Self.known.contains(line.type) else { throw ParseError(line: n, .unknownLineType(String(line.type))) }
        try checkOrder(line)
        lastType = line.type
        switch line.type {
        case "v": guard line.value == "0" else { throw ParseError(line: n, .unsupportedVersion) }
        case "o": origin = try Self.origin(line)
        case "t": try readTime(line)
        case "c":
            let address = try Self.connection(line)
            if mediaLine == nil { session.connectionAddress = address } else { media.connectionAddress = address }
        case "m": try readMediaLine(line)
        case "a": try readAttribute(line)
        default: break // s, i, u, e, p, b, r, z, k: nothing Tether uses
        }
    }

    private func checkOrder(_ line: SDPLine) throws(ParseError) {
        let n = line.number
        if line.type == "m" {
            guard mediaLine == nil else { throw ParseError(line: n, .extraMediaSection) }
            guard sawTime else { throw ParseError(line: n, .missingLine("t")) }
            return
        }
        guard n > 1 else { return }
        let ranks = mediaLine == nil ? Self.sessionRanks : Self.mediaRanks
        // Ranks only grow, so a line that may appear once can only repeat right after itself.
        guard let rank = ranks[line.type], rank >= ranks[lastType] ?? 0,
              line.type != lastType || Self.repeatable.contains(line.type),
              line.type != "r" || lastType == "t" || lastType == "r" else {
            throw ParseError(line: n, .outOfOrder(String(line.type)))
        }
    }

    /// `o=<username> <sess-id> <sess-version> IN IP4|IP6 <address>`.
    private static func origin(_ line: SDPLine) throws(ParseError) -> DataChannelSDP.Origin {
        guard let fields = SDPGrammar.fields(line.value), fields.count == 6, SDPGrammar.isVisible(fields[0]),
              let id = SDPGrammar.number(fields[1], maxDigits: 20, as: UInt64.self),
              let version = SDPGrammar.number(fields[2], maxDigits: 20, as: UInt64.self),
              fields[3] == "IN", fields[4] == "IP4" || fields[4] == "IP6", SDPGrammar.isVisible(fields[5]) else {
            throw ParseError(line: line.number, .malformed("o"))
        }
        return DataChannelSDP.Origin(username: String(fields[0]), sessionID: id, sessionVersion: version)
    }

    /// `t=<start-time> <stop-time>`; JSEP writes `0 0`, other values are read past.
    private mutating func readTime(_ line: SDPLine) throws(ParseError) {
        guard let fields = SDPGrammar.fields(line.value), fields.count == 2,
              fields.allSatisfy({ SDPGrammar.number($0, maxDigits: 20, as: UInt64.self) != nil }) else {
            throw ParseError(line: line.number, .malformed("t"))
        }
        sawTime = true
    }

    /// `c=IN IP4 <address>` or `c=IN IP6 <address>` with a unicast literal of that family.
    private static func connection(_ line: SDPLine) throws(ParseError) -> String {
        guard let fields = SDPGrammar.fields(line.value), fields.count == 3, fields[0] == "IN",
              fields[1] == "IP4" || fields[1] == "IP6",
              let candidate = try? ICECandidate.parse("candidate:0 1 udp 1 \(fields[2]) 9 typ host"),
              candidate.isIPv6 == (fields[1] == "IP6") else {
            throw ParseError(line: line.number, .malformed("c"))
        }
        return candidate.connectionAddress
    }

    /// `m=application <port> UDP/DTLS/SCTP webrtc-datachannel` (or TCP/DTLS/SCTP).
    private mutating func readMediaLine(_ line: SDPLine) throws(ParseError) {
        mediaLine = line.number
        guard let fields = SDPGrammar.fields(line.value), fields.count == 4 else { throw ParseError(line: line.number, .malformed("m")) }
        guard fields[0] == "application", let proto = DataChannelSDP.MediaProtocol(rawValue: String(fields[2])),
              fields[3] == "webrtc-datachannel" else {
            throw ParseError(line: line.number, .notDataChannel)
        }
        guard let port = SDPGrammar.port(fields[1]) else { throw ParseError(line: line.number, .malformed("m")) }
        guard port != 0 else { throw ParseError(line: line.number, .rejectedMediaSection) }
        self.port = port
        mediaProtocol = proto
    }

    private mutating func readAttribute(_ line: SDPLine) throws(ParseError) {
        let n = line.number
        let colon = line.value.firstIndex(of: ":")
        let name = String(line.value[..<(colon ?? line.value.endIndex)])
        let value = colon.map { line.value[line.value.index(after: $0)...] }
        let atMedia = mediaLine != nil
        func invalid() -> ParseError { ParseError(line: n, .invalidAttribute(name)) }
        func once<T>(_ slot: T?) throws(ParseError) { if slot != nil { throw ParseError(line: n, .duplicateAttribute(name)) } }
        func required() throws(ParseError) -> Substring {
            guard let value, !value.isEmpty else { throw invalid() }
            return value
        }
        func mediaOnly() throws(ParseError) { if !atMedia { throw ParseError(line: n, .misplacedAttribute(name)) } }
        func sessionOnly() throws(ParseError) { if atMedia { throw ParseError(line: n, .misplacedAttribute(name)) } }

        switch name {
        case "ice-ufrag", "ice-pwd":
            let text = try required()
            let isUfrag = name == "ice-ufrag"
            guard SDPGrammar.isICEString(text, length: isUfrag ? ICECredentials.ufragLength : ICECredentials.pwdLength) else { throw invalid() }
            try once(isUfrag ? level.ufrag : level.pwd)
            if isUfrag { level.ufrag = String(text) } else { level.pwd = String(text) }
        case "ice-options":
            guard let tags = SDPGrammar.fields(try required()), tags.allSatisfy({ SDPGrammar.isICEString($0, length: 1...256) }) else {
                throw invalid()
            }
            level.iceOptions += tags.map(String.init)
        case "ice-lite":
            try sessionOnly()
            guard value == nil else { throw invalid() }
            guard !iceLite else { throw ParseError(line: n, .duplicateAttribute(name)) }
            iceLite = true
        case "fingerprint":
            if let fingerprint = try Self.fingerprint(try required(), line: n) { level.fingerprints.append(fingerprint) }
            if level.fingerprintLine == nil { level.fingerprintLine = n }
        case "setup":
            let text = try required()
            try once(level.setup)
            // RFC 8842 §5: holdconn would hold the association back forever.
            if text.lowercased() == "holdconn" { throw ParseError(line: n, .setupNotAllowed("holdconn")) }
            guard let setup = DataChannelSDP.Setup(rawValue: text.lowercased()) else { throw invalid() }
            let allowed: Set<DataChannelSDP.Setup> = type == .offer ? [.actpass] : [.active, .passive]
            guard allowed.contains(setup) else { throw ParseError(line: n, .setupNotAllowed(setup.rawValue)) }
            level.setup = setup
        case "group":
            try sessionOnly()
            guard let fields = SDPGrammar.fields(try required()), fields.allSatisfy(SDPGrammar.isToken) else { throw invalid() }
            guard fields[0].lowercased() == "bundle" else { return } // other semantics (LS, FID) have nothing to group here
            try once(bundle)
            bundle = Array(fields.dropFirst())
            bundleLine = n
        case "mid":
            try mediaOnly()
            let text = try required()
            guard text.utf8.count <= 32, SDPGrammar.isToken(text) else { throw invalid() }
            try once(mid)
            mid = String(text)
        case "sctp-port":
            try mediaOnly()
            // RFC 8841 §5: no leading zeros; port 0 names no association.
            let text = try required()
            guard text.first != "0", let port = SDPGrammar.port(text) else { throw invalid() }
            try once(sctpPort)
            sctpPort = port
        case "max-message-size":
            try mediaOnly()
            guard let size = SDPGrammar.number(try required(), maxDigits: 20, as: UInt64.self) else { throw invalid() }
            try once(maxMessageSize)
            maxMessageSize = size
        case "candidate":
            try mediaOnly()
            let text = try required()
            do {
                let candidate = try ICECandidate.parse("candidate:" + text)
                // A data section has one component (RFC 8841 runs SCTP over one DTLS over ICE).
                if candidate.componentID == 1 { candidates.append(candidate) }
            } catch {
                guard error.isUnusable else { throw ParseError(line: n, .invalidCandidate(error)) }
            }
        case "end-of-candidates":
            try mediaOnly()
            guard value == nil else { throw invalid() }
            guard !endOfCandidates else { throw ParseError(line: n, .duplicateAttribute(name)) }
            endOfCandidates = true
        default:
            break // unknown attributes are ignored (RFC 8866 §5.13)
        }
    }

    private var level: LevelAttributes {
        get { mediaLine == nil ? session : media }
        set { if mediaLine == nil { session = newValue } else { media = newValue } }
    }

    /// A sha-256 fingerprint, or nil for another hash function's (well formed: a token and
    /// colon-separated hex pairs, RFC 8122 §5).
    private static func fingerprint(_ value: Substring, line: Int) throws(ParseError) -> CertificateFingerprint? {
        do {
            return try CertificateFingerprint.parse(String(value))
        } catch .unsupportedAlgorithm {
            guard let fields = SDPGrammar.fields(value), fields.count == 2, SDPGrammar.isToken(fields[0]),
                  fields[1].split(separator: ":", omittingEmptySubsequences: false)
                  .allSatisfy({ $0.utf8.count == 2 && $0.utf8.allSatisfy { Hex.value(of: $0) != nil } }) else {
                throw ParseError(line: line, .invalidAttribute("fingerprint"))
            }
            return nil
        } catch {
            throw ParseError(line: line, .invalidAttribute("fingerprint"))
        }
    }

    func finish() throws(ParseError) -> DataChannelSDP {
        guard let origin else { throw ParseError(line: 0, .missingLine("o")) }
        guard sawTime else { throw ParseError(line: 0, .missingLine("t")) }
        guard let mediaLine else { throw ParseError(line: 0, .noMediaSection) }
        guard let connectionAddress = media.connectionAddress ?? session.connectionAddress else {
            throw ParseError(line: mediaLine, .missingLine("c"))
        }
        func missing(_ name: String) -> ParseError { ParseError(line: mediaLine, .missingAttribute(name)) }
        guard let mid else { throw missing("mid") }
        if let bundle, bundle != [mid[...]] { throw ParseError(line: bundleLine, .bundleMismatch) }
        guard let ufrag = media.ufrag ?? session.ufrag else { throw missing("ice-ufrag") }
        guard let pwd = media.pwd ?? session.pwd else { throw missing("ice-pwd") }
        // Media-level fingerprints replace session-level ones rather than adding to them.
        let fingerprinted = media.fingerprintLine != nil ? media : session
        guard let fingerprintLine = fingerprinted.fingerprintLine else { throw missing("fingerprint") }
        guard !fingerprinted.fingerprints.isEmpty else { throw ParseError(line: fingerprintLine, .noSHA256Fingerprint) }
        guard let setup = media.setup ?? session.setup else { throw missing("setup") }
        guard let sctpPort else { throw missing("sctp-port") }
        return DataChannelSDP(type: type, origin: origin, bundled: bundle != nil, mid: mid, mediaProtocol: mediaProtocol, port: port,
                              connectionAddress: connectionAddress, ice: ICECredentials(checked: ufrag, pwd: pwd), iceOptions: session.iceOptions + media.iceOptions,
                              iceLite: iceLite, fingerprints: fingerprinted.fingerprints, setup: setup, sctpPort: sctpPort,
                              maxMessageSize: maxMessageSize ?? DataChannelSDP.defaultMaxMessageSize, candidates: candidates,
                              endOfCandidates: endOfCandidates)
    }
}
