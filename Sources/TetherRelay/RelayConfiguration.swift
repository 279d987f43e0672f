import Foundation
import TetherCrypto
public import TetherWire

/// Everything `tether relay` is configured with (relay.md §7.1), read from an env-file, the
/// environment and command-line flags (in that order of precedence, lowest first) under the
/// reference relay's names, so `/etc/iterm2-companion-relay.env` works unchanged.
///
/// Tether is stricter than the reference where a wrong value would silently weaken or break the
/// relay: an invalid value stops start-up with a message naming the variable.
public struct RelayConfiguration: Sendable, Equatable {
    public var host = "127.0.0.1"
    public var port: UInt16 = 8787
    public var databasePath = "relay.db"
    /// Attestation mode unless `ATTEST_REQUIRED` is exactly `false`.
    public var attestationRequired = true
    public var appID: String?
    public var appAttestDevelopment = false
    public var appAttestRootPEM: String?
    /// The public origin bound into every signature and attestation (used verbatim).
    public var origin = ""
    public var dailyByteQuota: Int64 = 536_870_912
    public var establishedIdleTTLms: Int64 = 2_592_000_000
    public var verboseLog = false
    public var clientIP = ClientIPResolver()
    public var maxRooms = 200_000
    public var maxSocketsPerIP = 64
    public var maxTotalSockets = 200_000
    public var keepaliveMs: Int64 = 30_000
    public var metricsPushURL: String?
    public var metricsPushToken: String?
    public var metricsPushMs: Int64 = 60_000
    /// Per-IP WebSocket upgrades per minute (0 = off).
    public var wsRateLimit = 120
    /// Per-IP `/attest*` requests per minute (0 = off).
    public var attestRateLimit = 30
    /// Spliced frames per room per second (0 = off).
    public var maxFramesPerSecond = 500
    public var tlsCertificatePath: String?
    public var tlsKeyPath: String?
    /// Newcomer mode: loopback only, open admission, a local http origin.
    public var local = false
    /// `RELAY_SHARD_MAP`: a map to publish to the shared store at start-up (§8).
    public var shardMap: ShardMap?

    public init() {}
}

/// One setting: its environment name, flag and help text.
public struct RelaySetting: Sendable {
    public let name: String
    public let defaultText: String
    public let help: String

    /// `RELAY_MAX_ROOMS` → `--relay-max-rooms`.
    public var flag: String { "--" + name.lowercased().replacingOccurrences(of: "_", with: "-") }

    public static let all: [RelaySetting] = [
        RelaySetting(name: "RELAY_HOST", defaultText: "127.0.0.1", help: "bind address"),
        RelaySetting(name: "RELAY_PORT", defaultText: "8787", help: "port (PORT is read when RELAY_PORT is unset)"),
        RelaySetting(name: "RELAY_DB", defaultText: "relay.db", help: "SQLite database path (:memory: for none)"),
        RelaySetting(name: "RELAY_ORIGIN", defaultText: "(required)", help: "public origin clients connect to, exactly as in their pairing links, e.g. https://relay.example.com"),
        RelaySetting(name: "ATTEST_REQUIRED", defaultText: "required", help: "App Attest for pairing phones; only the exact value false turns it off (open mode)"),
        RelaySetting(name: "APP_ID", defaultText: "(required with attestation)", help: "team id + bundle id, e.g. H7V7XYVQ7D.com.googlecode.iterm2.companion"),
        RelaySetting(name: "APPATTEST_ENV", defaultText: "production", help: "production or development"),
        RelaySetting(name: "APPATTEST_ROOT_PEM", defaultText: "(Apple's root)", help: "App Attest root CA, PEM text"),
        RelaySetting(name: "RELAY_DAILY_BYTE_QUOTA", defaultText: "536870912", help: "bytes a room may relay per 24 h"),
        RelaySetting(name: "RELAY_ESTABLISHED_IDLE_TTL_MS", defaultText: "2592000000", help: "an established room unused this long is reaped"),
        RelaySetting(name: "RELAY_LOG", defaultText: "off", help: "verbose diagnostics iff true (SIGUSR2 toggles)"),
        RelaySetting(name: "RELAY_TRUST_PROXY", defaultText: "off", help: "true: key clients by X-Forwarded-For"),
        RelaySetting(name: "RELAY_TRUST_CLOUDFLARE", defaultText: "off", help: "true: key clients by CF-Connecting-IP, then X-Forwarded-For"),
        RelaySetting(name: "RELAY_TRUSTED_HOPS", defaultText: "1", help: "which X-Forwarded-For element, counted from the right"),
        RelaySetting(name: "RELAY_MAX_ROOMS", defaultText: "200000", help: "resident rooms (0 = default)"),
        RelaySetting(name: "RELAY_MAX_SOCKETS_PER_IP", defaultText: "64", help: "concurrent sockets per client IP (0 = default)"),
        RelaySetting(name: "RELAY_MAX_TOTAL_SOCKETS", defaultText: "200000", help: "concurrent sockets in all (0 = default)"),
        RelaySetting(name: "RELAY_KEEPALIVE_MS", defaultText: "30000", help: "WebSocket ping sweep interval (0 = default)"),
        RelaySetting(name: "RELAY_WS_RATE_LIMIT", defaultText: "120", help: "WebSocket upgrades per IP per minute (0 = off)"),
        RelaySetting(name: "RELAY_ATTEST_RATE_LIMIT", defaultText: "30", help: "/attest* requests per IP per minute (0 = off)"),
        RelaySetting(name: "RELAY_MAX_FRAMES_PER_SEC", defaultText: "500", help: "spliced frames per room per second (0 = off)"),
        RelaySetting(name: "RELAY_METRICS_PUSH_URL", defaultText: "unset", help: "push metrics here (needs the token too)"),
        RelaySetting(name: "RELAY_METRICS_PUSH_TOKEN", defaultText: "unset", help: "bearer token for the metrics push"),
        RelaySetting(name: "RELAY_METRICS_PUSH_MS", defaultText: "60000", help: "metrics push interval"),
        RelaySetting(name: "RELAY_SHARD_MAP", defaultText: "unset", help: "shard map JSON file to publish at start (resolver v2; a newer one in the database wins; also `tether shardmap`)"),
        RelaySetting(name: "RELAY_TLS_CERT", defaultText: "unset", help: "serve TLS with this PEM chain (also --tls-cert)"),
        RelaySetting(name: "RELAY_TLS_KEY", defaultText: "unset", help: "PEM private key for RELAY_TLS_CERT (also --tls-key)"),
    ]
}

/// A setting that stops start-up, named so the operator can fix it.
public struct RelayConfigurationError: Error, Equatable, Sendable, CustomStringConvertible {
    public let variable: String
    public let message: String
    public var description: String { "\(variable): \(message)" }
}

extension RelayConfiguration {
    /// Reads `environment` (already merged with any env-file) and `arguments` (flags win).
    /// Returns the configuration and the start-up notes to print.
    public static func load(environment: [String: String], arguments: [String]) throws(RelayConfigurationError) -> (RelayConfiguration, [String]) {
        var values = environment.filter { !$0.value.isEmpty }
        var local = false
        var it = arguments.makeIterator()
        while let argument = it.next() {
            let (flag, inline) = splitFlag(argument)
            switch flag {
            case "--local": local = true
            case "--tls-cert", "--tls-key":
                guard let value = inline ?? it.next() else { throw .init(variable: flag, message: "needs a file path") }
                values[flag == "--tls-cert" ? "RELAY_TLS_CERT" : "RELAY_TLS_KEY"] = value
            default:
                guard let setting = RelaySetting.all.first(where: { $0.flag == flag }) else {
                    throw .init(variable: argument, message: "unknown option (see --help)")
                }
                guard let value = inline ?? it.next() else { throw .init(variable: setting.name, message: "\(flag) needs a value") }
                values[setting.name] = value
            }
        }
        return try build(values, local: local)
    }

    private static func splitFlag(_ argument: String) -> (String, String?) {
        guard let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") else { return (argument, nil) }
        return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
    }

    private static func build(_ values: [String: String], local: Bool) throws(RelayConfigurationError) -> (RelayConfiguration, [String]) {
        var c = RelayConfiguration()
        var notes: [String] = []
        c.local = local
        if let host = values["RELAY_HOST"] { c.host = host }
        if let port = values["RELAY_PORT"] ?? values["PORT"] {
            guard let parsed = UInt16(port) else { throw .init(variable: values["RELAY_PORT"] == nil ? "PORT" : "RELAY_PORT", message: "not a port number: \(port)") }
            c.port = parsed
        }
        if let db = values["RELAY_DB"] { c.databasePath = db }
        c.attestationRequired = values["ATTEST_REQUIRED"] != "false"
        c.appID = values["APP_ID"]
        switch values["APPATTEST_ENV"] {
        case nil, "production": c.appAttestDevelopment = false
        case "development": c.appAttestDevelopment = true
        case let other?: throw .init(variable: "APPATTEST_ENV", message: "must be production or development, not \(other)")
        }
        if let pem = values["APPATTEST_ROOT_PEM"] {
            // An env file holds one line: accept the PEM's newlines written as \n.
            let text = pem.replacingOccurrences(of: "\\n", with: "\n")
            guard (try? Certificate(pemRepresentation: text)) != nil else {
                throw .init(variable: "APPATTEST_ROOT_PEM", message: "not a PEM certificate")
            }
            c.appAttestRootPEM = text
        }
        c.dailyByteQuota = try positiveInteger(values, "RELAY_DAILY_BYTE_QUOTA", default: c.dailyByteQuota)
        c.establishedIdleTTLms = try positiveInteger(values, "RELAY_ESTABLISHED_IDLE_TTL_MS", default: c.establishedIdleTTLms)
        c.verboseLog = values["RELAY_LOG"] == "true"
        c.clientIP = ClientIPResolver(trustCloudflare: values["RELAY_TRUST_CLOUDFLARE"] == "true",
                                      trustProxy: values["RELAY_TRUST_PROXY"] == "true",
                                      trustedHops: Int(try positiveInteger(values, "RELAY_TRUSTED_HOPS", default: 1)))
        c.maxRooms = Int(try countOrDefault(values, "RELAY_MAX_ROOMS", default: Int64(c.maxRooms)))
        c.maxSocketsPerIP = Int(try countOrDefault(values, "RELAY_MAX_SOCKETS_PER_IP", default: Int64(c.maxSocketsPerIP)))
        c.maxTotalSockets = Int(try countOrDefault(values, "RELAY_MAX_TOTAL_SOCKETS", default: Int64(c.maxTotalSockets)))
        c.keepaliveMs = try countOrDefault(values, "RELAY_KEEPALIVE_MS", default: c.keepaliveMs)
        c.wsRateLimit = Int(try nonNegativeInteger(values, "RELAY_WS_RATE_LIMIT", default: Int64(c.wsRateLimit)))
        c.attestRateLimit = Int(try nonNegativeInteger(values, "RELAY_ATTEST_RATE_LIMIT", default: Int64(c.attestRateLimit)))
        c.maxFramesPerSecond = Int(try nonNegativeInteger(values, "RELAY_MAX_FRAMES_PER_SEC", default: Int64(c.maxFramesPerSecond)))
        c.metricsPushURL = values["RELAY_METRICS_PUSH_URL"]
        c.metricsPushToken = values["RELAY_METRICS_PUSH_TOKEN"]
        c.metricsPushMs = try positiveInteger(values, "RELAY_METRICS_PUSH_MS", default: c.metricsPushMs)
        if (c.metricsPushURL == nil) != (c.metricsPushToken == nil) {
            // §2.11: half a push configuration is a warning, not a refusal to start — the
            // reference behaves so, and an env file that runs it must run Tether.
            notes.append("warning: metrics push needs both RELAY_METRICS_PUSH_URL and RELAY_METRICS_PUSH_TOKEN; push stays off")
            c.metricsPushURL = nil
            c.metricsPushToken = nil
        }
        if let url = c.metricsPushURL, !(url.hasPrefix("https://") || url.hasPrefix("http://")) {
            throw .init(variable: "RELAY_METRICS_PUSH_URL", message: "must be an http(s) URL")
        }
        c.tlsCertificatePath = values["RELAY_TLS_CERT"]
        c.tlsKeyPath = values["RELAY_TLS_KEY"]
        if (c.tlsCertificatePath == nil) != (c.tlsKeyPath == nil) {
            throw .init(variable: c.tlsCertificatePath == nil ? "RELAY_TLS_CERT" : "RELAY_TLS_KEY", message: "TLS needs both a certificate chain and a key")
        }

        if local {
            guard isLoopback(c.host) else { throw .init(variable: "RELAY_HOST", message: "--local binds loopback only, not \(c.host)") }
            c.attestationRequired = false
            c.origin = values["RELAY_ORIGIN"] ?? "http://127.0.0.1:\(c.port)"
            notes.append("local mode: listening on \(c.host):\(c.port) only, open admission (no App Attest), origin \(c.origin), database \(c.databasePath) in the working directory")
        } else {
            guard let origin = values["RELAY_ORIGIN"] else {
                throw .init(variable: "RELAY_ORIGIN", message: "required: the public https origin clients connect to (or run with --local)")
            }
            // Bound into signatures verbatim, so it must already be in canonical form.
            guard RelayOrigin.canonicalize(origin) == origin else {
                throw .init(variable: "RELAY_ORIGIN", message: "must be a bare https origin such as https://relay.example.com (no path, query, user or trailing slash): \(origin)")
            }
            c.origin = origin
            if c.attestationRequired, c.appID == nil {
                throw .init(variable: "APP_ID", message: "required in attestation mode (set ATTEST_REQUIRED=false for open mode)")
            }
        }
        if let path = values["RELAY_SHARD_MAP"] {
            c.shardMap = try loadShardMap(path)
            let host = ShardOwnershipHost.of(origin: c.origin)
            if let map = c.shardMap, !map.hosts.contains(host) {
                notes.append("warning: RELAY_SHARD_MAP gives this node (\(host), from RELAY_ORIGIN) no bucket: it will answer 421 for every room")
            }
        }
        if c.clientIP.shouldWarnBehindProxy(boundToLoopback: isLoopback(c.host)), !local {
            notes.append("warning: bound to loopback without RELAY_TRUST_PROXY or RELAY_TRUST_CLOUDFLARE: behind a proxy every client shares one rate-limit bucket")
        }
        return (c, notes)
    }

    /// Reads and validates a shard map file; any fault names `RELAY_SHARD_MAP`.
    public static func loadShardMap(_ path: String, variable: String = "RELAY_SHARD_MAP") throws(RelayConfigurationError) -> ShardMap {
        guard let data = FileManager.default.contents(atPath: path) else { throw .init(variable: variable, message: "cannot read \(path)") }
        do {
            return try ShardMap(json: Array(data))
        } catch {
            throw .init(variable: variable, message: "\(path): \(error)")
        }
    }

    static func isLoopback(_ host: String) -> Bool { RelayOrigin.isLoopback(host: host) }

    private static func integer(_ values: [String: String], _ name: String) throws(RelayConfigurationError) -> Int64? {
        guard let text = values[name] else { return nil }
        guard !text.isEmpty, text.allSatisfy(\.isASCII), text.allSatisfy({ $0.isNumber || $0 == "-" }), let value = Int64(text) else {
            throw .init(variable: name, message: "not an integer: \(text)")
        }
        return value
    }

    private static func positiveInteger(_ values: [String: String], _ name: String, default fallback: Int64) throws(RelayConfigurationError) -> Int64 {
        guard let value = try integer(values, name) else { return fallback }
        guard value > 0 else { throw .init(variable: name, message: "must be a positive integer, not \(value)") }
        return value
    }

    /// The reference's caps: positive, with 0 meaning the default; negative is refused.
    private static func countOrDefault(_ values: [String: String], _ name: String, default fallback: Int64) throws(RelayConfigurationError) -> Int64 {
        guard let value = try integer(values, name) else { return fallback }
        guard value >= 0 else { throw .init(variable: name, message: "must not be negative: \(value)") }
        return value == 0 ? fallback : value
    }

    private static func nonNegativeInteger(_ values: [String: String], _ name: String, default fallback: Int64) throws(RelayConfigurationError) -> Int64 {
        guard let value = try integer(values, name) else { return fallback }
        guard value >= 0 else { throw .init(variable: name, message: "must be 0 (off) or a positive integer, not \(value)") }
        return value
    }

    /// Parses an env-file (systemd `EnvironmentFile` syntax: `NAME=value`, `#` comments,
    /// optional surrounding quotes).
    public static func parseEnvironmentFile(_ text: String) -> [String: String] {
        var values: [String: String] = [:]
        for raw in text.split(whereSeparator: \.isNewline) {
            let line = raw.trimmingWhitespace()
            guard !line.isEmpty, !line.hasPrefix("#"), let equals = line.firstIndex(of: "=") else { continue }
            let name = line[..<equals].trimmingWhitespace()
            var value = line[line.index(after: equals)...].trimmingWhitespace()
            if value.count >= 2, let first = value.first, first == "\"" || first == "'", value.last == first {
                value = value.dropFirst().dropLast()
            }
            values[String(name)] = String(value)
        }
        return values
    }

    /// `tether relay --help`.
    public static var helpText: String {
        var text = "usage: tether relay [--local] [--tls-cert FILE --tls-key FILE] [--<setting> VALUE ...]\n\n"
        text += "Every setting is read from the environment under its name, or from the flag beside it\n(flags win). Invalid values stop start-up.\n\n"
        text += "  --local                 newcomer mode: loopback only, open admission, origin http://127.0.0.1:<port>\n"
        for setting in RelaySetting.all {
            let left = "  \(setting.flag)  (\(setting.name), default \(setting.defaultText))"
            text += left + "\n      " + setting.help + "\n"
        }
        return text
    }
}
