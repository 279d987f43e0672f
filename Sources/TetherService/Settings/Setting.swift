/// One typed row of a service's settings table: its documentation (`entry`), its default and
/// how its text becomes a value. A service declares its rows once, as static constants, lists
/// them in its `SettingsTable`, and reads each with `SettingValues.value(of:)`.
///
/// ```swift
/// static let maxRooms = Setting<Int64>("RELAY_MAX_ROOMS", default: 200_000,
///                                      parser: .countOrDefault(200_000), help: "resident rooms (0 = default)")
/// ```
public struct Setting<Value: Sendable>: SettingRow {
    /// Name, flags, default text and help.
    public let entry: SettingEntry
    /// The value when the setting is unset.
    public let defaultValue: Value
    /// Turns the setting's text into its value.
    public let parser: SettingParser<Value>

    /// A setting named `name`, worth `defaultValue` when unset.
    ///
    /// - Parameters:
    ///   - name: the environment variable and config-file key; the flag is derived from it.
    ///   - defaultValue: the value when the setting is unset.
    ///   - defaultText: how the default reads in `--help` and the reference; derived from the
    ///     value when nil (`unset` for nil, `on`/`off` for a Bool).
    ///   - fallbacks: environment names read, in order, when `name` is unset.
    ///   - extraFlags: flags beside the derived one.
    ///   - emptyMeansUnset: false when `NAME=` must reach the parser (and be refused there).
    ///   - parser: turns the text into the value, or says what is wrong with it.
    ///   - help: what the setting does, for `--help` and the reference.
    public init(_ name: String, default defaultValue: Value, defaultText: String? = nil, fallbacks: [String] = [],
                extraFlags: [SettingEntry.ExtraFlag] = [], emptyMeansUnset: Bool = true, parser: SettingParser<Value>, help: String) {
        entry = SettingEntry(name: name, fallbacks: fallbacks, extraFlags: extraFlags,
                             defaultText: defaultText ?? Self.describe(defaultValue), help: help, emptyMeansUnset: emptyMeansUnset)
        self.defaultValue = defaultValue
        self.parser = parser
    }

    /// Throws the error start-up would give for this row's text in `values`.
    public func check(_ values: SettingValues) throws(SettingError) { _ = try values.value(of: self) }

    private static func describe(_ value: Value) -> String {
        if let flag = value as? Bool { return flag ? "on" : "off" }
        if let optional = value as? any OptionalDescribable { return optional.describedOrUnset }
        return String(describing: value)
    }
}

extension Setting where Value == String? {
    /// Free text, unset by default (`APP_ID`, `RELAY_TLS_CERT`).
    public init(_ name: String, defaultText: String? = nil, fallbacks: [String] = [], extraFlags: [SettingEntry.ExtraFlag] = [],
                parser: SettingParser<String?> = .text, help: String) {
        self.init(name, default: nil, defaultText: defaultText, fallbacks: fallbacks, extraFlags: extraFlags, parser: parser, help: help)
    }
}

/// A row of a `SettingsTable`, whatever its value type.
public protocol SettingRow: Sendable {
    /// The row's name, flags, default text and help.
    var entry: SettingEntry { get }
    /// Parses the row's value from `values`, throwing what start-up would.
    func check(_ values: SettingValues) throws(SettingError)
}

private protocol OptionalDescribable {
    var describedOrUnset: String { get }
}

extension Optional: OptionalDescribable {
    fileprivate var describedOrUnset: String { map { String(describing: $0) } ?? "unset" }
}
