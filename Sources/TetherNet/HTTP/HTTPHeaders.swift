/// HTTP header fields in arrival order. Lookup is ASCII case-insensitive; duplicates are kept,
/// so a caller can tell `x: a` twice from `x: a` once.
public struct HTTPHeaders: Sendable, Hashable, Sequence {
    public private(set) var fields: [(name: String, value: String)] = []

    public init() {}

    public init(_ fields: [(String, String)]) {
        self.fields = fields.map { (name: $0.0, value: $0.1) }
    }

    public mutating func add(_ name: String, _ value: String) { fields.append((name, value)) }

    /// Room for `count` fields without growing (a parsed head knows its field count up front).
    public mutating func reserveCapacity(_ count: Int) { fields.reserveCapacity(count) }

    /// Replaces every field called `name` with one field.
    public mutating func set(_ name: String, _ value: String) {
        remove(name)
        add(name, value)
    }

    public mutating func remove(_ name: String) { fields.removeAll { Self.same($0.name, name) } }

    /// The first value of `name`.
    public subscript(name: String) -> String? { fields.first { Self.same($0.name, name) }?.value }

    /// Every value of `name`, in order.
    public func values(_ name: String) -> [String] {
        var values: [String] = []
        for field in fields where Self.same(field.name, name) { values.append(field.value) }
        return values
    }

    /// The value of `name` when the field appears exactly once; nil when it is absent or
    /// repeated. Asks what `values(name).count == 1` asks without building an array: every
    /// upgrade asks it for `Host` and both `Sec-WebSocket-*` fields.
    public func only(_ name: String) -> String? {
        var found: String?
        for field in fields where Self.same(field.name, name) {
            guard found == nil else { return nil }
            found = field.value
        }
        return found
    }

    public func contains(_ name: String) -> Bool { fields.contains { Self.same($0.name, name) } }

    /// True if any value of `name`, read as a comma-separated list, contains `token`
    /// (case-insensitive), as `Connection: keep-alive, Upgrade` does.
    public func containsToken(_ token: String, in name: String) -> Bool {
        fields.contains { Self.same($0.name, name) && Self.list($0.value, contains: token) }
    }

    /// Whether the comma-separated `list` has an element equal to `token` (case-insensitive,
    /// spaces and tabs around elements ignored). Scans the bytes in place: every upgrade asks
    /// this three times.
    static func list(_ list: String, contains token: String) -> Bool {
        var list = list, token = token
        return list.withUTF8 { bytes in
            token.withUTF8 { token in
                var start = 0
                while start <= bytes.count {
                    var end = start
                    while end < bytes.count, bytes[end] != UInt8(ascii: ",") { end += 1 }
                    var first = start, last = end
                    while first < last, bytes[first] == 0x20 || bytes[first] == 0x09 { first += 1 }
                    while last > first, bytes[last - 1] == 0x20 || bytes[last - 1] == 0x09 { last -= 1 }
                    if sameBytes(UnsafeBufferPointer(rebasing: bytes[first..<last]), token) { return true }
                    start = end + 1
                }
                return false
            }
        }
    }

    public var count: Int { fields.count }

    public func makeIterator() -> IndexingIterator<[(name: String, value: String)]> { fields.makeIterator() }

    static func same(_ a: some StringProtocol, _ b: some StringProtocol) -> Bool {
        a.utf8.count == b.utf8.count && zip(a.utf8, b.utf8).allSatisfy { asciiLower($0) == asciiLower($1) }
    }

    /// `same` for two strings, on their contiguous UTF-8 (what every header lookup compares).
    static func same(_ a: String, _ b: String) -> Bool {
        guard a.utf8.count == b.utf8.count else { return false }
        var a = a, b = b
        return a.withUTF8 { a in b.withUTF8 { b in sameBytes(a, b) } }
    }

    static func sameBytes(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        for i in 0..<a.count where asciiLower(a[i]) != asciiLower(b[i]) { return false }
        return true
    }

    public static func == (a: HTTPHeaders, b: HTTPHeaders) -> Bool {
        a.fields.count == b.fields.count && zip(a.fields, b.fields).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }

    public func hash(into hasher: inout Hasher) {
        for field in fields {
            hasher.combine(field.name)
            hasher.combine(field.value)
        }
    }
}

@inline(__always)
func asciiLower(_ c: UInt8) -> UInt8 { c >= 0x41 && c <= 0x5a ? c | 0x20 : c }

extension StringProtocol {
    /// Without leading and trailing spaces and tabs (HTTP's OWS).
    func trimmingASCIIWhitespace() -> Substring {
        let s = Substring(self)
        guard let start = s.firstIndex(where: { $0 != " " && $0 != "\t" }) else { return s[s.endIndex...] }
        let end = s.lastIndex(where: { $0 != " " && $0 != "\t" })!
        return s[start...end]
    }
}
