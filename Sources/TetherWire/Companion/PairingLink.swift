import Foundation
import TetherEncoding

/// The pairing link a Mac shows as a QR code (client.md §2):
/// `iterm2://pair?v=…&proto=…&rs=…&pid=…&relay=…` (v1) or `…&resolver=…` (v2).
public struct PairingLink: Sendable, Hashable {
    /// The only Noise protocol a link may name.
    public static let noiseProtocol = "Noise_XK_25519_ChaChaPoly_BLAKE2s"

    /// How the phone finds the relay.
    public enum Transport: Sendable, Hashable {
        /// v1: a canonical relay origin, or nil for a link without `relay=` ("no transport").
        case direct(relayOrigin: String?)
        /// v2: a canonical shard-map URL.
        case resolved(resolverURL: String)

        public var version: Int {
            switch self {
            case .direct: 1
            case .resolved: 2
            }
        }
    }

    public let transport: Transport
    /// The Mac's X25519 static public key (32 bytes).
    public let responderStaticKey: [UInt8]
    /// The pairing id (the Mac mints 16 lowercase hex characters; any non-empty string parses).
    public let pairingID: String

    /// A link from already-valid parts. The origin or resolver URL is canonicalised; one that
    /// cannot be is refused with the parser's error.
    public init(transport: Transport, responderStaticKey: [UInt8], pairingID: String, allowLoopbackHTTP: Bool = false) throws(PairingLinkError) {
        guard responderStaticKey.count == 32 else { throw .invalidResponderKey }
        guard !pairingID.isEmpty else { throw .missingPairingID }
        switch transport {
        case .direct(nil):
            self.transport = transport
        case let .direct(origin?):
            guard let canonical = RelayOrigin.canonicalize(origin, allowLoopbackHTTP: allowLoopbackHTTP) else { throw .invalidRelay }
            self.transport = .direct(relayOrigin: canonical)
        case let .resolved(url):
            guard let canonical = RelayOrigin.canonicalizeResolver(url, allowLoopbackHTTP: allowLoopbackHTTP) else { throw .invalidResolver }
            self.transport = .resolved(resolverURL: canonical)
        }
        self.responderStaticKey = responderStaticKey
        self.pairingID = pairingID
    }

    /// A fresh pairing id: 8 random bytes as 16 lowercase hex characters.
    public static func makePairingID(randomBytes: [UInt8]) -> String { Hex.encode(randomBytes.prefix(8)) }

    /// The room both devices meet in.
    public var roomName: RoomName { RoomName(responderStaticKey: responderStaticKey, pairingID: pairingID) }

    /// The link text, serialised as `URLComponents` does it (`:` and `/` left unescaped in values).
    public var url: String {
        var components = URLComponents()
        components.scheme = "iterm2"
        components.host = "pair"
        var items = [
            URLQueryItem(name: "v", value: String(transport.version)),
            URLQueryItem(name: "proto", value: Self.noiseProtocol),
            URLQueryItem(name: "rs", value: Base64.encodeURL(responderStaticKey)),
            URLQueryItem(name: "pid", value: pairingID),
        ]
        switch transport {
        case let .direct(origin): if let origin { items.append(URLQueryItem(name: "relay", value: origin)) }
        case let .resolved(url): items.append(URLQueryItem(name: "resolver", value: url))
        }
        components.queryItems = items
        return components.string ?? ""
    }

    /// Parses and validates a link; the first failing rule of client.md §2.2 wins.
    /// `allowLoopbackHTTP` admits `http://` relays and resolvers on loopback hosts only (local
    /// test relays); every other origin must be https.
    public static func parse(_ text: String, allowLoopbackHTTP: Bool = false) throws(PairingLinkError) -> PairingLink {
        guard let components = URLComponents(string: text), components.scheme == "iterm2", components.host == "pair" else {
            throw .malformedURL
        }
        let items = components.queryItems ?? []
        func first(_ name: String) -> String? { items.first { $0.name == name }?.value }

        let version = first("v")
        guard let v = version.flatMap({ Int($0) }), v == 1 || v == 2 else { throw .unsupportedVersion(found: version) }
        let proto = first("proto")
        guard proto == noiseProtocol else { throw .unsupportedProtocol(found: proto) }
        guard let rs = first("rs").flatMap(decodeResponderKey) else { throw .invalidResponderKey }
        guard let pid = first("pid"), !pid.isEmpty else { throw .missingPairingID }

        let transport: Transport
        if v == 2 {
            // A v2 link ignores any relay=.
            guard let resolver = first("resolver"), let canonical = RelayOrigin.canonicalizeResolver(resolver, allowLoopbackHTTP: allowLoopbackHTTP) else {
                throw .invalidResolver
            }
            transport = .resolved(resolverURL: canonical)
        } else if let relay = first("relay") {
            // A v1 link ignores any resolver=.
            guard let canonical = RelayOrigin.canonicalize(relay, allowLoopbackHTTP: allowLoopbackHTTP) else { throw .invalidRelay }
            transport = .direct(relayOrigin: canonical)
        } else {
            transport = .direct(relayOrigin: nil)
        }
        return PairingLink(trusted: transport, rs: rs, pid: pid)
    }

    private init(trusted transport: Transport, rs: [UInt8], pid: String) {
        self.transport = transport
        responderStaticKey = rs
        pairingID = pid
    }

    /// `rs`: base64url mapped back to the standard alphabet, re-padded, strictly decoded, and
    /// exactly 32 bytes. Standard-alphabet input is therefore accepted too.
    private static func decodeResponderKey(_ text: String) -> [UInt8]? {
        var standard = String(text.map { $0 == "-" ? "+" : $0 == "_" ? "/" : $0 })
        while standard.utf8.count % 4 != 0 { standard += "=" }
        guard let bytes = try? Base64.decode(standard), bytes.count == 32 else { return nil }
        return bytes
    }

    /// The revision-11 migration: a v1 link on exactly the official relay, with no resolver,
    /// becomes v2 on the official resolver, keeping `rs` and `pid` (client.md §2.6).
    public func migratedToResolver() -> PairingLink {
        guard case let .direct(origin) = transport, origin == RelayOrigin.officialRelayOrigin else { return self }
        return PairingLink(trusted: .resolved(resolverURL: RelayOrigin.officialResolverURL), rs: responderStaticKey, pid: pairingID)
    }

    /// The host the phone must show before pairing, because it is not the official one
    /// (client.md §2.5), rendered with non-ASCII labels as punycode; nil for official hosts
    /// and for a link without transport.
    public var disclosedHost: String? {
        let (url, official): (String?, String) = switch transport {
        case let .direct(origin): (origin, RelayOrigin.officialRelayHost)
        case let .resolved(resolver): (resolver, RelayOrigin.officialResolverHost)
        }
        guard let url, let components = URLComponents(string: url), let host = components.host else { return nil }
        guard host.lowercased() != official else { return nil }
        return Punycode.displayHost(host) + (components.port.map { ":\($0)" } ?? "")
    }
}

extension PairingLink {
    /// The Noise prologue both ends use (client.md §9.2): UTF-8 "iterm2-companion/v1/pid:" + pid.
    /// The `v1` is a handshake-binding constant, not the link's version: v2 links use it too.
    public static func noisePrologue(pairingID: String) -> [UInt8] { Array("iterm2-companion/v1/pid:\(pairingID)".utf8) }

    public var noisePrologue: [UInt8] { Self.noisePrologue(pairingID: pairingID) }
}
