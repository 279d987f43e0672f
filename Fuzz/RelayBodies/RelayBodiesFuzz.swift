// The relay's room endpoints (relay.md §4): the JSON bodies of `/attest`, `/register` and
// `/delete` (and `/attest/challenge`), read and acted on against an in-memory store, with App
// Attest under the harness's test authority (AppAttestFuzz) so seeds can attest and assert.
//
// Input: a settings byte, then up to six requests to one room.
//   [0] bit 0: attestation required; bit 1: the room is established with the harness's
//       Ed25519 verifier (so `/delete` signatures can verify); bit 2: no App Attest verifier
//   request: [path (RoomEndpoints.routes, or another)][flags] body (a field)
//       flags bit 0: the body's `challenge` is live in the store; bit 1: its `registrationToken`
//       is live; bit 2: that token was minted for the harness's attested key; bit 3: the
//       challenges and tickets of earlier requests expire first
// Every answer is JSON saying `ok`, the store never fails here so nothing is a 500, and the
// room's verifier changes only by a 200 `/register` (set) or `/delete` (gone).
import TetherAttest
import TetherCrypto
import TetherRelay
import TetherStore
import TetherSync
import TetherWire
import TetherEncoding

enum RelayBodiesFuzz {
    static let origin = "https://relay.example"
    static let room = RoomName(header: String(repeating: "c", count: 64))!
    static let signingKey = try! Ed25519.PrivateKey(seed: [UInt8](repeating: 7, count: 32))
    static let roomVerifier = Base64.encode(signingKey.publicKey.rawRepresentation)
    static let appAttest = AppAttestVerifier(appID: AppAttestFuzz.appID, environment: .production, root: AppAttestFuzz.root)
    static let start = UInt64(AppAttestFuzz.now) * 1000
    static let paths = RoomEndpoints.routes.sorted() + ["/unknown"]

    static func run(_ data: [UInt8]) {
        var input = FuzzInput(data)
        let settings = input.byte()
        let store = InMemoryRoomStore()
        if settings & 2 != 0 { try! store.setVerifier(roomVerifier, of: room, now: start) }
        let endpoints = RoomEndpoints(origin: origin, attestationRequired: settings & 1 != 0, verifier: settings & 4 == 0 ? appAttest : nil)
        var now = start
        var random: UInt8 = 0
        for _ in 0..<6 where input.remainingCount > 0 {
            let path = paths[Int(input.byte()) % paths.count]
            let flags = input.byte()
            let body = input.field()
            if flags & 8 != 0 { now += RoomEndpoints.ttl + 1 }
            let json = JSONValue.parse(body)
            if flags & 1 != 0, let challenge = json?.string("challenge") {
                try! store.putChallenge(challenge, expiresAt: now + RoomEndpoints.ttl, in: room)
            }
            if flags & 2 != 0, let token = json?.string("registrationToken") {
                let record = flags & 4 == 0 ? RegistrationTokenRecord(expiresAt: now + RoomEndpoints.ttl)
                    : RegistrationTokenRecord(expiresAt: now + RoomEndpoints.ttl, attestKeyID: Base64.encode(AppAttestFuzz.keyID),
                                              attestPublicKey: Base64.encode(AppAttestFuzz.attestedKey.publicKey.x963Representation))
                try! store.putRegistrationToken(token, record, in: room)
            }
            let before = try! store.verifier(of: room)
            let outcome = endpoints.handle(path: path, body: body, room: room, store: store, now: WallInstant(unixMilliseconds: now)) { count in
                random &+= 1
                return [UInt8](repeating: random, count: count)
            }
            let after = try! store.verifier(of: room)
            expect(outcome.status != 500 && outcome.storageFailure == nil, "a store failure from a store that cannot fail")
            guard case let .object(answer)? = JSONValue.parse(Array(outcome.json.utf8)), case let .bool(ok)? = answer["ok"] else {
                finding("an answer that is not a JSON object with ok")
            }
            expect(ok == (outcome.status == 200), "ok disagrees with the status")
            if !ok { expect(answer["error"].map { if case .string = $0 { true } else { false } } == true, "a refusal without its reason") }
            expect(!outcome.tearDown || (path == "/delete" && ok && after == nil), "a teardown that is not a deleted room")
            if path == "/register", ok {
                expect(before == nil && after == json?.string("verifier"), "a registration that did not store its verifier")
            } else if !(path == "/delete" && ok) {
                expect(after == before, "the verifier changed without a registration or deletion")
            }
        }
    }

    // MARK: Seeds

    static func request(_ path: String, flags: UInt8 = 0, _ body: String) -> [UInt8] {
        [UInt8(paths.firstIndex(of: path) ?? paths.count - 1), flags] + field(body)
    }

    static var seeds: [String: [UInt8]] {
        let challenge = Base64.encode([UInt8](repeating: 0xC4, count: 32))
        let clientDataHash = AttestClientData.hash(challenge: try! Base64.decodeForgiving(challenge), origin: origin)
        let attestation = AppAttestFuzz.attestation(authData: AppAttestFuzz.authData(), clientDataHash: clientDataHash)
        let assertion = AppAttestFuzz.assertion(authenticatorData: Array(AppAttestFuzz.authData(counter: 1).prefix(37)), clientDataHash: clientDataHash)
        let newVerifier = Base64.encode([UInt8](repeating: 0x3B, count: 32))
        let deletion = Base64.encode(signingKey.signature(for: DeleteTranscript(challenge: try! Base64.decodeForgiving(challenge), room: room, origin: origin).bytes))
        return [
            "challenge": [0x01] + request("/attest/challenge", ""),
            "attest": [0x01] + request("/attest/challenge", "")
                + request("/attest", flags: 1, #"{"challenge":"\#(challenge)","attestationObject":"\#(Base64.encode(attestation))"}"#),
            "attest-stale": [0x01] + request("/attest", flags: 9, #"{"challenge":"\#(challenge)","attestationObject":"AA=="}"#),
            "register": [0x00] + request("/register", flags: 2, #"{"verifier":"\#(newVerifier)","registrationToken":"tok"}"#),
            "register-attested": [0x01] + request("/register", flags: 7,
                #"{"verifier":"\#(newVerifier)","registrationToken":"tok","challenge":"\#(challenge)","assertion":"\#(Base64.encode(assertion))"}"#),
            "register-twice": [0x00] + request("/register", flags: 2, #"{"verifier":"\#(newVerifier)","registrationToken":"a"}"#)
                + request("/register", flags: 2, #"{"verifier":"\#(newVerifier)","registrationToken":"b"}"#),
            "delete": [0x02] + request("/delete", flags: 1, #"{"challenge":"\#(challenge)","signature":"\#(deletion)"}"#),
            "delete-unsigned": [0x02] + request("/delete", flags: 1, #"{"challenge":"\#(challenge)"}"#),
            "bad-json": [0x01] + request("/attest", #"{"challenge":"#) + request("/register", "[]") + request("/delete", "null"),
            "unknown": [0x00] + request("/unknown", "{}"),
        ]
    }
}
