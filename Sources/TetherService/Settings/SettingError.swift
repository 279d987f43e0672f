/// A setting that stops start-up, named so the operator can fix it: `RELAY_PORT: not a port
/// number: 70000`. `variable` is what the operator wrote — the environment name that supplied the
/// value (a fallback such as `PORT` when that was the one set), or the flag or argument at fault.
public struct SettingError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The name the operator wrote: an environment name, a flag or an argument.
    public let variable: String
    /// What is wrong with its value.
    public let message: String

    /// An error naming `variable`, saying `message`.
    public init(variable: String, message: String) {
        self.variable = variable
        self.message = message
    }

    public var description: String { "\(variable): \(message)" }
}

/// What a setting's parse function throws: the message alone. The table adds the name of
/// whichever variable supplied the text, which the parser cannot know.
public struct InvalidSettingValue: Error, Equatable, Sendable {
    /// What is wrong (`not a port number: x`).
    public let message: String

    /// A parse error saying `message`.
    public init(_ message: String) { self.message = message }
}
