import TetherWire

/// A chat message's id (signaling.md §9.5): a UUID in lowercase canonical 8-4-4-4-12 form, the
/// form call ids have, so `CallUUID` decides what is canonical.
public struct MessageID: Hashable, Sendable, CustomStringConvertible {
    /// The lowercase canonical text, as it goes on the wire.
    public let text: String

    /// Exactly the lowercase canonical form; nil otherwise.
    public init?(_ text: String) {
        guard CallUUID(text) != nil else { return nil }
        self.text = text
    }

    /// A fresh random version 4 id.
    public static func random() -> MessageID { MessageID(CallUUID.random().text)! }

    /// The canonical text.
    public var description: String { text }
}
