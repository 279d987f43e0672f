import Foundation

/// One subcommand's `--name value` flags. Each subcommand lists the flags it knows (with their
/// defaults and help, from which its usage is printed); an unknown or malformed flag stops the
/// program rather than silently measuring something else.
struct Options {
    struct Flag {
        let name: String
        let value: String
        let help: String
        init(_ name: String, _ value: String, _ help: String) {
            self.name = name
            self.value = value
            self.help = help
        }

        /// The flags every scenario against a running server takes.
        static let url = Flag("url", "ws://127.0.0.1:8791/signal", "the server's /signal endpoint")
        static let concurrency = Flag("concurrency", "64", "registrations in flight while the clients connect")
        static func pid(_ help: String) -> Flag { Flag("pid", "", help) }
    }

    let command: String
    let flags: [Flag]
    private var given: [String: String] = [:]

    init(_ command: String, _ arguments: [String], flags: [Flag]) {
        self.command = command
        self.flags = flags
        var rest = arguments.makeIterator()
        while let argument = rest.next() {
            if argument == "--help" || argument == "-h" {
                print(usage, terminator: "")
                exit(0)
            }
            let name = argument.hasPrefix("--") ? String(argument.dropFirst(2)) : ""
            guard flags.contains(where: { $0.name == name }) else { fail("unknown argument \(argument)") }
            guard let value = rest.next() else { fail("\(argument) needs a value") }
            given[name] = value
        }
    }

    var usage: String {
        let width = flags.map(\.name.count).max() ?? 0
        return "usage: tether-signalbench \(command) [options]\n"
            + flags.map { "  --\($0.name.padding(toLength: width, withPad: " ", startingAt: 0))  \($0.help)\($0.value.isEmpty ? "" : " (default \($0.value))")\n" }.joined()
    }

    func fail(_ message: String) -> Never {
        FileHandle.standardError.write(Data("tether-signalbench \(command): \(message)\n\(usage)".utf8))
        exit(2)
    }

    func string(_ name: String) -> String {
        guard let flag = flags.first(where: { $0.name == name }) else { preconditionFailure("flag --\(name) not declared") }
        return given[name] ?? flag.value
    }

    func int(_ name: String) -> Int {
        guard let value = Int(string(name)), value >= 0 else { fail("--\(name) wants a whole number, not \(string(name))") }
        return value
    }

    func double(_ name: String) -> Double {
        guard let value = Double(string(name)), value >= 0 else { fail("--\(name) wants a number, not \(string(name))") }
        return value
    }

    /// A process id, or nil for an empty value (the figures that need it are then left out).
    func pid(_ name: String) -> Int32? {
        let text = string(name)
        guard !text.isEmpty else { return nil }
        guard let pid = Int32(text), pid > 0 else { fail("--\(name) wants a process id, not \(text)") }
        return pid
    }
}
