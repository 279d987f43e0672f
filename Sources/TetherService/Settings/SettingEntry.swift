/// The documented half of a setting: what an operator types to set it and what it means. The
/// same name is the environment variable and the config-file key; the flag is derived from it
/// (`RELAY_MAX_ROOMS` → `--relay-max-rooms`), so the three can never drift apart.
public struct SettingEntry: Sendable, Equatable {
    /// A further flag for the same setting (`--tls-cert` beside `--relay-tls-cert`), with what a
    /// missing value is called in its error (`--tls-cert: needs a file path`).
    public struct ExtraFlag: Sendable, Equatable {
        /// The flag (`--tls-cert`).
        public let flag: String
        /// What its value is called in the error when it is missing (`a file path`).
        public let needs: String

        /// A further flag; `needs` names the value it takes.
        public init(_ flag: String, needs: String = "a value") {
            precondition(flag.hasPrefix("--"), "a flag starts with --")
            self.flag = flag
            self.needs = needs
        }
    }

    /// The environment variable and config-file key.
    public let name: String
    /// Environment names read, in order, when `name` is unset (`PORT` for `RELAY_PORT`). They are
    /// not flags: a flag sets `name` itself.
    public let fallbacks: [String]
    /// Flags beside the derived one (`--tls-cert` beside `--relay-tls-cert`).
    public let extraFlags: [ExtraFlag]
    /// The default as the operator reads it (`(required)`, `unset`, `8787`).
    public let defaultText: String
    /// One line, no trailing period needed.
    public let help: String
    /// Whether `NAME=` (empty) means unset, as it does for most settings (an env-file line left
    /// blank). False for a setting whose empty value is a mistake to name (`APNS_TOPIC=` would
    /// otherwise fall back to another app's topic with no word).
    public let emptyMeansUnset: Bool

    /// An entry named `name` (upper case, digits and `_`); the flag is derived from it.
    public init(name: String, fallbacks: [String] = [], extraFlags: [ExtraFlag] = [], defaultText: String, help: String,
                emptyMeansUnset: Bool = true) {
        precondition(!name.isEmpty && name.allSatisfy { $0.isASCII && ($0.isUppercase || $0.isNumber || $0 == "_") },
                     "a setting's name is an environment name: \(name)")
        precondition(!help.contains("\n"), "a setting's help is one line: \(name)")
        self.name = name
        self.fallbacks = fallbacks
        self.extraFlags = extraFlags
        self.defaultText = defaultText
        self.help = help
        self.emptyMeansUnset = emptyMeansUnset
    }

    /// `RELAY_MAX_ROOMS` → `--relay-max-rooms`.
    public var flag: String { Self.flag(for: name) }

    /// Every flag that sets this setting, the derived one first.
    public var flags: [String] { [flag] + extraFlags.map(\.flag) }

    /// The key in a config file (an env-file): the environment name itself.
    public var configKey: String { name }

    /// The flag derived from an environment name.
    public static func flag(for name: String) -> String { "--" + String(name.lowercased().map { $0 == "_" ? "-" : $0 }) }
}

/// A flag-only switch that takes no value (`--local`).
public struct SettingSwitch: Sendable, Hashable {
    /// The flag (`--local`).
    public let flag: String
    /// What it does, for `--help`.
    public let help: String

    /// A switch `flag` (starting `--`) described by `help`.
    public init(_ flag: String, help: String) {
        precondition(flag.hasPrefix("--"), "a flag starts with --")
        self.flag = flag
        self.help = help
    }
}
