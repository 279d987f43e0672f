/// Where a setting's value came from, lowest precedence first: its default, the config file
/// (`--config ENV-FILE`), the environment, a flag.
public enum SettingSource: Sendable, Equatable, CustomStringConvertible {
    case defaultValue
    case file(String)
    case environment
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
