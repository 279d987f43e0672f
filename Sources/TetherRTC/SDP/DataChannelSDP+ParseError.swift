extension DataChannelSDP {
    /// Why a description was refused: the line (1-based; 0 when the problem is the description
    /// as a whole, such as its size or a section with nothing to point at) and the problem.
    public struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
        public enum Problem: Equatable, Sendable {
            /// Over `DataChannelSDP.maxBytes` bytes.
            case tooLarge
            /// Over `DataChannelSDP.maxLines` lines.
            case tooManyLines
            /// A control character (NUL, a CR not before LF, DEL, …) in the line.
            case controlCharacter
            /// Not `<letter>=<value>` with a non-empty value (an empty line too).
            case malformedLine
            /// A type letter RFC 8866 does not define, which it says a parser must not skip.
            case unknownLineType(String)
            /// A line type where RFC 8866 §5's order does not allow it, or repeated where it
            /// may appear once.
            case outOfOrder(String)
            /// A line RFC 8866 requires (`v`, `o`, `s`, `t`, `c`) is absent.
            case missingLine(String)
            /// `v=` other than 0.
            case unsupportedVersion
            /// An `o=`, `t=`, `c=` or `m=` line that does not match its grammar (the type letter).
            case malformed(String)
            /// No `m=` line at all.
            case noMediaSection
            /// A second `m=` line: Tether's descriptions carry exactly one.
            case extraMediaSection
            /// The m-line is not `application <port> UDP/DTLS/SCTP webrtc-datachannel` (or
            /// TCP/DTLS/SCTP), e.g. audio, video or the legacy `DTLS/SCTP 5000`.
            case notDataChannel
            /// Port 0 on the m-line: the peer rejected the data channel (RFC 3264 §6).
            case rejectedMediaSection
            /// A media-level attribute at session level, or the reverse.
            case misplacedAttribute(String)
            /// An attribute that may appear once per level, twice.
            case duplicateAttribute(String)
            /// An attribute whose value does not match its grammar (the attribute's name).
            case invalidAttribute(String)
            /// A required attribute (`mid`, `ice-ufrag`, `ice-pwd`, `fingerprint`, `setup`,
            /// `sctp-port`) is absent at both levels.
            case missingAttribute(String)
            /// Fingerprints, but none with sha-256: Tether could not verify the certificate.
            case noSHA256Fingerprint
            /// `a=setup` not allowed for the description's type: an offer says actpass (RFC
            /// 8842), an answer active or passive; `holdconn` never.
            case setupNotAllowed(String)
            /// `a=group:BUNDLE` names other mids than the one section's.
            case bundleMismatch
            /// An answer whose mid is not the offer's.
            case midMismatch
            /// A malformed `a=candidate` (unusable ones, such as mDNS names, are skipped).
            case invalidCandidate(ICECandidate.ParseError)
        }

        public let line: Int
        public let problem: Problem

        public init(line: Int, _ problem: Problem) {
            self.line = line
            self.problem = problem
        }

        public var description: String {
            let what: String
            switch problem {
            case .tooLarge: what = "the description is over \(DataChannelSDP.maxBytes) bytes"
            case .tooManyLines: what = "the description is over \(DataChannelSDP.maxLines) lines"
            case .controlCharacter: what = "control character"
            case .malformedLine: what = "not <type>=<value>"
            case let .unknownLineType(type): what = "unknown line type \(type)"
            case let .outOfOrder(type): what = "\(type)= line out of order"
            case let .missingLine(type): what = "no \(type)= line"
            case .unsupportedVersion: what = "SDP version is not 0"
            case let .malformed(type): what = "malformed \(type)= line"
            case .noMediaSection: what = "no m= section"
            case .extraMediaSection: what = "more than one m= section"
            case .notDataChannel: what = "the m= section is not application UDP/DTLS/SCTP webrtc-datachannel"
            case .rejectedMediaSection: what = "the m= section is rejected (port 0)"
            case let .misplacedAttribute(name): what = "a=\(name) at the wrong level"
            case let .duplicateAttribute(name): what = "a=\(name) repeated"
            case let .invalidAttribute(name): what = "malformed a=\(name)"
            case let .missingAttribute(name): what = "no a=\(name)"
            case .noSHA256Fingerprint: what = "no sha-256 fingerprint"
            case let .setupNotAllowed(value): what = "a=setup:\(value.prefix(16)) is not allowed here"
            case .bundleMismatch: what = "a=group:BUNDLE does not name the one m= section"
            case .midMismatch: what = "the answer's mid is not the offer's"
            case let .invalidCandidate(error): what = error.description
            }
            return line == 0 ? "SDP: \(what)" : "SDP line \(line): \(what)"
        }
    }
}
