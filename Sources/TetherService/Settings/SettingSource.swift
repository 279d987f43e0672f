/// Where a setting's value came from, lowest precedence first: its default, the config file
/// (`--config ENV-FILE`), the environment, a flag.
public enum SettingSource: Sendable, Equatable, CustomStringConvertible {
    /// Unset everywhere: the setting's default.
    case defaultValue
    /// The config file at this path.
    case file(String)
    /// The process's environment.
    case environment
    /// A command-line flag.
    case flag

    public var description: String {
        switch self {
        case .defaultValue: "default"
        case let .file(path): "file \(path)"
        case .environment: "env"
        case .flag: "flag"
        }
    }
}
