import TetherWire

/// What a connection's machine asks its host to do, in order (signaling.md §6). The directory,
/// the cluster and the issuer are shared and answer from outside the loop's one connection, so
/// asking them is an action and their answer comes back to the machine as an event.
enum SignalSocketAction: Equatable {
    /// Send one message as a text frame.
    case send(SignalingServerMessage)
    /// Close the WebSocket. `discardingUnsentOutput` drops the frames the client has not begun
    /// to receive, so a connection that stopped reading gets the close frame after whole frames.
    case close(code: UInt16, reason: String, discardingUnsentOutput: Bool)
    case count(SignalSocketMetric)
    /// A line for the verbose log; never an ID, an IP or a secret (§6.5).
    case diagnostic(String)

    // MARK: Registration (§6.1); answers: `reserved`, `claimed`, `issued`, `markedRoutable`

    /// Reserve the ID in this node's directory for this connection (step 5, 6).
    case reserve(SignalingID)
    /// Claim the ID in the registry the nodes share (step 5 across nodes).
    case claim(SignalingID)
    /// Start the credential issuance under the process's limits (step 7).
    case issue(SignalingID)
    /// The issuance in flight is no longer wanted; its completion, if it comes, is discarded.
    case abandonIssuance
    /// Make the reserved ID routable (step 8); `issued` is what `registered` will carry.
    case markRoutable(SignalingID, Issued)
    /// Remove the ID's reservation and presence, here and in the shared registry (step 4).
    case release(SignalingID)

    // MARK: Forwarding (§6.2); answers: `recipientLookedUp`, `recipientOffline`

    /// Look the recipient up in this node's directory.
    case lookUpRecipient(SignalMessage)
    /// Hand the signal to the recipient the lookup found, unchanged and in the sender's order.
    case forward(SignalMessage)
    /// Send the signal to the node holding its recipient; an `offline` may come back.
    case forwardToNode(SignalMessage)

    // MARK: Presence (§6.3); answers: `presenceLookedUp`, `presenceAnswered`

    /// Read which of the IDs are routable on this node.
    case lookUpPresence([SignalingID])
    /// Ask the other nodes about the IDs this node does not hold; `local` stands if they
    /// cannot be asked.
    case askNodes([SignalingID], local: [Bool], asker: SignalingID)
}

/// The aggregate counters a connection moves (§6.5): codes, kinds and outcomes, never an ID.
enum SignalSocketMetric: Equatable {
    /// An `error` sent (`signal_errors_total`).
    case error(SignalingErrorCode)
    /// A signal's outcome by kind (`signal_signals_total`); nil kind: it carried no valid one.
    case signal(SignalKind?, SignalOutcome)
    /// An ID became routable (`signal_registrations_total`).
    case registration
    /// A well-formed presence query within its rate (`signal_presence_queries_total`).
    case presenceQuery
}

/// What became of a `signal` (§6.2), as `signal_signals_total` labels it.
enum SignalOutcome: String, Equatable, CaseIterable {
    case forwarded
    /// Handed to the cluster: another node may hold the recipient.
    case toNode = "to_node"
    case offline
    case badMessage = "bad_message"
    case badSignature = "bad_signature"
    case rateLimited = "rate_limited"
}
