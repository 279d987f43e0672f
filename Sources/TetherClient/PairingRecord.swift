public import Foundation
public import TetherCrypto
public import TetherWire
public import TetherEncoding
public import TetherDevice

/// What a paired device keeps between runs, beside its Noise static key. The names follow the
/// shipping phone's keychain accounts (client.md §2.6): `paired-code`, `relay-room-secret`,
/// `relay-registered-room`; the Mac's record is `mac-pairing`.
public enum PairingRecord {
    static let phoneCode = "paired-code"
    static let macPairing = "mac-pairing"
    static let roomSecret = "relay-room-secret"
    static let registeredRoom = "relay-registered-room"
    static let shardMapFloor = "shardmap-version-floor"

    /// Which side of a pairing a state directory holds.
    public enum Role: String, Sendable {
        /// The computer: it showed the pairing link and typed the phone's code.
        case mac
        /// The phone: it opened the link and showed the code.
        case phone
    }
}

/// The Mac's side of a pairing: the room (its own key, the pid), the relay it lives on, and the
/// phone static key pinned at confirmation.
public struct MacPairing: Sendable, Equatable {
    /// Where the room lives: a relay origin, or a resolver's shard map.
    public let transport: PairingLink.Transport
    /// The pairing id the link carried; with the Mac's static key it names the room.
    public let pairingID: String
    /// The phone's static key, pinned when the code was confirmed: no other phone completes a
    /// handshake.
    public let phoneStaticKey: X25519.PublicKey

    /// A pairing as the Mac stores it once the phone's code was confirmed.
    public init(transport: PairingLink.Transport, pairingID: String, phoneStaticKey: X25519.PublicKey) {
        self.transport = transport
        self.pairingID = pairingID
        self.phoneStaticKey = phoneStaticKey
    }
}

extension PairingLink.Transport {
    fileprivate var fields: [String: String] {
        switch self {
        case let .direct(origin): origin.map { ["relayOrigin": $0] } ?? [:]
        case let .resolved(url): ["resolverURL": url]
        }
    }

    fileprivate init(fields: [String: Any]) {
        if let resolver = fields["resolverURL"] as? String {
            self = .resolved(resolverURL: resolver)
        } else {
            self = .direct(relayOrigin: fields["relayOrigin"] as? String)
        }
    }
}

extension StateDirectory {
    /// Which role this directory was paired as, if any.
    public var pairedRole: PairingRecord.Role? {
        if read(PairingRecord.macPairing) != nil { return .mac }
        if read(PairingRecord.phoneCode) != nil { return .phone }
        return nil
    }

    // MARK: Mac

    /// The Mac's stored pairing, nil when there is none; throws when the record is unreadable.
    public func macPairing() throws(Failure) -> MacPairing? {
        guard let bytes = read(PairingRecord.macPairing) else { return nil }
        guard let fields = Self.object(bytes), let pid = fields["pairingID"] as? String, !pid.isEmpty,
              let keyText = fields["phoneStaticPublicKey"] as? String,
              let key = (try? Base64.decode(keyText)).flatMap({ try? X25519.PublicKey(rawRepresentation: $0) }) else {
            throw .corrupt(PairingRecord.macPairing)
        }
        return MacPairing(transport: PairingLink.Transport(fields: fields), pairingID: pid, phoneStaticKey: key)
    }

    /// Stores the Mac's pairing (owner-only, written atomically).
    public func storeMacPairing(_ pairing: MacPairing) throws(Failure) {
        var fields = pairing.transport.fields
        fields["pairingID"] = pairing.pairingID
        fields["phoneStaticPublicKey"] = Base64.encode(pairing.phoneStaticKey.rawRepresentation)
        try write(PairingRecord.macPairing, Self.json(fields))
    }

    // MARK: Phone

    /// The stored pairing link, in the reference's stored form (`responderStaticPublicKey` as
    /// base64, `pairingID`, `relayOrigin`?, `resolverURL`?).
    public func phonePairing() throws(Failure) -> PairingLink? {
        guard let bytes = read(PairingRecord.phoneCode) else { return nil }
        guard let fields = Self.object(bytes), let pid = fields["pairingID"] as? String,
              let keyText = fields["responderStaticPublicKey"] as? String, let key = try? Base64.decode(keyText),
              let link = try? PairingLink(transport: PairingLink.Transport(fields: fields), responderStaticKey: key, pairingID: pid,
                                          allowLoopbackHTTP: true) else {
            throw .corrupt(PairingRecord.phoneCode)
        }
        return link
    }

    /// Stores the phone's pairing link, in the same form ``phonePairing()`` reads.
    public func storePhonePairing(_ link: PairingLink) throws(Failure) {
        var fields = link.transport.fields
        fields["pairingID"] = link.pairingID
        fields["responderStaticPublicKey"] = Base64.encode(link.responderStaticKey)
        try write(PairingRecord.phoneCode, Self.json(fields))
    }

    /// The room this phone has registered its verifier for (so `/register` runs once).
    public var registeredRoom: String? {
        read(PairingRecord.registeredRoom).map { String(decoding: $0, as: UTF8.self) }
    }

    /// Remembers that the phone registered the room's verifier, so `/register` is not repeated.
    public func markRegistered(_ room: RoomName) throws(Failure) {
        try write(PairingRecord.registeredRoom, Array(room.hex.utf8))
    }

    /// The highest shard-map version adopted, per resolver URL (the phone's
    /// `ShardMapVersionFloor.<url>` defaults, client.md §5).
    public var shardMapVersionFloor: RelayResolver.VersionFloor {
        RelayResolver.VersionFloor(load: { [self] url in
            guard let bytes = read(PairingRecord.shardMapFloor), let floors = Self.object(bytes) else { return nil }
            return (floors[url] as? NSNumber)?.intValue
        }, store: { [self] url, version in
            var floors = read(PairingRecord.shardMapFloor).flatMap(Self.object) ?? [:]
            floors[url] = version
            if let data = try? JSONSerialization.data(withJSONObject: floors, options: [.sortedKeys]) {
                try? write(PairingRecord.shardMapFloor, Array(data))
            }
        })
    }

    // MARK: Both

    /// The room secret both devices hold (it signs every join), nil before pairing; throws when the
    /// record is unreadable.
    public func roomSecret() throws(Failure) -> RoomSecret? {
        guard let bytes = read(PairingRecord.roomSecret) else { return nil }
        guard let secret = try? RoomSecret(bytes: bytes) else { throw .corrupt(PairingRecord.roomSecret) }
        return secret
    }

    /// Stores the room secret (owner-only, written atomically).
    public func storeRoomSecret(_ secret: RoomSecret) throws(Failure) {
        try write(PairingRecord.roomSecret, secret.bytes)
    }

    /// Forgets the pairing: room secret first (it is what grants entry to the room), then the
    /// records. The device's static key stays: it is the device's identity, not the pairing's.
    public func wipePairing() {
        // The shard-map floor stays: it guards the resolver URL, whichever pairing uses it.
        for name in [PairingRecord.roomSecret, PairingRecord.registeredRoom, PairingRecord.macPairing, PairingRecord.phoneCode] {
            remove(name)
        }
    }

    private static func object(_ bytes: [UInt8]) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [String: Any]
    }

    private static func json(_ fields: [String: String]) -> [UInt8] {
        Array((try? JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])) ?? Data())
    }
}
