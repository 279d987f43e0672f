import Glibc

/// Turns a setting's text into its value, or says precisely what is wrong with it. The message
/// is completed by the table with the variable's name (`RELAY_PORT: not a port number: x`).
public struct SettingParser<Value: Sendable>: Sendable {
    /// Parses the text; throws what is wrong with it.
    public let parse: @Sendable (String) throws(InvalidSettingValue) -> Value

    /// A parser running `parse`.
    public init(_ parse: @escaping @Sendable (String) throws(InvalidSettingValue) -> Value) { self.parse = parse }
}

extension SettingParser where Value == String {
    /// The text verbatim.
    public static var text: SettingParser { SettingParser { $0 } }
}

extension SettingParser where Value == String {
    /// Any text but the empty one, which is refused naming what the setting needs.
    public static func nonEmpty(_ needs: String) -> SettingParser {
        SettingParser { text throws(InvalidSettingValue) in
            guard !text.trimmingCharacters(in: .whitespaces).isEmpty else { throw InvalidSettingValue("empty: needs \(needs) (remove the line to use the default)") }
            return text
        }
    }

    /// A numeric IPv4 or IPv6 address to bind (`127.0.0.1`, `::1`, `0.0.0.0`). Names are refused
    /// rather than half-accepted: `localhost` would pass a loopback check and then fail to bind.
    public static var ipAddress: SettingParser {
        SettingParser { text throws(InvalidSettingValue) in
            guard Self.isNumericAddress(text) else {
                throw InvalidSettingValue("must be a numeric IP address such as 127.0.0.1, ::1 or 0.0.0.0 (names are not resolved): \(text)")
            }
            return text
        }
    }

    /// Whether `text` is a numeric IPv4 or IPv6 address (`192.0.2.1`, `::1`).
    public static func isNumericAddress(_ text: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, text, &v4) == 1 || inet_pton(AF_INET6, text, &v6) == 1
    }
}

extension SettingParser where Value == String? {
    /// The text verbatim; an unset setting stays nil.
    public static var text: SettingParser { SettingParser { $0 } }
}

extension SettingParser where Value == Bool {
    /// Exactly `true` or exactly `false`, the one spelling set of every switch of every service;
    /// any other text (`yes`, `1`, `TRUE`, `no`, `off`) stops start-up rather than being read
    /// silently as either.
    public static var trueOrFalse: SettingParser {
        SettingParser { text throws(InvalidSettingValue) in
            switch text {
            case "true": return true
            case "false": return false
            default: throw InvalidSettingValue("must be true or false (other spellings are not read as on): \(text)")
            }
        }
    }
}

extension SettingParser {
    /// One of a fixed set of words: `must be production or development, not staging`.
    public static func oneOf(_ choices: [(word: String, value: Value)]) -> SettingParser {
        precondition(!choices.isEmpty)
        let words = choices.map(\.word)
        let list = words.count == 1 ? words[0] : words.dropLast().joined(separator: ", ") + " or " + words[words.count - 1]
        return SettingParser { text throws(InvalidSettingValue) in
            guard let choice = choices.first(where: { $0.word == text }) else { throw InvalidSettingValue("must be \(list), not \(text)") }
            return choice.value
        }
    }
}

extension SettingParser where Value == UInt16 {
    /// A TCP port, 0–65535.
    public static var port: SettingParser {
        SettingParser { text throws(InvalidSettingValue) in
            guard let port = UInt16(text) else { throw InvalidSettingValue("not a port number: \(text)") }
            return port
        }
    }
}

extension SettingParser where Value == UInt16? {
    /// A TCP port, 1–65535, for a listener that is off while unset (an admin port, say).
    public static var optionalPort: SettingParser {
        SettingParser { text throws(InvalidSettingValue) in
            guard let port = UInt16(text), port > 0 else { throw InvalidSettingValue("not a port number: \(text)") }
            return port
        }
    }
}

extension SettingParser where Value == Int64 {
    /// Decimal digits with an optional minus sign, nothing else: `8GiB`, `1.5`, `1e3` and `+5`
    /// are refused rather than read as something the operator did not mean.
    public static var integer: SettingParser {
        SettingParser { text throws(InvalidSettingValue) in
            guard !text.isEmpty, text.allSatisfy(\.isASCII), text.allSatisfy({ $0.isNumber || $0 == "-" }), let value = Int64(text) else {
                throw InvalidSettingValue("not an integer: \(text)")
            }
            return value
        }
    }

    /// An integer above 0 (a quota, an interval: 0 would mean nothing sensible).
    public static var positiveInteger: SettingParser {
        SettingParser { text throws(InvalidSettingValue) in
            let value = try integer.parse(text)
            guard value > 0 else { throw InvalidSettingValue("must be a positive integer, not \(value)") }
            return value
        }
    }

    /// An integer of at least `minimum`; `why` says what a smaller one would break.
    public static func atLeast(_ minimum: Int64, why: String) -> SettingParser {
        SettingParser { text throws(InvalidSettingValue) in
            let value = try integer.parse(text)
            guard value >= minimum else { throw InvalidSettingValue("must be at least \(minimum), not \(value): \(why)") }
            return value
        }
    }

    /// The reference's caps: a positive integer, with 0 meaning `fallback`; negative is refused.
    public static func countOrDefault(_ fallback: Int64) -> SettingParser {
        SettingParser { text throws(InvalidSettingValue) in
            let value = try integer.parse(text)
            guard value >= 0 else { throw InvalidSettingValue("must not be negative: \(value)") }
            return value == 0 ? fallback : value
        }
    }

    /// A limit where 0 turns the limit off.
    public static var zeroOrPositive: SettingParser {
        SettingParser { text throws(InvalidSettingValue) in
            let value = try integer.parse(text)
            guard value >= 0 else { throw InvalidSettingValue("must be 0 (off) or a positive integer, not \(value)") }
            return value
        }
    }
}
