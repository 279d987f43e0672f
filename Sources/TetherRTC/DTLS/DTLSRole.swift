/// Which end of the DTLS handshake an endpoint is. SDP decides it with `a=setup` (RFC 8842 §5):
/// the offerer says `actpass`, the answerer picks `active` or `passive`, and the `active` side
/// opens the handshake as the DTLS client.
public enum DTLSRole: Sendable, Hashable {
    case client
    case server

    /// The role for this side's own negotiated `a=setup` value. `actpass` is an offer, not a
    /// role (the answer resolves it), and `holdconn` opens no connection: both give nil, so an
    /// unresolved setup cannot silently become a role.
    public init?(localSetup value: String) {
        switch value.lowercased() {
        case "active": self = .client
        case "passive": self = .server
        default: return nil
        }
    }
}
