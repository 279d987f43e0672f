/// An application payload (signaling.md §9.5), as delivered by and given to a
/// `CallSecureChannel`.
public enum CallPayload: Equatable, Sendable {
    /// A chat message: 1 to 4,000 Unicode scalars, stamped with the sender's UNIX milliseconds.
    case text(id: MessageID, text: String, sentAt: Int64)
    /// The peer received the text with this id (which this side sent).
    case receipt(id: MessageID)
}
