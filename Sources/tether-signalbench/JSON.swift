import Foundation
import TetherWire
import TetherEncoding

/// The JSON lines this program prints, with keys in the order they were added (a person reads
/// them too) and numbers with as many decimals as the figure deserves.
indirect enum JSON: Sendable {
    case null
    case bool(Bool)
    case int(Int)
    case number(Double, digits: Int)
    case string(String)
    case array([JSON])
    case object([(String, JSON)])

    subscript(key: String) -> JSON? {
        get {
            guard case let .object(fields) = self else { return nil }
            return fields.first { $0.0 == key }?.1
        }
        set {
            guard case var .object(fields) = self else { return }
            fields.removeAll { $0.0 == key }
            if let newValue { fields.append((key, newValue)) }
            self = .object(fields)
        }
    }

    /// Counts by kind (errors, failures), in key order.
    static func counts(_ counts: [String: Int]) -> JSON { .object(counts.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) }) }

    static func optional(_ value: Double?, digits: Int) -> JSON { value.map { .number($0, digits: digits) } ?? .null }

    var text: String {
        switch self {
        case .null: "null"
        case let .bool(value): value ? "true" : "false"
        case let .int(value): String(value)
        case let .number(value, digits): value.isFinite ? String(format: "%.\(digits)f", value) : "null"
        case let .string(value): Self.quote(value)
        case let .array(items): "[" + items.map(\.text).joined(separator: ",") + "]"
        case let .object(fields): "{" + fields.map { Self.quote($0.0) + ":" + $0.1.text }.joined(separator: ",") + "}"
        }
    }

    static func quote(_ value: String) -> String { JSONValue.quoted(value) }

    /// Writes the line straight to the descriptor: `run` reads a child's stdout through a pipe.
    func printLine() { FileHandle.standardOutput.write(Data((text + "\n").utf8)) }

    /// A line another process printed, read back as Foundation values (`run` does).
    static func parse(_ line: some StringProtocol) -> [String: Any]? {
        (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
    }
}

extension Dictionary where Key == String, Value == Any {
    func number(_ path: String...) -> Double? {
        var current: Any? = self
        for key in path { current = (current as? [String: Any])?[key] }
        return (current as? NSNumber)?.doubleValue
    }
}
