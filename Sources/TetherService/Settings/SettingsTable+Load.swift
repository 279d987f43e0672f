extension SettingsTable {
    /// Reads `--config ENV-FILE` (through `readFile`, which returns nil for an unreadable file),
    /// puts the file beneath `environment`, and then reads the other flags on top.
    public func load(arguments: [String], environment: [String: String],
                     readFile: (String) -> String?) throws(SettingError) -> SettingValues {
        var arguments = arguments
        var environment = environment
        if let path = try Self.takeConfigPath(&arguments) {
            guard let text = readFile(path) else { throw SettingError(variable: Self.configFlag, message: "cannot read \(path)") }
            environment = EnvironmentFile.parse(text).merging(environment) { _, fromEnvironment in fromEnvironment }
        }
        return try values(environment: environment, arguments: arguments)
    }

    /// Reads `environment` (already merged with any config file) and then `arguments`: each a
    /// switch, or a flag with its value as the next argument or after `=`. Flags win.
    public func values(environment: [String: String], arguments: [String]) throws(SettingError) -> SettingValues {
        var values = SettingValues(texts: environment.filter { !$0.value.isEmpty })
        var it = arguments.makeIterator()
        while let argument = it.next() {
            let (flag, inline) = Self.split(argument)
            if switches.contains(where: { $0.flag == flag }) {
                values.turnOn(flag)
                continue
            }
            guard let entry = entries.first(where: { $0.flags.contains(flag) }) else {
                throw SettingError(variable: argument, message: "unknown option (see --help)")
            }
            guard let value = inline ?? it.next() else {
                // The derived flag's error names the setting; an extra flag's names the flag
                // (`--tls-cert: needs a file path`), since that is what the operator typed.
                if let extra = entry.extraFlags.first(where: { $0.flag == flag }) {
                    throw SettingError(variable: flag, message: "needs \(extra.needs)")
                }
                throw SettingError(variable: entry.name, message: "\(flag) needs a value")
            }
            values.set(entry.name, value)
        }
        return values
    }

    /// Removes `--config FILE` or `--config=FILE` from `arguments`; the last one given wins.
    static func takeConfigPath(_ arguments: inout [String]) throws(SettingError) -> String? {
        var path: String?
        var index = 0
        while index < arguments.count {
            let (flag, inline) = split(arguments[index])
            guard flag == configFlag else {
                index += 1
                continue
            }
            if let inline {
                path = inline
                arguments.remove(at: index)
            } else {
                guard index + 1 < arguments.count else { throw SettingError(variable: configFlag, message: "needs an env-file path") }
                path = arguments[index + 1]
                arguments.removeSubrange(index...(index + 1))
            }
        }
        return path
    }

    /// `--name=value` → (`--name`, `value`); anything else is a flag alone.
    static func split(_ argument: String) -> (String, String?) {
        guard argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") else { return (argument, nil) }
        return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
    }
}
