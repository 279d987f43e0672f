public import Foundation

/// Public test vectors (RFCs, Wycheproof, Noise, App Attest samples…, each set with its
/// `PROVENANCE.md`) live in the repository at `Tests/Vectors/`, so a clone alone runs every test;
/// `$TETHER_VECTORS` points elsewhere (a newer copy of the specification's `shared/vectors`).
/// They are read from there, never pasted into test code.
public enum Vectors {
    public enum Failure: Error, CustomStringConvertible {
        case notFound(String)
        case malformed(String)
        public var description: String {
            switch self {
            case let .notFound(what): "test vectors not found: \(what) (Tests/Vectors in the checkout, or set TETHER_VECTORS)"
            case let .malformed(what): "malformed test vector file: \(what)"
            }
        }
    }

    /// The vectors' directory: `$TETHER_VECTORS`, else the checkout's `Tests/Vectors`.
    public static func directory() throws -> URL {
        if let explicit = ProcessInfo.processInfo.environment["TETHER_VECTORS"], !explicit.isEmpty {
            return URL(fileURLWithPath: explicit, isDirectory: true)
        }
        let bundled = packageRoot().appendingPathComponent("Tests/Vectors", isDirectory: true)
        guard FileManager.default.fileExists(atPath: bundled.appendingPathComponent("README.md").path) else {
            throw Failure.notFound("no Tests/Vectors/README.md under \(packageRoot().path)")
        }
        return bundled
    }

    /// The package root (the directory holding Package.swift).
    public static func packageRoot() -> URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    public static func url(_ relativePath: String) throws -> URL {
        let url = try directory().appendingPathComponent(relativePath)
        guard FileManager.default.fileExists(atPath: url.path) else { throw Failure.notFound(relativePath) }
        return url
    }

    public static func data(_ relativePath: String) throws -> Data {
        try Data(contentsOf: url(relativePath))
    }

    public static func text(_ relativePath: String) throws -> String {
        String(decoding: try data(relativePath), as: UTF8.self)
    }

    /// A JSON file as a dictionary.
    public static func json(_ relativePath: String) throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: data(relativePath)) as? [String: Any] else {
            throw Failure.malformed(relativePath)
        }
        return object
    }

    /// A JSON file whose top level is an array of objects.
    public static func jsonArray(_ relativePath: String) throws -> [[String: Any]] {
        guard let array = try JSONSerialization.jsonObject(with: data(relativePath)) as? [[String: Any]] else {
            throw Failure.malformed(relativePath)
        }
        return array
    }
}

/// One Wycheproof test with its group's shared fields.
public struct WycheproofCase: @unchecked Sendable { // immutable JSON dictionaries parsed once and only read
    public let group: [String: Any]
    public let test: [String: Any]

    public var id: Int { test["tcId"] as? Int ?? -1 }
    public var result: String { test["result"] as? String ?? "" }
    public var flags: [String] { test["flags"] as? [String] ?? [] }
    public var label: String { "tcId \(id) (\(test["comment"] as? String ?? ""))" }

    public func hex(_ key: String) throws -> [UInt8] { try hexBytes(test[key] as? String ?? "") }
    public func string(_ key: String) -> String? { test[key] as? String }
    public func int(_ key: String) -> Int? { test[key] as? Int }
}

public enum Wycheproof {
    /// Every test of a Wycheproof file (`wycheproof/<name>.json`), in file order. Throws if the
    /// file holds fewer tests than its header declares, so a truncated file cannot pass.
    public static func cases(_ name: String) throws -> [WycheproofCase] {
        let file = try Vectors.json("wycheproof/\(name).json")
        guard let groups = file["testGroups"] as? [[String: Any]] else { throw Vectors.Failure.malformed(name) }
        var cases: [WycheproofCase] = []
        for group in groups {
            for test in group["tests"] as? [[String: Any]] ?? [] { cases.append(WycheproofCase(group: group, test: test)) }
        }
        if let declared = file["numberOfTests"] as? Int, declared != cases.count {
            throw Vectors.Failure.malformed("\(name): \(cases.count) tests, header says \(declared)")
        }
        return cases
    }
}

/// Decodes hex (either case); throws on odd length or a non-hex character.
public func hexBytes(_ hex: String) throws -> [UInt8] {
    let digits = Array(hex.utf8)
    guard digits.count % 2 == 0 else { throw Vectors.Failure.malformed("odd-length hex") }
    var out: [UInt8] = []
    out.reserveCapacity(digits.count / 2)
    func nibble(_ c: UInt8) throws -> UInt8 {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: throw Vectors.Failure.malformed("non-hex character")
        }
    }
    var i = 0
    while i < digits.count {
        out.append(try nibble(digits[i]) << 4 | nibble(digits[i + 1]))
        i += 2
    }
    return out
}

public func hexString(_ bytes: some Sequence<UInt8>) -> String {
    let table = Array("0123456789abcdef".utf8)
    var out: [UInt8] = []
    for b in bytes {
        out.append(table[Int(b >> 4)])
        out.append(table[Int(b & 0xf)])
    }
    return String(decoding: out, as: UTF8.self)
}

extension Dictionary where Key == String, Value == Any {
    /// A hex field as bytes.
    public func hex(_ key: String) throws -> [UInt8] {
        guard let value = self[key] as? String else { throw Vectors.Failure.malformed("missing hex field \(key)") }
        return try hexBytes(value)
    }
}

/// Vector sets that ship inside PyPI packages, installed into the project's virtualenv
/// (`.venv`, created by `scripts/install-deps`).
public enum PythonPackageVectors {
    /// The project's virtualenv: `$TETHER_VENV` or `<package root>/.venv`.
    public static var virtualenv: URL {
        ProcessInfo.processInfo.environment["TETHER_VENV"].map { URL(fileURLWithPath: $0) }
            ?? Vectors.packageRoot().appendingPathComponent(".venv")
    }

    /// `site-packages/<package>` inside the virtualenv.
    public static func directory(_ package: String) throws -> URL {
        let venv = virtualenv
        let lib = venv.appendingPathComponent("lib")
        let pythons = (try? FileManager.default.contentsOfDirectory(atPath: lib.path))?.filter { $0.hasPrefix("python") } ?? []
        for python in pythons {
            let candidate = lib.appendingPathComponent(python).appendingPathComponent("site-packages").appendingPathComponent(package)
            if FileManager.default.fileExists(atPath: candidate.path) { return candidate }
        }
        throw Vectors.Failure.notFound("\(package) in \(venv.path) (run scripts/install-deps)")
    }
}

/// NIST CAVP response files (`.rsp`): sections of `[Name = value]` parameters followed by
/// blank-line-separated records of `Name = value` lines (a bare `FAIL` line marks a record
/// that must be rejected).
public struct CAVPRecord: Sendable {
    public let parameters: [String: String]
    public let fields: [String: String]
    public let fails: Bool

    public static func parse(_ text: String) -> [CAVPRecord] {
        var records: [CAVPRecord] = []
        var parameters: [String: String] = [:]
        var fields: [String: String] = [:]
        var fails = false
        var parametersClosed = false
        func flush() {
            if !fields.isEmpty { records.append(CAVPRecord(parameters: parameters, fields: fields, fails: fails)) }
            fields = [:]
            fails = false
        }
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            let line = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            if line.isEmpty { flush(); continue }
            if line.hasPrefix("#") { continue }
            if line.hasPrefix("[") {
                flush()
                if parametersClosed { parameters = [:]; parametersClosed = false }
                let inner = line.dropFirst().dropLast()
                let parts = inner.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                if parts.count == 2 { parameters[parts[0]] = parts[1] }
                continue
            }
            parametersClosed = true
            if line == "FAIL" { fails = true; continue }
            let parts = line.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        flush()
        return records
    }
}
