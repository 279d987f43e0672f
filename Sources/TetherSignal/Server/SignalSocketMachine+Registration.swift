import TetherSync
import TetherCrypto
import TetherEncoding
import TetherWire

/// §6.1 Registration: a `register` in the order of step 2, then the directory's, the registry's
/// and the issuer's answers, each of which may arrive after the connection has gone.
extension SignalSocketMachine {
    /// §6.1 step 2, in order.
    mutating func register(_ fields: [String: JSONValue], now: MonotonicInstant) -> [SignalSocketAction] {
        let challenge: String, sentAt: MonotonicInstant
        switch stage {
        case .pending: return answer(.registrationPending)
        case .registered: return answer(.alreadyRegistered)
        case .closed: return []
        case let .challenged(text, at): (challenge, sentAt) = (text, at)
        }
        guard let message = RegisterMessage.parse(fields) else { return end(.badMessage) }
        guard now.elapsed(since: sentAt) <= Self.challengeLifetime else { return end(.challengeExpired) }
        // Past step 3 the challenge timer stops (§13.1): the stage below has no deadline.
        let transcript = SignalingTranscript.register(challenge: challenge, id: message.id)
        guard let key = try? Ed25519.PublicKey(rawRepresentation: message.id.key),
              key.isValidSignature(message.signature, for: transcript) else { return end(.badSignature) }
        signingKey = key
        stage = .pending(message.id, .reserving)
        return [.reserve(message.id)]
    }

    /// The directory's answer to `.reserve`: refused means another connection here holds the ID,
    /// live or pending, and a registration never replaces it (step 5).
    mutating func reserved(_ granted: Bool, id: SignalingID) -> [SignalSocketAction] {
        guard stage == .pending(id, .reserving) else { return [] }
        guard granted else { return end(.duplicateID) }
        // Across nodes the shared registry has the last word on a duplicate (step 5).
        if configuration.clustered {
            stage = .pending(id, .claiming)
            return [.claim(id)]
        }
        stage = .pending(id, .issuing)
        return [.issue(id)]
    }

    /// The registry's answer to `.claim`: issuance goes on, or the registration ends
    /// `duplicate_id` (another node holds the ID) or `unavailable` (the registry did not answer).
    /// A connection gone meanwhile has already given the claim back (its release follows the
    /// claim on the same lane).
    mutating func claimed(_ claimed: Bool?, id: SignalingID) -> [SignalSocketAction] {
        guard stage == .pending(id, .claiming) else { return [] }
        switch claimed {
        case true?:
            stage = .pending(id, .issuing)
            return [.issue(id)]
        case false?: return end(.duplicateID)
        case nil: return end(.unavailable)
        }
    }

    /// The issuance finished (steps 8–9); a stale completion changes nothing, so it cannot
    /// restore presence [DOC]. Over the process's limits is a failure like any other.
    mutating func issued(_ result: Result<Issued, IssuanceFailure>, id: SignalingID) -> [SignalSocketAction] {
        guard stage == .pending(id, .issuing) else { return [] }
        stage = .pending(id, .issued)
        switch result {
        case let .success(issued):
            return [.markRoutable(id, issued)]
        case let .failure(failure):
            return [.diagnostic("signal: credential issuance failed: \(failure)")] + end(.unavailable)
        }
    }

    /// The directory's answer to `.markRoutable`: from now on the ID is routable and present.
    /// Refused only if the reservation vanished, which no rule allows: `internal`.
    mutating func markedRoutable(_ marked: Bool, id: SignalingID, issued: Issued) -> [SignalSocketAction] {
        guard stage == .pending(id, .issued) else { return [] }
        guard marked else { return end(.internal) }
        stage = .registered(id)
        return [.count(.registration), .send(.registered(id: id, iceServers: issued.iceServers, iceExpiresAt: issued.expiresAt))]
    }
}
