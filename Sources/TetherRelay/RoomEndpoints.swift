public import TetherSync
public import TetherAttest
import TetherCrypto
public import TetherStore
public import TetherWire
public import TetherEncoding

/// The room-level HTTP endpoints (relay.md §4) as pure logic over a `RoomStore`: a request body
/// in, a status and JSON body out, plus whether the room must be torn down. Run on the room's
/// store lane, so each request is atomic with respect to the room's other storage work.
public struct RoomEndpoints: Sendable {
    /// An endpoint's answer.
    public struct Outcome: Equatable, Sendable {
        /// The HTTP status.
        public let status: Int
        /// The JSON body.
        public let json: String
        /// `/delete` succeeded: close every socket 1000 `room deleted` (storage is already wiped).
        public let tearDown: Bool
        /// Why App Attest refused, for the verbose log only (zero-PII: no keys, names or IPs).
        public let diagnostic: String?
        /// The store call that failed, when that is the answer's reason.
        public let storageFailure: StoreError?

        init(status: Int, json: String, tearDown: Bool = false, diagnostic: String? = nil, storageFailure: StoreError? = nil) {
            self.status = status
            self.json = json
            self.tearDown = tearDown
            self.diagnostic = diagnostic
            self.storageFailure = storageFailure
        }

        static func ok(_ fields: String = "") -> Outcome { Outcome(status: 200, json: #"{"ok":true\#(fields)}"#) }
        static func error(_ status: Int, _ reason: String, diagnostic: String? = nil) -> Outcome {
            Outcome(status: status, json: AdmissionReply.refused(reason), diagnostic: diagnostic)
        }
        /// The store did not answer: 500 `internal error`; the store's zero-PII text goes to the
        /// log only.
        static func storageFailed(_ failure: StoreError) -> Outcome {
            Outcome(status: 500, json: AdmissionReply.refused("internal error"), diagnostic: failure.message, storageFailure: failure)
        }
    }

    /// The relay's origin, bound into every App Attest client data hash and delete transcript.
    public let origin: String
    /// Whether `/attest` and assertions are required (attestation mode) or refused (open mode).
    public let attestationRequired: Bool
    /// App Attest with the configured app id, environment and root; nil refuses every
    /// attestation and assertion (fail closed).
    public let verifier: AppAttestVerifier?
    /// How long a challenge or a ticket lives, in ms (relay.md §6.3).
    public static let ttl: UInt64 = 300_000
    /// Live challenges a room may hold at once; past that `/attest/challenge` is refused.
    public static let maxLiveChallenges = 16

    /// The endpoints of a relay at `origin`.
    public init(origin: String, attestationRequired: Bool, verifier: AppAttestVerifier? = nil) {
        self.origin = origin
        self.attestationRequired = attestationRequired
        self.verifier = verifier
    }

    /// The paths served; anything else (or another method) is 501 `not implemented`.
    public static let routes: Set<String> = ["/attest/challenge", "/attest", "/register", "/delete"]

    /// A store call that failed answers 500 `internal error` (§2.2 step 9: the reference's answer
    /// to any exception), so nothing is ever reported done that was not stored; what the request
    /// wrote before the failure is only what a retry can take again (a spent challenge, a minted
    /// one), never a verifier.
    public func handle(path: String, body: [UInt8], room: RoomName, store: any RoomStore, now wall: WallInstant,
                       random: (Int) -> [UInt8]) -> Outcome {
        // The store keeps wall time as UNIX milliseconds (its columns).
        let now = wall.unixMilliseconds
        do throws(StoreError) {
            switch path {
            case "/attest/challenge": return try challenge(room: room, store: store, now: now, random: random)
            case "/attest": return try attest(body: body, room: room, store: store, now: now, random: random)
            case "/register": return try register(body: body, room: room, store: store, now: now)
            case "/delete": return try delete(body: body, room: room, store: store, now: now)
            default: return .error(501, "not implemented")
            }
        } catch {
            return .storageFailed(error)
        }
    }

    // MARK: §4.1

    private func challenge(room: RoomName, store: any RoomStore, now: UInt64, random: (Int) -> [UInt8]) throws(StoreError) -> Outcome {
        guard try store.liveChallenges(in: room, now: now) < Self.maxLiveChallenges else {
            return .error(429, "too many outstanding challenges")
        }
        let challenge = Base64.encode(random(32))
        try store.putChallenge(challenge, expiresAt: now + Self.ttl, in: room)
        return .ok(#","challenge":"\#(challenge)""#)
    }

    // MARK: §4.2

    private func attest(body: [UInt8], room: RoomName, store: any RoomStore, now: UInt64, random: (Int) -> [UInt8]) throws(StoreError) -> Outcome {
        guard attestationRequired else { return .error(400, "attestation disabled") }
        guard let json = JSONValue.parse(body) else { return .error(400, "bad json") }
        guard let challenge = json.string("challenge"), let objectText = json.string("attestationObject") else { return .error(400, "missing fields") }
        guard try store.consumeChallenge(challenge, in: room, now: now) else { return .error(403, "bad challenge") }
        guard let verifier else { return .error(403, "attestation rejected", diagnostic: "no App Attest verifier configured") }
        guard let object = try? Base64.decodeForgiving(objectText) else { return .error(403, "attestation rejected", diagnostic: "attestationObject is not base64") }
        let clientDataHash = AttestClientData.hash(challenge: (try? Base64.decodeForgiving(challenge)) ?? [], origin: origin)
        let key: AppAttestVerifier.AttestedKey
        do {
            key = try verifier.verifyAttestation(object, clientDataHash: clientDataHash, atUnixTime: Int64(now / 1000))
        } catch {
            return .error(403, "attestation rejected", diagnostic: error.reason)
        }
        let ticket = Base64.encode(random(24))
        try store.putTicket(ticket, TicketRecord(expiresAt: now + Self.ttl, keyID: Base64.encode(key.keyID), publicKey: Base64.encode(key.publicKey)), in: room)
        return .ok(#","ticket":"\#(ticket)""#)
    }

    // MARK: §4.3

    private func register(body: [UInt8], room: RoomName, store: any RoomStore, now: UInt64) throws(StoreError) -> Outcome {
        guard let json = JSONValue.parse(body) else { return .error(400, "bad json") }
        guard let verifier = json.string("verifier") else { return .error(400, "missing verifier") }
        guard let decoded = try? Base64.decodeForgiving(verifier), decoded.count == 32 else { return .error(400, "bad verifier") }
        guard try store.verifier(of: room) == nil else { return .error(403, "already registered") }
        guard let token = json.string("registrationToken") else { return .error(403, "token required") }
        guard let record = try store.registrationToken(token, in: room, now: now) else { return .error(403, "bad token") }
        if attestationRequired {
            guard record.attestKeyID != nil, record.attestPublicKey != nil else { return .error(403, "token not attested") }
            guard let challenge = json.string("challenge"), let assertionText = json.string("assertion") else { return .error(403, "assertion required") }
            guard try store.consumeChallenge(challenge, in: room, now: now) else { return .error(403, "bad challenge") }
            if let refusal = try checkAssertion(assertionText, challenge: challenge, record: record, room: room, store: store) { return refusal }
        }
        try store.deleteRegistrationToken(token, in: room)
        // Tested again inside the write: of two racing registrations (a shared database, several
        // nodes), one wins and the other is told the room is taken.
        guard try store.setVerifier(verifier, of: room, now: now) else { return .error(403, "already registered") }
        return .ok()
    }

    /// §4.3 step 6.5–6.7: the assertion over the fresh challenge, made with the key pinned at
    /// the ticket admission, and a counter above the last one seen for that key in this room.
    private func checkAssertion(_ text: String, challenge: String, record: RegistrationTokenRecord, room: RoomName, store: any RoomStore) throws(StoreError) -> Outcome? {
        guard let verifier else { return .error(403, "assertion rejected: App Attest is not configured") }
        guard let assertion = try? Base64.decodeForgiving(text) else { return .error(403, "assertion rejected: Invalid character") }
        guard let keyID = record.attestKeyID, let publicKey = record.attestPublicKey.flatMap({ try? Base64.decodeForgiving($0) }) else {
            return .error(403, "token not attested")
        }
        let clientDataHash = AttestClientData.hash(challenge: (try? Base64.decodeForgiving(challenge)) ?? [], origin: origin)
        let counter: UInt32
        do {
            counter = try verifier.verifyAssertion(assertion, clientDataHash: clientDataHash, publicKey: publicKey)
        } catch {
            return .error(403, "assertion rejected: \(error.reason)", diagnostic: error.reason)
        }
        if let last = try store.assertionCounter(for: keyID, in: RoomKey(room)), counter <= last { return .error(403, "stale assertion") }
        try store.setAssertionCounter(counter, for: keyID, in: RoomKey(room))
        return nil
    }

    // MARK: §4.4

    private func delete(body: [UInt8], room: RoomName, store: any RoomStore, now: UInt64) throws(StoreError) -> Outcome {
        guard let json = JSONValue.parse(body) else { return .error(400, "bad json") }
        guard let verifier = try store.verifier(of: room) else { return .error(403, "not established") }
        guard let challenge = json.string("challenge"), let signature = json.string("signature") else {
            return .error(403, "signature required")
        }
        guard try store.consumeChallenge(challenge, in: room, now: now) else { return .error(403, "bad challenge") }
        let transcript = DeleteTranscript(challenge: (try? Base64.decodeForgiving(challenge)) ?? [], room: room, origin: origin)
        guard let key = (try? Base64.decodeForgiving(verifier)).flatMap({ try? Ed25519.PublicKey(rawRepresentation: $0) }),
              let signatureBytes = try? Base64.decodeForgiving(signature),
              key.isValidSignature(signatureBytes, for: transcript.bytes) else { return .error(403, "bad signature") }
        try store.deleteRoom(room)
        return Outcome(status: 200, json: #"{"ok":true}"#, tearDown: true)
    }
}
