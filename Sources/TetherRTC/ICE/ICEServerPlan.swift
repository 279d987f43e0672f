import TetherWire

/// What an agent does with the `iceServers` it was given: the one STUN server libnice takes and
/// every TURN server it can reach, checked when the agent is made so a bad list fails the call
/// before any socket exists. URLs libnice cannot use (`ICEServerURL.ParseError.unsupported`) are
/// left out, as a browser leaves them out; malformed ones fail.
struct ICEServerPlan: Sendable {
    struct Relay: Sendable {
        let url: ICEServerURL
        let username: String
        let credential: String
    }

    /// Far more than any issuer sends (Cloudflare: 6 TURN URLs); each is a socket and an allocation.
    static let maxRelays = 16

    let stun: ICEServerURL?
    let relays: [Relay]

    init(_ servers: [ICEServer], relayOnly: Bool) throws(ICEError) {
        var stun: ICEServerURL?
        var relays: [Relay] = []
        for server in servers {
            for text in server.urls {
                let url: ICEServerURL
                do {
                    url = try ICEServerURL.parse(text)
                } catch .unsupported {
                    continue
                } catch {
                    throw .malformedServerURL
                }
                if url.relayTransport == nil {
                    // libnice takes one STUN server; a relayed agent needs none.
                    if stun == nil, !relayOnly { stun = url }
                    continue
                }
                guard let username = server.username, let credential = server.credential, !username.isEmpty, !credential.isEmpty else {
                    throw .missingTURNCredentials
                }
                relays.append(Relay(url: url, username: username, credential: credential))
                guard relays.count <= Self.maxRelays else { throw .tooManyServers }
            }
        }
        if relayOnly, relays.isEmpty { throw .noRelayServer }
        self.stun = stun
        self.relays = relays
    }
}
