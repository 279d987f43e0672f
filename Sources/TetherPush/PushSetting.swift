import Foundation
public import TetherService

/// The push relay's settings table (push.md §1.1, §5): the Mytty deployment's names, each also a
/// flag (`--apns-team-id`) and a config-file key; `--help`, docs/configuration.md's reference and start-up
/// errors come from here. iTerm2's self-hosted names `APNS_P8` / `APNS_P8_FILE` are accepted for
/// the key.
public enum PushSetting {
    /// Every setting of `tether push`, in the order `--help` lists them.
    public static let table = SettingsTable(
        command: "tether push", synopsis: "[--tls-cert FILE --tls-key FILE]", switches: [],
        rows: [host, port, database, profiles, teamID, keyID, privateKey, privateKeyFile, topic, topicITerm2,
               productionURL, sandboxURL, caFile, registerLimit, registerRateLimit, maxConnectionsPerIP, trustProxy, trustCloudflare, trustedHops,
               log, logLevel, logFormat, adminHost, adminPort, tlsCertificate, tlsKey] + acme.rows)

    /// Every setting's documented half (name, flag, default, help).
    public static var all: [SettingEntry] { table.entries }

    static let host = Setting<String>("PUSH_HOST", default: "127.0.0.1", parser: .ipAddress, help: "bind address")
    static let port = Setting<UInt16>("PUSH_PORT", default: 8788, parser: .port, help: "port")
    static let database = Setting<String>("PUSH_DB", default: "push.db", parser: .databaseLocation,
                                          help: "SQLite database of registrations, or a postgres:// URL every node shares (:memory: for none)")
    static let profiles = Setting<PushProfiles>("PUSH_PROFILES", default: [.mytty], defaultText: "mytty", parser: profileList,
                                                help: "mytty, iterm2, or mytty,iterm2: the client-facing protocols served")
    static let teamID = Setting<String?>("APNS_TEAM_ID", default: nil, defaultText: "(required)", parser: appleIdentifier,
                                         help: "10-character Apple team id (the token's iss)")
    static let keyID = Setting<String?>("APNS_KEY_ID", default: nil, defaultText: "(required)", parser: appleIdentifier,
                                        help: "10-character key id of the .p8 (the token's kid)")
    static let privateKey = Setting<String?>("APNS_PRIVATE_KEY", defaultText: "(this or the file)", fallbacks: ["APNS_P8"],
                                             help: "the .p8 key text, armour lines included (\\n for newlines in an env file)")
    static let privateKeyFile = Setting<String?>("APNS_PRIVATE_KEY_FILE", fallbacks: ["APNS_P8_FILE"], parser: .readableFile, help: "path of the .p8 key")
    static let topic = Setting<String>("APNS_TOPIC", default: "com.m-tkg.mytty.remote", emptyMeansUnset: false,
                                       parser: .nonEmpty("the app's bundle id"),
                                       help: "Profile M topic: the Mytty app's bundle id")
    static let topicITerm2 = Setting<String>("APNS_TOPIC_ITERM2", default: "com.googlecode.iterm2.companion", emptyMeansUnset: false,
                                             parser: .nonEmpty("the app's bundle id"),
                                             help: "Profile I topic: the iTerm2 app's bundle id")
    static let productionURL = Setting<String>("APNS_PRODUCTION_URL", default: "https://api.push.apple.com", parser: httpsURL,
                                               help: "APNs production endpoint")
    static let sandboxURL = Setting<String>("APNS_SANDBOX_URL", default: "https://api.sandbox.push.apple.com", parser: httpsURL,
                                            help: "APNs sandbox endpoint")
    static let caFile = Setting<String?>("APNS_CA_FILE", defaultText: "(system roots only)", parser: .readableFile,
                                         help: "extra PEM trust root for APNs, in addition to the system roots")
    static let registerLimit = Setting<Int64>("PUSH_REGISTER_LIMIT", default: 10, parser: .zeroOrPositive,
                                              help: "Profile I /register requests per client IP per 60 s (0 = off)")
    static let registerRateLimit = Setting<Int64>("PUSH_REGISTER_RATE_LIMIT", default: 60, parser: .zeroOrPositive,
                                                  help: "Profile M /v1/register requests per client IP per 60 s (0 = off); past it 429 rate limited")
    static let maxConnectionsPerIP = Setting<Int64>("PUSH_MAX_CONNECTIONS_PER_IP", default: 256, parser: .countOrDefault(256),
                                                    help: "open connections per client address, kept-alive ones included (0 = default); past it 429 at accept")
    static let trustProxy = Setting<Bool>("PUSH_TRUST_PROXY", default: false, parser: .trueOrFalse, help: "true: key clients by X-Forwarded-For")
    static let trustCloudflare = Setting<Bool>("PUSH_TRUST_CLOUDFLARE", default: false, parser: .trueOrFalse,
                                               help: "true: key clients by CF-Connecting-IP, then X-Forwarded-For")
    static let trustedHops = Setting<Int64>("PUSH_TRUSTED_HOPS", default: 1, parser: .positiveInteger,
                                            help: "which X-Forwarded-For element, counted from the right")
    static let log = Setting<Bool>("PUSH_LOG", default: false, parser: .trueOrFalse, help: "verbose diagnostics iff true (SIGUSR2 toggles)")
    static let logLevel = Setting<LogLevel>("PUSH_LOG_LEVEL", default: .info, defaultText: "info", parser: .logLevel,
                                            help: "the least a line must weigh to be written: debug (as PUSH_LOG=true), info, warning or error")
    static let logFormat = Setting<LogFormat>("PUSH_LOG_FORMAT", default: .plain, defaultText: "plain", parser: .logFormat,
                                              help: "plain (the line alone, as journald expects), timestamp (RFC 3339 time and level first) or json (one object per line)")
    static let adminHost = Setting<String>("PUSH_ADMIN_HOST", default: "127.0.0.1", parser: .ipAddress,
                                           help: "admin listener address (/metrics, /healthz, /readyz; loopback peers only)")
    static let adminPort = Setting<UInt16?>("PUSH_ADMIN_PORT", default: nil, defaultText: "off", parser: .optionalPort,
                                            help: "admin listener port (unset: no admin listener)")
    static let tlsCertificate = Setting<String?>("PUSH_TLS_CERT", extraFlags: [.init("--tls-cert", needs: "a file path")], parser: .readableFile,
                                                 help: "serve TLS with this PEM chain")
    static let acme = ACMESettings(prefix: "PUSH")
    static let tlsKey = Setting<String?>("PUSH_TLS_KEY", extraFlags: [.init("--tls-key", needs: "a file path")], parser: .readableFile,
                                         help: "PEM private key for PUSH_TLS_CERT")

    /// An Apple team or key id: exactly ten characters of A–Z and 0–9.
    static let appleIdentifier = SettingParser<String?> { text throws(InvalidSettingValue) in
        guard text.utf8.count == 10, text.utf8.allSatisfy({ (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) }) else {
            throw InvalidSettingValue("must be 10 characters of A-Z and 0-9")
        }
        return text
    }

    static let httpsURL = SettingParser<String> { text throws(InvalidSettingValue) in
        guard text.hasPrefix("https://"), text.count > "https://".count, !text.contains("?"), !text.contains("#") else {
            throw InvalidSettingValue("must be an https:// URL with no query: \(text)")
        }
        return text.hasSuffix("/") ? String(text.dropLast()) : text
    }

    static let profileList = SettingParser<PushProfiles> { text throws(InvalidSettingValue) in
        var profiles: PushProfiles = []
        for word in text.split(separator: ",", omittingEmptySubsequences: false) {
            switch word.trimmingCharacters(in: .whitespaces) {
            case "mytty": profiles.insert(.mytty)
            case "iterm2": profiles.insert(.iterm2)
            default: throw InvalidSettingValue("expected mytty, iterm2 or mytty,iterm2: \(text)")
            }
        }
        return profiles
    }
}

/// The client-facing profiles a push relay serves (push.md §1).
public struct PushProfiles: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: Int
    public init(rawValue: Int) { self.rawValue = rawValue }

    /// Profile M: the Mytty push relay (`/v1/register`, `/v1/push`).
    public static let mytty = PushProfiles(rawValue: 1)
    /// Profile I: the iTerm2 push relay (`/register`, `/push`, `/push/mutable`).
    public static let iterm2 = PushProfiles(rawValue: 2)

    public var description: String {
        [contains(.mytty) ? "mytty" : nil, contains(.iterm2) ? "iterm2" : nil].compactMap { $0 }.joined(separator: ",")
    }
}
