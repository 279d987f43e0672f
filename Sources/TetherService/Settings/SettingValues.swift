/// The text of every setting that was given, merged (env-file < environment < flags), and the
/// switches that were on. Values are parsed when read, so a service reads them in the order its
/// checks should report them.
public struct SettingValues: Sendable, Equatable {
    /// By environment name. Variables set to the empty string are absent (an env-file's `NAME=`
    /// means "not set"); a flag's value is kept as given.
    public private(set) var texts: [String: String]
    /// The flags of the switches that were on.
    public private(set) var switches: Set<String>
    /// Where each given text came from (a name absent here came from the environment).
    public private(set) var sources: [String: SettingSource] = [:]
    /// What start-up should say before it goes on: variables in the environment that look like
    /// this service's settings but are not (a typo is otherwise silently ignored).
    public internal(set) var warnings: [String] = []

    /// Values as given; `SettingsTable.values`/`load` build them from the process's inputs.
    public init(texts: [String: String] = [:], switches: Set<String> = []) {
        self.texts = texts
        self.switches = switches
    }

    /// Whether the switch's flag was given.
    public func isOn(_ toggle: SettingSwitch) -> Bool { switches.contains(toggle.flag) }

    /// The name that supplied the setting (its own, else the first fallback set) and its text.
    public func source(of entry: SettingEntry) -> (name: String, text: String)? {
        for name in [entry.name] + entry.fallbacks {
            if let text = texts[name] { return (name, text) }
        }
        return nil
    }

    /// Where the setting's value comes from: a default unless it (or a fallback) was given.
    public func origin(of entry: SettingEntry) -> SettingSource {
        guard let (name, _) = source(of: entry) else { return .defaultValue }
        return sources[name] ?? .environment
    }

    /// Whether the setting (or a fallback) was given.
    public func isSet(_ setting: some SettingRow) -> Bool { source(of: setting.entry) != nil }

    /// The setting's text, as given (nil when unset).
    public func text(of setting: some SettingRow) -> String? { source(of: setting.entry)?.text }

    /// The parsed value, or the default when unset. An invalid text throws an error naming the
    /// variable that supplied it.
    public func value<Value>(of setting: Setting<Value>) throws(SettingError) -> Value {
        guard let (name, text) = source(of: setting.entry) else { return setting.defaultValue }
        do {
            return try setting.parser.parse(text)
        } catch {
            throw SettingError(variable: name, message: error.message)
        }
    }

    mutating func set(_ name: String, _ text: String, from source: SettingSource = .flag) {
        texts[name] = text
        sources[name] = source
    }

    mutating func mark(_ name: String, from source: SettingSource) { sources[name] = source }
    mutating func turnOn(_ flag: String) { switches.insert(flag) }
}
