public import TetherCrypto
public import TetherNet
import TetherEncoding

/// One certificate issuance over ACME (RFC 8555): directory, nonce, account, order, each
/// authorization's challenge answered through `ACMEChallenges`, finalize with a CSR, and the
/// chain downloaded. Every exchange runs on the network core's client (on `loop`, never blocking
/// it); the flow is sequential, one request at a time, as the protocol's nonces require.
public struct ACMEClient: Sendable {
    /// Why an issuance failed, as one line for the service's log.
    public struct Failure: Error, Equatable, CustomStringConvertible {
        /// The line itself.
        public let message: String
        /// A failure saying `message`.
        public init(_ message: String) { self.message = message }
        public var description: String { message }
    }

    /// The challenge types this client can answer (RFC 8555 §8.3, RFC 8737).
    public enum ChallengeType: String, Sendable, CaseIterable {
        /// A key authorization served over plain HTTP on port 80.
        case http01 = "http-01"
        /// A self-signed certificate served on the service's own TLS port to `acme-tls/1`.
        case tlsALPN01 = "tls-alpn-01"
    }

    /// The ACME server's directory URL.
    public let directoryURL: String
    /// The account key every request is signed with.
    public let accountKey: ACMEAccountKey
    /// TLS settings for reaching the ACME server (nil: the system's trust store).
    public let tls: TLSClientContext?
    /// The loop every exchange runs on.
    public let loop: EventLoop
    /// How long an authorization or an order may stay pending before the issuance gives up.
    public var pollLimit: Duration = .seconds(120)

    /// A client of the ACME server at `directoryURL`, signing as `accountKey`.
    public init(directoryURL: String, accountKey: ACMEAccountKey, tls: TLSClientContext?, loop: EventLoop) {
        self.directoryURL = directoryURL
        self.accountKey = accountKey
        self.tls = tls
        self.loop = loop
    }

    /// Issues a certificate for `domains` (the first is the common name) with `certificateKey`;
    /// returns the PEM chain, leaf first, and the challenges answered (none when the server
    /// still held valid authorizations).
    public func issue(domains: [String], contact email: String?, certificateKey: P256.PrivateKey, challenges: ACMEChallenges,
                      accepting types: [ChallengeType]) async throws(Failure) -> (chain: String, proved: [ChallengeType]) {
        var session = try await Session(client: self)
        let contact = email.map { #","contact":[\#(JSONValue.quoted("mailto:" + $0))]"# } ?? ""
        let account = try await session.post(session.directory.newAccount, #"{"termsOfServiceAgreed":true\#(contact)}"#, signer: .jwk)
        guard let kid = account.headers["Location"] else { throw Failure("the ACME server named no account URL") }
        session.signer = .kid(kid)

        let identifiers = domains.map { #"{"type":"dns","value":\#(JSONValue.quoted($0))}"# }.joined(separator: ",")
        let created = try await session.post(session.directory.newOrder, #"{"identifiers":[\#(identifiers)]}"#)
        guard let orderURL = created.headers["Location"] else { throw Failure("the ACME server named no order URL") }
        let order = try Self.object(created)
        guard case let .array(authorizations)? = order["authorizations"], let finalize = order.string("finalize") else {
            throw Failure("the ACME order has no authorizations or finalize URL")
        }
        var proved: [ChallengeType] = []
        for case let .string(url) in authorizations {
            if let type = try await authorize(url, session: &session, challenges: challenges, accepting: types) { proved.append(type) }
        }

        let csr = try Self.crypto { () throws(CryptoError) in try CertificateSigningRequest.der(dnsNames: domains, key: certificateKey) }
        _ = try await session.post(finalize, #"{"csr":"\#(Base64.encodeURL(csr))"}"#)
        let issued = try await poll(orderURL, session: &session, what: "order") { $0 == "valid" }
        guard let certificateURL = issued.string("certificate") else { throw Failure("the valid ACME order has no certificate URL") }
        let chain = try await session.post(certificateURL, nil, accept: "application/pem-certificate-chain")
        let pem = String(decoding: chain.body, as: UTF8.self)
        guard (try? Certificate.chain(pemRepresentation: pem)) != nil else { throw Failure("the ACME server's certificate is not a PEM chain") }
        return (pem, proved)
    }

    /// Answers one authorization's challenge; returns its type (nil: it was valid already).
    private func authorize(_ url: String, session: inout Session, challenges: ACMEChallenges, accepting types: [ChallengeType]) async throws(Failure) -> ChallengeType? {
        let authorization = try Self.object(try await session.post(url, nil))
        if authorization.string("status") == "valid" { return nil }
        guard case let .object(identifier)? = authorization["identifier"], case let .string(domain)? = identifier["value"],
              case let .array(offered)? = authorization["challenges"] else { throw Failure("malformed ACME authorization") }
        let candidates = offered.compactMap { value -> (ChallengeType, String, String)? in
            guard case let .object(fields) = value, case let .string(name)? = fields["type"], let type = ChallengeType(rawValue: name),
                  case let .string(challengeURL)? = fields["url"], case let .string(token)? = fields["token"] else { return nil }
            return (type, challengeURL, token)
        }
        guard let (type, challengeURL, token) = types.lazy.compactMap({ type in candidates.first { $0.0 == type } }).first else {
            throw Failure("the ACME server offers none of \(types.map(\.rawValue).joined(separator: ", ")) for \(domain)")
        }
        let keyAuthorization = accountKey.keyAuthorization(token: token)
        switch type {
        case .http01: challenges.publish(token: token, keyAuthorization: keyAuthorization)
        case .tlsALPN01: try challenges.publishALPN(domain: domain, keyAuthorization: keyAuthorization)
        }
        defer {
            switch type {
            case .http01: challenges.withdraw(token: token)
            case .tlsALPN01: challenges.withdrawALPN(domain: domain)
            }
        }
        _ = try await session.post(challengeURL, "{}")
        _ = try await poll(url, session: &session, what: "authorization for \(domain) (\(type.rawValue))") { $0 == "valid" }
        return type
    }

    /// POST-as-GET `url` until its status satisfies `done`; "invalid" (or the time limit) fails
    /// with the server's own problem detail, which names what it saw.
    private func poll(_ url: String, session: inout Session, what: String, done: (String) -> Bool) async throws(Failure) -> JSONValue {
        let started = loop.clock.now()
        while true {
            let answer = try await session.post(url, nil)
            let object = try Self.object(answer)
            let status = object.string("status") ?? ""
            if done(status) { return object }
            if status == "invalid" { throw Failure("ACME \(what) is invalid: \(Self.problemDetail(object) ?? "no detail")") }
            guard loop.clock.now().elapsed(since: started) < pollLimit else { throw Failure("ACME \(what) still \(status) after \(pollLimit.components.seconds) s") }
            await session.pause(milliseconds: 500)
        }
    }

    /// The first problem detail an order or authorization carries (its own, or a challenge's).
    static func problemDetail(_ object: JSONValue) -> String? {
        if case let .object(error)? = object["error"], let detail = error["detail"].flatMap({ if case let .string(s) = $0 { s } else { nil } }) {
            return detail
        }
        if case let .array(challenges)? = object["challenges"] {
            for case let .object(challenge) in challenges {
                if case let .object(error)? = challenge["error"], case let .string(detail)? = error["detail"] { return detail }
            }
        }
        return nil
    }

    static func object(_ response: HTTPClient.Response) throws(Failure) -> JSONValue {
        guard let value = JSONValue.parse(response.body), case .object = value else { throw Failure("the ACME server answered \(response.status) with no JSON object") }
        return value
    }

    static func crypto<R>(_ body: () throws(CryptoError) -> R) throws(Failure) -> R {
        do { return try body() } catch { throw Failure("ACME signing: \(error)") }
    }
}

extension JSONValue {
    subscript(key: String) -> JSONValue? {
        if case let .object(fields) = self { fields[key] } else { nil }
    }
}

extension ACMEClient {
    /// The directory's URLs (§7.1.1).
    struct Directory: Sendable {
        let newNonce: String
        let newAccount: String
        let newOrder: String
    }

    /// The directory, a current nonce and who signs: what every request of one issuance shares.
    struct Session {
        let client: ACMEClient
        let directory: Directory
        var nonce: String?
        var signer: ACMEAccountKey.Signer = .jwk

        init(client: ACMEClient) async throws(Failure) {
            self.client = client
            let answer = try await client.exchange("GET", client.directoryURL)
            let object = try ACMEClient.object(answer)
            guard answer.status == 200, let newNonce = object.string("newNonce"), let newAccount = object.string("newAccount"),
                  let newOrder = object.string("newOrder") else { throw Failure("\(client.directoryURL) is not an ACME directory (\(answer.status))") }
            directory = Directory(newNonce: newNonce, newAccount: newAccount, newOrder: newOrder)
        }

        /// A signed POST (`payload` nil: POST-as-GET). A `badNonce` refusal is retried with the
        /// fresh nonce it carries (§6.5), a few times; any other error status fails with the
        /// server's problem document.
        mutating func post(_ url: String, _ payload: String?, signer override: ACMEAccountKey.Signer? = nil,
                           accept: String? = nil) async throws(Failure) -> HTTPClient.Response {
            for _ in 0..<3 {
                if nonce == nil {
                    let fresh = try await client.exchange("HEAD", directory.newNonce)
                    nonce = fresh.headers["Replay-Nonce"]
                    guard nonce != nil else { throw Failure("the ACME server gave no nonce") }
                }
                let body = try ACMEClient.crypto { () throws(CryptoError) in
                    try client.accountKey.signed(payload, url: url, nonce: nonce!, signer: override ?? signer)
                }
                var headers = HTTPHeaders()
                headers.add("Content-Type", "application/jose+json")
                if let accept { headers.add("Accept", accept) }
                let answer = try await client.exchange("POST", url, headers: headers, body: body)
                nonce = answer.headers["Replay-Nonce"]
                if (200..<300).contains(answer.status) { return answer }
                let problem = JSONValue.parse(answer.body)
                if problem?.string("type") == "urn:ietf:params:acme:error:badNonce" { continue }
                throw Failure("ACME \(answer.status) from \(url): \(problem?.string("detail") ?? problem?.string("type") ?? "no problem document")")
            }
            throw Failure("the ACME server refused three nonces in a row")
        }

        func pause(milliseconds: UInt64) async {
            try? await Task.sleep(nanoseconds: milliseconds * 1_000_000)
        }
    }

    /// One HTTPS exchange on the loop, awaited.
    func exchange(_ method: String, _ url: String, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8]? = nil) async throws(Failure) -> HTTPClient.Response {
        let result = await withCheckedContinuation { (done: CheckedContinuation<Result<HTTPClient.Response, NetError>, Never>) in
            HTTPClient.request(method, url, headers: headers, body: body, tls: tls, on: loop, timeout: .seconds(30), maxResponseBody: 1 << 20) {
                done.resume(returning: $0)
            }
        }
        switch result {
        case let .success(response): return response
        case let .failure(error): throw Failure("ACME server unreachable (\(url)): \(error)")
        }
    }
}
