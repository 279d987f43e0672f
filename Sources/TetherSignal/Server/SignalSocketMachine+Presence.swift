import TetherSync
import TetherEncoding
import TetherWire

/// §6.3 Presence: a query is answered from the set of routable IDs, asked afresh each time.
extension SignalSocketMachine {
    /// A well-formed query within its rate asks the directory (§5.5, §6.4).
    mutating func presence(_ fields: [String: JSONValue], from id: SignalingID, now: MonotonicInstant) -> [SignalSocketAction] {
        guard let query = PresenceQuery.parse(fields) else { return answer(.badMessage) }
        guard presenceWindow.hit(now: now) else { return answer(.rateLimited) }
        return [.count(.presenceQuery), .lookUpPresence(query.ids)]
    }

    /// This node's answer to `.lookUpPresence`. Across nodes the IDs not held here are asked
    /// of the others, with this answer standing if they cannot be.
    mutating func presenceLookedUp(_ ids: [SignalingID], online: [Bool]) -> [SignalSocketAction] {
        guard case let .registered(id) = stage else { return [] }
        if configuration.clustered { return [.askNodes(ids, local: online, asker: id)] }
        return presenceAnswered(ids, online: online)
    }

    /// The answer, in the order asked; dropped if the connection ended meanwhile.
    func presenceAnswered(_ ids: [SignalingID], online: [Bool]) -> [SignalSocketAction] {
        guard isRoutable else { return [] }
        return [.send(.presence(zip(ids, online).map { (id: $0.0, online: $0.1) }))]
    }
}
