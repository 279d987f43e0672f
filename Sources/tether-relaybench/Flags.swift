import Foundation

/// `--name value` flags (and bare `--switch`es) of one subcommand; a misspelt flag stops the run
/// rather than silently measuring something else.
struct Flags {
    private var values: [String: String] = [:]
    private var switches: Set<String> = []

    init(_ arguments: [String], switches known: Set<String> = [], usage: String) {
        self.usage = usage
        var it = arguments.makeIterator()
        while let argument = it.next() {
            guard argument.hasPrefix("--") else { Self.fail("unexpected \(argument)", usage) }
            let name = String(argument.dropFirst(2))
            if known.contains(name) {
                switches.insert(name)
            } else {
                guard let value = it.next() else { Self.fail("\(argument) needs a value", usage) }
                values[name] = value
            }
        }
    }

    private let usage: String

    func has(_ name: String) -> Bool { switches.contains(name) }
    func string(_ name: String) -> String? { values[name] }
    func string(_ name: String, default value: String) -> String { values[name] ?? value }

    func int(_ name: String, default value: Int) -> Int {
        guard let text = values[name] else { return value }
        guard let parsed = Int(text) else { Self.fail("--\(name) wants a whole number, not \(text)", usage) }
        return parsed
    }

    func double(_ name: String, default value: Double) -> Double {
        guard let text = values[name] else { return value }
        guard let parsed = Double(text) else { Self.fail("--\(name) wants a number, not \(text)", usage) }
        return parsed
    }

    /// Every flag given must be one the subcommand knows.
    func only(_ names: Set<String>) {
        for name in values.keys where !names.contains(name) { Self.fail("unknown flag --\(name)", usage) }
    }

    static func fail(_ message: String, _ usage: String) -> Never {
        FileHandle.standardError.write(Data("tether-relaybench: \(message)\n\(usage)".utf8))
        exit(2)
    }
}
