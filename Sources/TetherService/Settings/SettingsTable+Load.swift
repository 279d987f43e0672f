extension SettingsTable {
    /// Reads `--config ENV-FILE` (through `readFile`, which returns nil for an unreadable file),
    /// puts the file beneath `environment`, and then reads the other flags on top.
    ///
    /// A key in the file that is not one of this table's settings stops start-up (a typo there
    /// would otherwise leave its setting at the default, TLS off, say, with no word); a variable
    /// in the environment that carries one of the table's prefixes but names no setting is a
    /// warning (`values.warnings`), since the environment is shared with everything else.
    public func load(arguments: [String], environment: [String: String],
                     readFile: (String) -> String?) throws(SettingError) -> SettingValues {
        var arguments = arguments
        var merged = environment
        var fromFile: (path: String, names: [String])?
        if let path = try Self.takeConfigPath(&arguments) {
            guard let text = readFile(path) else { throw SettingError(variable: Self.configFlag, message: "cannot read the env-file \(path)") }
            let file = EnvironmentFile.parse(text)
            if let unknown = file.keys.sorted().first(where: { !knownNames.contains($0) }) {
                throw SettingError(variable: unknown, message: "not a setting of \(command) (in \(path))"
                                   + SettingSuggestion.hint(for: unknown, in: knownNames) + "; see --help")
            }
            merged = file.merging(environment) { _, fromEnvironment in fromEnvironment }
            fromFile = (path, file.keys.filter { environment[$0] == nil })
        }
        var values = try values(environment: merged, arguments: arguments)
        if let fromFile {
            for name in fromFile.names where values.sources[name] == nil { values.mark(name, from: .file(fromFile.path)) }
        }
        values.warnings = unknownVariables(in: environment)
        return values
    }

    /// `load`, then a service's `build` of its configuration from the values: the configuration
    /// and the start-up notes, the warnings about look-alike variables first. What every
    /// service's `Configuration.load` is.
    public func configuration<Configuration>(arguments: [String], environment: [String: String], readFile: (String) -> String?,
                                             build: (SettingValues) throws(SettingError) -> (Configuration, [String])) throws(SettingError)
        -> (Configuration, [String]) {
        let values = try load(arguments: arguments, environment: environment, readFile: readFile)
        let (configuration, notes) = try build(values)
        return (configuration, values.warnings + notes)
    }

    /// Every name the table reads: its settings' and their fallbacks'.
    public var knownNames: Set<String> { Set(entries.flatMap { [$0.name] + $0.fallbacks }) }

    /// The prefixes that mark a variable as meant for this service: the part up to and
    /// including the first `_` that at least two of its settings share (`RELAY_`, `APPATTEST_`;
    /// `PUSH_`, `APNS_`; `SIGNAL_`, `TURN_`).
    public var prefixes: [String] {
        var counts: [String: Int] = [:]
        for name in entries.map(\.name) {
            guard let underscore = name.firstIndex(of: "_") else { continue }
            counts[String(name[...underscore]), default: 0] += 1
        }
        return counts.filter { $0.value >= 2 }.keys.sorted()
    }

    /// One warning per environment variable that names no setting but looks like one: it has
    /// one of the table's prefixes, or it is a typo or two away from a setting's name
    /// (`REALY_PORT`). Each says which setting it was probably meant to be.
    public func unknownVariables(in environment: [String: String]) -> [String] {
        let known = knownNames, prefixes = prefixes
        return environment.keys.sorted().compactMap { name in
            guard !known.contains(name) else { return nil }
            let meant = SettingSuggestion.nearest(to: name, in: known)
            guard meant != nil || prefixes.contains(where: { name.hasPrefix($0) }) else { return nil }
            return "warning: \(name) is not a setting of \(command); ignored" + (meant.map { " (did you mean \($0)?)" } ?? "")
        }
    }

    /// Reads `environment` (already merged with any config file) and then `arguments`: each a
    /// switch, or a flag with its value as the next argument or after `=`. Flags win.
    public func values(environment: [String: String], arguments: [String]) throws(SettingError) -> SettingValues {
        let known = knownNames
        let keepsEmpty = Set(entries.filter { !$0.emptyMeansUnset }.flatMap { [$0.name] + $0.fallbacks })
        var values = SettingValues(texts: environment.filter { known.contains($0.key) && (!$0.value.isEmpty || keepsEmpty.contains($0.key)) })
        var it = arguments.makeIterator()
        while let argument = it.next() {
            let (flag, inline) = Self.split(argument)
            if switches.contains(where: { $0.flag == flag }) {
                values.turnOn(flag)
                continue
            }
            guard let entry = entries.first(where: { $0.flags.contains(flag) }) else {
                let flags = entries.flatMap(\.flags) + switches.map(\.flag)
                throw SettingError(variable: argument, message: "unknown option" + SettingSuggestion.hint(for: flag, in: flags) + " (see --help)")
            }
            guard let value = inline ?? it.next() else {
                // The derived flag's error names the setting; an extra flag's names the flag
                // (`--tls-cert: needs a file path`), since that is what the operator typed.
                if let extra = entry.extraFlags.first(where: { $0.flag == flag }) {
                    throw SettingError(variable: flag, message: "needs \(extra.needs)")
                }
                throw SettingError(variable: entry.name, message: "\(flag) needs a value")
            }
            values.set(entry.name, value, from: .flag)
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
