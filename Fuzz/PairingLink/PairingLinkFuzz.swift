// The links a person scans, pastes or is sent: the pairing link (client.md §2), with the relay
// origin and resolver URL inside it, and the contact link, signaling endpoint and typed ID of
// signaling.md §3.
//
// Input: a settings byte, then the text.
//   [0] low 3 bits: which reader (pairing link, contact link, signaling endpoint, relay origin,
//       resolver URL, typed ID); bit 3: loopback http/ws allowed (test relays)
//
// Whatever reads must be canonical: its own text reads back to the same value (a pairing link
// is stored and read again when the phone starts).
import TetherWire
import TetherEncoding

enum PairingLinkFuzz {
    static func run(_ data: [UInt8]) {
        var input = FuzzInput(data)
        let settings = input.byte()
        let loopback = settings & 8 != 0
        let bytes = input.rest()
        let text = String(decoding: bytes, as: UTF8.self)
        switch settings & 7 {
        case 0, 6:
            guard let link = try? PairingLink.parse(text, allowLoopbackHTTP: loopback) else { return }
            expect(link.responderStaticKey.count == 32 && !link.pairingID.isEmpty, "a pairing link without its key or id")
            expect((try? PairingLink.parse(link.url, allowLoopbackHTTP: loopback)) == link, "a pairing link did not survive its own URL")
            touch(link.disclosedHost)
            touch(link.migratedToResolver())
            touch(link.roomName.bucket)
            touch(link.noisePrologue)
        case 1, 7:
            guard let link = try? ContactLink.parse(bytes: bytes, allowLoopbackWS: loopback) else { return }
            expect((try? ContactLink.parse(link.url, allowLoopbackWS: loopback)) == link, "a contact link did not survive its own URL")
        case 2:
            guard let endpoint = try? SignalingEndpoint(text, allowLoopbackWS: loopback) else { return }
            expect((try? SignalingEndpoint(endpoint.url, allowLoopbackWS: loopback)) == endpoint, "a signaling endpoint that is not canonical")
        case 3:
            guard let origin = RelayOrigin.canonicalize(text, allowLoopbackHTTP: loopback) else { return }
            expect(RelayOrigin.canonicalize(origin, allowLoopbackHTTP: loopback) == origin, "a relay origin that is not canonical")
            touch(RelayOrigin.host(of: origin))
        case 4:
            guard let url = RelayOrigin.canonicalizeResolver(text, allowLoopbackHTTP: loopback) else { return }
            expect(RelayOrigin.canonicalizeResolver(url, allowLoopbackHTTP: loopback) == url, "a resolver URL that is not canonical")
        default:
            guard let id = try? SignalingID.parse(userInput: text) else { return }
            expect(SignalingID(canonical: id.canonical) == id && (try? SignalingID.parse(userInput: id.display)) == id, "a typed ID that does not read back")
        }
    }
}

extension PairingLinkFuzz {
    /// client.md §2's links (PairingLinkTests), signaling.md §3's contact links, endpoints and
    /// typed IDs (ContactLinkTests, SignalingEndpointTests), in each reader's settings.
    static var seeds: [String: [UInt8]] {
        let rs = Base64.encodeURL([UInt8](repeating: 0x6B, count: 32))
        let id = String(repeating: "AB12", count: 16)
        let texts: [String: (UInt8, String)] = [
            "link-v1": (0, "iterm2://pair?v=1&proto=Noise_XK_25519_ChaChaPoly_BLAKE2s&rs=\(rs)&pid=0123456789abcdef&relay=https://relay.example"),
            "link-v1-official": (0, "iterm2://pair?v=1&proto=Noise_XK_25519_ChaChaPoly_BLAKE2s&rs=\(rs)&pid=p&relay=https://relay.iterm2.com/"),
            "link-v2": (0, "iterm2://pair?v=2&proto=Noise_XK_25519_ChaChaPoly_BLAKE2s&rs=\(rs)&pid=a%20b&resolver=https://b%C3%BCcher.example:8443/shardmap.json"),
            "link-loopback": (8, "iterm2://pair?v=1&proto=Noise_XK_25519_ChaChaPoly_BLAKE2s&rs=\(rs)&pid=x&relay=http://127.0.0.1:8787"),
            "link-no-relay": (0, "iterm2://pair?proto=Noise_XK_25519_ChaChaPoly_BLAKE2s&v=1&pid=x&rs=\(rs)"),
            "contact": (1, "cryptext://contact/v2/\(id)"),
            "contact-relay": (1, "CRYPTEXT://contact/v2/\(id.lowercased())?relay=wss%3A%2F%2Fsignal.example%3A444%2Fsignal"),
            "endpoint": (2, "wss://signal.example/signal"),
            "endpoint-ipv6": (10, "ws://[0:0::1]:8080/signal"),
            "origin": (3, "https://Relay.Example:443/"),
            "resolver": (4, "https://resolver.example/a%2Fb/shardmap.json"),
            "typed-id": (5, " ct2-" + stride(from: 0, to: 64, by: 4).map { i in String(Array(id)[i..<i + 4]) }.joined(separator: "-") + "\n"),
        ]
        return texts.mapValues { [$0.0] + Array($0.1.utf8) }
    }
}
