public import TetherCall
import TetherCrypto

/// What Tether needs from a data-only session description (RFC 8841 with the JSEP subset of RFC
/// 9429 §5): one `m=application … UDP/DTLS/SCTP webrtc-datachannel` section with its ICE
/// credentials and candidates, the DTLS certificate fingerprints and role, and the SCTP port and
/// message size. Built with `offer`/`answer(to:)`, written with `text`, read with `parse`.
/// Pure values: no I/O, and the same inputs always give the same text.
public struct DataChannelSDP: Sendable, Hashable, CustomStringConvertible {
    /// JSEP's description type (RTCSdpType): it decides which `a=setup` values are allowed.
    public enum DescriptionType: String, Sendable, Hashable {
        case offer, answer
    }

    /// The DTLS role attribute of RFC 8842 (RFC 4145's values; `holdconn` is refused).
    public enum Setup: String, Sendable, Hashable {
        case actpass, active, passive
    }

    /// The m-line's proto (RFC 8841). JSEP offers UDP/DTLS/SCTP whatever ICE ends up using,
    /// and accepts TCP/DTLS/SCTP; the pre-RFC `DTLS/SCTP 5000` form is refused (see `parse`).
    public enum MediaProtocol: String, Sendable, Hashable {
        case udp = "UDP/DTLS/SCTP"
        case tcp = "TCP/DTLS/SCTP"
    }

    /// The `o=` line's session identity (RFC 8866 §5.2). JSEP makes its address meaningless
    /// (`IN IP4 0.0.0.0`, so no local address leaks), so only these parts are kept.
    public struct Origin: Sendable, Hashable {
        public var username: String
        public var sessionID: UInt64
        public var sessionVersion: UInt64

        public init(username: String = "-", sessionID: UInt64, sessionVersion: UInt64 = 0) {
            self.username = username
            self.sessionID = sessionID
            self.sessionVersion = sessionVersion
        }

        /// A fresh session: a random sess-id with its top bit clear, as RFC 9429 §5.2.1
        /// recommends so parsers that read it as a signed 64-bit number agree, and version 0.
        public static func random() -> Origin {
            let bytes = SecureRandom.bytes(8)
            let id = bytes.reduce(UInt64(0)) { $0 << 8 | UInt64($1) } & 0x7FFF_FFFF_FFFF_FFFF
            return Origin(sessionID: id)
        }
    }

    /// RFC 8841 §5: the SCTP port when nothing else is chosen; Tether always uses it.
    public static let defaultSCTPPort: UInt16 = 5000
    /// RFC 8841 §6.1: what a peer may send when a description carries no `a=max-message-size`.
    public static let defaultMaxMessageSize: UInt64 = 65536
    /// What Tether advertises. A data-channel message carries one secure-channel frame of at
    /// most 32,785 bytes (signaling.md §9.6), so 64 KiB leaves headroom while bounding what the
    /// peer may make SCTP reassemble; it equals the default, so peers that ignore the attribute
    /// behave the same.
    public static let advertisedMaxMessageSize: UInt64 = 65536
    /// The data section's mid in Tether's offers (libwebrtc's and aiortc's choice too).
    public static let defaultMid = "0"

    public var type: DescriptionType
    public var origin: Origin
    /// Whether `a=group:BUNDLE <mid>` is present. JSEP always bundles; with one section it
    /// changes nothing on the wire but peers expect it in an answer when it was offered.
    public var bundled: Bool
    public var mid: String
    public var mediaProtocol: MediaProtocol
    /// The m-line's port and the `c=` address: the default candidate's, or 9 and 0.0.0.0 when
    /// there is none yet (RFC 9429 §5.2.1; ICE ignores them either way).
    public var port: UInt16
    public var connectionAddress: String
    public var ice: ICECredentials
    /// `a=ice-options` tags (session and media level together); `trickle` in Tether's.
    public var iceOptions: [String]
    /// The peer is an ICE-lite agent (RFC 8839): it never sends checks of its own.
    public var iceLite: Bool
    /// The sha-256 fingerprints (RFC 8122 allows one per certificate); never empty. Other hash
    /// functions' fingerprints are read past, as Tether verifies sha-256 only.
    public var fingerprints: [CertificateFingerprint]
    public var setup: Setup
    public var sctpPort: UInt16
    /// The largest message the description's sender accepts; 0 means no limit (RFC 8841 §6.1).
    public var maxMessageSize: UInt64
    public var candidates: [ICECandidate]
    /// `a=end-of-candidates` (RFC 8840): no more candidates will follow.
    public var endOfCandidates: Bool

    /// The largest message Tether may send to the description's sender; nil when unlimited.
    public var messageSizeLimit: UInt64? { maxMessageSize == 0 ? nil : maxMessageSize }

    /// Whether a trickled candidate (signaling.md §7.1) is for this description's data section:
    /// its mid when it names one (RFC 8840 prefers the mid), else m-line index 0.
    public func isForDataSection(_ candidate: CallCandidate) -> Bool {
        if let sdpMid = candidate.sdpMid { return sdpMid == mid }
        return candidate.sdpMLineIndex == 0
    }

    /// A local candidate as a `candidate` signal for this description's data section.
    public func callCandidate(_ candidate: ICECandidate) -> CallCandidate {
        candidate.callCandidate(sdpMid: mid, sdpMLineIndex: 0)
    }

    /// The end-of-candidates signal for this description's data section (signaling.md §13.1).
    public var endOfCandidatesSignal: CallCandidate { .endOfCandidates(sdpMid: mid, sdpMLineIndex: 0) }

    public var description: String { text }
}
