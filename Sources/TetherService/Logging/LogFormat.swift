import Glibc

/// How the log sink writes a line (`RELAY_LOG_FORMAT`, `PUSH_LOG_FORMAT`, `SIGNAL_LOG_FORMAT`).
public enum LogFormat: String, Sendable, CaseIterable {
    /// The line alone, as the reference relay writes it: what journald (which stamps lines itself)
    /// and log tooling written for the reference expect.
    case plain
    /// RFC 3339 UTC time with milliseconds and the level before the line:
    /// `2026-12-01T23:36:19.123Z info relay: listening on …`.
    case timestamp
    /// One JSON object per line: `{"ts":"…","level":"info","service":"relay","msg":"…"}`, the
    /// message without the service's own `relay: ` prefix, and each `name=value` of the line
    /// (`role=mac`, `lived=1520ms`) as a field of its own.
    case json
}

/// A line's weight: `debug` for verbose diagnostics (`*_LOG=true`), `warning` for what an operator
/// should look at soon (a certificate about to expire), `error` for what failed (a store that
/// stopped answering, an internal fault).
public enum LogLevel: String, Sendable, Comparable, CaseIterable {
    /// Verbose diagnostics, written while `*_LOG` is on or `*_LOG_LEVEL` is `debug`.
    case debug
    /// What a running service does: start-up, listening, reloads.
    case info
    /// What an operator should look at soon.
    case warning
    /// What failed.
    case error

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

extension LogFormat {
    /// `line` as one encoded log line (newline included). Plain and timestamped lines have their
    /// control characters replaced by spaces, so no text can forge a line of its own; JSON
    /// escapes them instead.
    func encode(_ line: String, level: LogLevel, service: String, nowNanoseconds: Int64 = LogFormat.wallClockNanoseconds()) -> [UInt8] {
        var bytes: [UInt8]
        switch self {
        case .plain:
            bytes = Self.flattened(line)
        case .timestamp:
            bytes = Array(Self.rfc3339(nowNanoseconds).utf8) + [0x20] + Array(level.rawValue.utf8) + [0x20] + Self.flattened(line)
        case .json:
            let message = line.hasPrefix(service + ": ") ? String(line.dropFirst(service.count + 2)) : line
            bytes = Array(#"{"ts":""#.utf8) + Array(Self.rfc3339(nowNanoseconds).utf8) + Array(#"","level":""#.utf8) + Array(level.rawValue.utf8)
                + Array(#"","service":"#.utf8) + Self.jsonString(service) + Array(#","msg":"#.utf8) + Self.jsonString(message)
            for (name, value) in Self.fields(of: message) {
                bytes += [0x2C] + Self.jsonString(name) + [0x3A] + Self.jsonString(value)
            }
            bytes.append(0x7D)
        }
        bytes.append(0x0A)
        return bytes
    }

    /// A line as the format writes it, without its newline: what `tether` prints before the log
    /// sink exists (start-up notes) or beside it (the `listening on` line on standard output).
    public func render(_ line: String, level: LogLevel, service: String) -> String {
        String(decoding: encode(line, level: level, service: service).dropLast(), as: UTF8.self)
    }

    /// The `name=value` words of a line (lowercase names; the first of a name wins, and the
    /// reserved `ts`, `level`, `service` and `msg` are left in the message only).
    static func fields(of line: String) -> [(String, String)] {
        var seen: Set<String> = ["ts", "level", "service", "msg"]
        var fields: [(String, String)] = []
        for raw in line.split(separator: " ") {
            // `(db=relay.db,` and `admin=off)`: the punctuation around a list is not the value's.
            let word = raw.drop { $0 == "(" }
            guard let equals = word.firstIndex(of: "="), equals != word.startIndex else { continue }
            let name = String(word[..<equals])
            var value = word[word.index(after: equals)...]
            while let last = value.last, last == "," || last == ")" { value = value.dropLast() }
            guard !value.isEmpty, name.utf8.allSatisfy({ ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x5F }), seen.insert(name).inserted else { continue }
            fields.append((name, String(value)))
        }
        return fields
    }

    static func flattened(_ line: String) -> [UInt8] {
        var bytes = Array(line.utf8)
        for index in bytes.indices where bytes[index] < 0x20 || bytes[index] == 0x7F { bytes[index] = 0x20 }
        return bytes
    }

    /// A JSON string literal (RFC 8259 §7): quote, backslash and control characters escaped.
    static func jsonString(_ text: String) -> [UInt8] {
        var out: [UInt8] = [0x22]
        for byte in text.utf8 {
            switch byte {
            case 0x22: out += [0x5C, 0x22]
            case 0x5C: out += [0x5C, 0x5C]
            case 0x0A: out += [0x5C, 0x6E]
            case 0x0D: out += [0x5C, 0x72]
            case 0x09: out += [0x5C, 0x74]
            case 0x00..<0x20, 0x7F:
                let hex = Array("0123456789abcdef".utf8)
                out += [0x5C, 0x75, 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
            default: out.append(byte)
            }
        }
        out.append(0x22)
        return out
    }

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ`, formatted by hand: no formatter object per line.
    static func rfc3339(_ nanoseconds: Int64) -> String {
        var seconds = time_t(nanoseconds / 1_000_000_000)
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let milliseconds = Int((nanoseconds % 1_000_000_000) / 1_000_000)
        let millis = milliseconds < 10 ? "00\(milliseconds)" : milliseconds < 100 ? "0\(milliseconds)" : "\(milliseconds)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)).\(millis)Z"
    }

    /// The wall clock now, in nanoseconds since the Unix epoch: the time a line is stamped with.
    public static func wallClockNanoseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
    }
}

extension SettingParser where Value == LogLevel {
    /// `debug`, `info`, `warning` or `error`, exactly.
    public static var logLevel: SettingParser {
        SettingParser { text throws(InvalidSettingValue) in
            guard let level = LogLevel(rawValue: text) else { throw InvalidSettingValue("must be debug, info, warning or error: \(text)") }
            return level
        }
    }
}

extension SettingParser where Value == LogFormat {
    /// `plain`, `timestamp` or `json`, exactly.
    public static var logFormat: SettingParser {
        SettingParser { text throws(InvalidSettingValue) in
            guard let format = LogFormat(rawValue: text) else {
                throw InvalidSettingValue("must be plain, timestamp or json: \(text)")
            }
            return format
        }
    }
}
