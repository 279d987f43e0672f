/// A setting that stops start-up, named so the operator can fix it: `RELAY_PORT: not a port
/// number: 70000`. `variable` is what the operator wrote — the environment name that supplied the
/// value (a fallback such as `PORT` when that was the one set), or the flag or argument at fault.
public struct SettingError: Error, Equatable, Sendable, CustomStringConvertible {
    public let variable: String
    public let message: String

    public init(variable: String, message: String) {
        self.variable = variable
        self.message = message
    }

    public var description: String { "\(variable): \(message)" }
}

/// What a setting's parse function throws: the message alone. The table adds the name of
/// whichever variable supplied the text, which the parser cannot know.
public struct InvalidSettingValue: Error, Equatable, Sendable {
    public let message: String

    public init(_ message: String) { self.message = message }
}
