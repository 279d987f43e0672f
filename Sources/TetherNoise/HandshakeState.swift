public import TetherCrypto

/// Which side of the handshake this is.
public enum NoiseRole: Sendable, Hashable {
    case initiator
    case responder
}

/// Noise's HandshakeState (§5.3): runs a pattern's messages and, at the end, splits into a
/// `NoiseTransport`.
///
/// Fails closed: after any failure the state is poisoned and every later call throws
/// `NoiseError.poisoned`; no partial payload is ever returned.
public struct HandshakeState: Sendable {
    public static let maxMessageLength = 65_535
    static let dhLength = 32

    public let noiseProtocol: NoiseProtocol
    public let role: NoiseRole
    private var symmetric: SymmetricState
    private let localStatic: X25519.PrivateKey?
    private var localEphemeral: X25519.PrivateKey?
    public private(set) var remoteStaticKey: X25519.PublicKey?
    public private(set) var remoteEphemeralKey: X25519.PublicKey?
    private var messageIndex = 0
    private var poisoned = false
    private var transport: NoiseTransport?

    /// A handshake with fresh ephemeral keys.
    ///
    /// - Parameters:
    ///   - staticKey: this side's static key, if the pattern uses one.
    ///   - remoteStaticKey: the peer's static key, if this side knows it beforehand (pre-message).
    public init(_ noiseProtocol: NoiseProtocol, role: NoiseRole, prologue: [UInt8] = [],
                staticKey: X25519.PrivateKey? = nil, remoteStaticKey: X25519.PublicKey? = nil) throws(NoiseError) {
        try self.init(noiseProtocol, role: role, prologue: prologue, staticKey: staticKey,
                      remoteStaticKey: remoteStaticKey, ephemeralKey: nil)
    }

    /// A handshake whose ephemeral key is fixed, so test vectors are reproducible. Reusing an
    /// ephemeral key destroys Noise's security; this initializer exists only for tests and is
    /// reachable only through `@_spi(NoiseTesting) import TetherNoise`.
    @_spi(NoiseTesting)
    public init(testingWithFixedEphemeralKey ephemeralKey: X25519.PrivateKey, _ noiseProtocol: NoiseProtocol, role: NoiseRole,
                prologue: [UInt8] = [], staticKey: X25519.PrivateKey? = nil, remoteStaticKey: X25519.PublicKey? = nil) throws(NoiseError) {
        try self.init(noiseProtocol, role: role, prologue: prologue, staticKey: staticKey,
                      remoteStaticKey: remoteStaticKey, ephemeralKey: ephemeralKey)
    }

    private init(_ noiseProtocol: NoiseProtocol, role: NoiseRole, prologue: [UInt8], staticKey: X25519.PrivateKey?,
                 remoteStaticKey: X25519.PublicKey?, ephemeralKey: X25519.PrivateKey?) throws(NoiseError) {
        let pattern = noiseProtocol.pattern
        let localPre = role == .initiator ? pattern.initiatorPreMessage : pattern.responderPreMessage
        let remotePre = role == .initiator ? pattern.responderPreMessage : pattern.initiatorPreMessage
        let needsStatic = role == .initiator ? pattern.initiatorNeedsStatic : pattern.responderNeedsStatic
        guard !needsStatic || staticKey != nil else { throw .missingKey("s (local static key)") }
        guard !remotePre.contains(.s) || remoteStaticKey != nil else { throw .missingKey("rs (remote static key)") }
        // Pre-message ephemerals exist only in fallback patterns, which are not supported.
        guard !localPre.contains(.e), !remotePre.contains(.e) else { throw .unsupportedProtocol(noiseProtocol.name) }

        self.noiseProtocol = noiseProtocol
        self.role = role
        localStatic = staticKey
        localEphemeral = ephemeralKey
        self.remoteStaticKey = remotePre.contains(.s) ? remoteStaticKey : nil
        symmetric = SymmetricState(protocol: noiseProtocol)
        symmetric.mixHash(prologue)
        // Pre-messages: the initiator's keys first, then the responder's.
        let initiatorStatic = role == .initiator ? staticKey?.publicKey : remoteStaticKey
        let responderStatic = role == .responder ? staticKey?.publicKey : remoteStaticKey
        if pattern.initiatorPreMessage.contains(.s), let key = initiatorStatic { symmetric.mixHash(key.rawRepresentation) }
        if pattern.responderPreMessage.contains(.s), let key = responderStatic { symmetric.mixHash(key.rawRepresentation) }
    }

    /// The handshake hash h: after completion, the channel binding both sides share.
    public var handshakeHash: [UInt8] { symmetric.h }

    public var isComplete: Bool { transport != nil }

    /// True when the next message is this side's to write.
    public var isMyTurn: Bool {
        guard messageIndex < noiseProtocol.pattern.messages.count else { return false }
        return (messageIndex % 2 == 0) == (role == .initiator)
    }

    /// The transport channels, once the last handshake message has been written or read.
    public func transportChannel() throws(NoiseError) -> NoiseTransport {
        guard !poisoned else { throw .poisoned }
        guard let transport else { throw .handshakeIncomplete }
        return transport
    }

    /// WriteMessage: the next handshake message carrying `payload`.
    public mutating func writeMessage(payload: [UInt8] = []) throws(NoiseError) -> [UInt8] {
        guard !poisoned else { throw .poisoned }
        guard isMyTurn else { throw .outOfTurn }
        do throws(NoiseError) {
            var message: [UInt8] = []
            for token in noiseProtocol.pattern.messages[messageIndex] {
                switch token {
                case .e:
                    let ephemeral = localEphemeral ?? X25519.PrivateKey()
                    localEphemeral = ephemeral
                    message += ephemeral.publicKey.rawRepresentation
                    symmetric.mixHash(ephemeral.publicKey.rawRepresentation)
                case .s:
                    guard let localStatic else { throw NoiseError.missingKey("s (local static key)") }
                    message += try symmetric.encryptAndHash(localStatic.publicKey.rawRepresentation)
                default:
                    try mixDH(token)
                }
            }
            message += try symmetric.encryptAndHash(payload)
            guard message.count <= Self.maxMessageLength else { throw NoiseError.messageTooLarge(message.count) }
            advance()
            return message
        } catch {
            poisoned = true
            throw error
        }
    }

    /// ReadMessage: consumes the peer's next handshake message and returns its payload.
    public mutating func readMessage(_ message: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard !poisoned else { throw .poisoned }
        guard messageIndex < noiseProtocol.pattern.messages.count, !isMyTurn else { throw .outOfTurn }
        do throws(NoiseError) {
            guard message.count <= Self.maxMessageLength else { throw NoiseError.messageTooLarge(message.count) }
            var offset = 0
            func take(_ count: Int) throws(NoiseError) -> [UInt8] {
                guard message.count - offset >= count else { throw .truncatedMessage }
                defer { offset += count }
                return Array(message[offset..<(offset + count)])
            }
            for token in noiseProtocol.pattern.messages[messageIndex] {
                switch token {
                case .e:
                    let bytes = try take(Self.dhLength)
                    remoteEphemeralKey = try? X25519.PublicKey(rawRepresentation: bytes)
                    symmetric.mixHash(bytes)
                case .s:
                    let sealed = try take(Self.dhLength + (symmetric.hasKey ? CipherState.tagByteCount : 0))
                    let key = try symmetric.decryptAndHash(sealed)
                    remoteStaticKey = try? X25519.PublicKey(rawRepresentation: key)
                default:
                    try mixDH(token)
                }
            }
            let payload = try symmetric.decryptAndHash(Array(message[offset...]))
            advance()
            return payload
        } catch {
            poisoned = true
            throw error
        }
    }

    private mutating func advance() {
        messageIndex += 1
        guard messageIndex == noiseProtocol.pattern.messages.count else { return }
        let (c1, c2) = symmetric.split(cipher: noiseProtocol.cipher)
        let oneWay = noiseProtocol.pattern.isOneWay
        transport = role == .initiator
            ? NoiseTransport(sending: c1, receiving: oneWay ? nil : c2, handshakeHash: symmetric.h, remoteStaticKey: remoteStaticKey)
            : NoiseTransport(sending: oneWay ? nil : c2, receiving: c1, handshakeHash: symmetric.h, remoteStaticKey: remoteStaticKey)
    }

    /// ee, es, se, ss: MixKey(DH(local, remote)), choosing keys by role as §5.3 specifies.
    private mutating func mixDH(_ token: HandshakePattern.Token) throws(NoiseError) {
        let initiator = role == .initiator
        let (local, remote): (X25519.PrivateKey?, X25519.PublicKey?) = switch token {
        case .ee: (localEphemeral, remoteEphemeralKey)
        case .es: initiator ? (localEphemeral, remoteStaticKey) : (localStatic, remoteEphemeralKey)
        case .se: initiator ? (localStatic, remoteEphemeralKey) : (localEphemeral, remoteStaticKey)
        case .ss: (localStatic, remoteStaticKey)
        case .e, .s: (nil, nil)
        }
        guard let local, let remote else { throw .missingKey("key for \(token.rawValue)") }
        do {
            symmetric.mixKey(try local.sharedSecret(with: remote, rejectingZero: true))
        } catch {
            throw .invalidPublicKey
        }
    }
}
