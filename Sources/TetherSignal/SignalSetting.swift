import Foundation
public import TetherService

/// The signaling server's settings table (signaling.md §13, §13.1), each also a flag
/// (`--turn-mode`) and a config-file key; `--help`, docs/configuration.md's reference and start-up errors
/// come from here. Secrets (`TURN_SECRET`, `CLOUDFLARE_TURN_API_TOKEN`) are never echoed.
public enum SignalSetting {
    /// Every setting of `tether signal`, in the order `--help` lists them.
    public static let table = SettingsTable(
        command: "tether signal", synopsis: "[--local] [--tls-cert FILE --tls-key FILE]", switches: [local],
        rows: [host, port, allowedOrigins, maxSockets, signalRateLimit, trustProxy, trustCloudflare, trustedHops, turnMode, turnSecret, turnURLs,
               stunURLs, cloudflareKeyID, cloudflareToken, cloudflareURL, cloudflareCAFile, log, logLevel, logFormat, adminHost, adminPort,
               tlsCertificate, tlsKey, database, nodeURL, clusterHost, clusterPort, clusterSecret, leaseTTL] + acme.rows)

    /// Every setting's documented half (name, flag, default, help).
    public static var all: [SettingEntry] { table.entries }

    static let database = Setting<String?>("SIGNAL_DB", defaultText: "(none: one node, state in RAM)",
                                           help: "postgres:// URL several nodes share: live IDs are unique across them and signals reach any node")
    static let nodeURL = Setting<String?>("SIGNAL_NODE_URL", defaultText: "(with SIGNAL_DB: required)",
                                          help: "ws://host:port/cluster where the other nodes reach this node's cluster listener")
    static let clusterHost = Setting<String>("SIGNAL_CLUSTER_HOST", default: "127.0.0.1", parser: .ipAddress,
                                             help: "cluster listener address (node-to-node forwarding; keep it on the internal network)")
    static let clusterPort = Setting<UInt16?>("SIGNAL_CLUSTER_PORT", default: nil, defaultText: "(with SIGNAL_DB: required)", parser: .optionalPort,
                                              help: "cluster listener port")
    static let clusterSecret = Setting<String?>("SIGNAL_CLUSTER_SECRET", defaultText: "(with SIGNAL_DB: required)",
                                                help: "at least 32 characters every node shares; a node's cluster connection presents it (never logged)")
    static let leaseTTL = Setting<Int64>("SIGNAL_LEASE_TTL_MS", default: 10_000, parser: .positiveInteger,
                                         help: "with SIGNAL_DB: a node not renewing its lease (every second) for this long frees its IDs")
    static let local = SettingSwitch("--local", help: "try it out: loopback only, TURN_MODE=none")

    static let host = Setting<String>("SIGNAL_HOST", default: "127.0.0.1", parser: .ipAddress, help: "bind address")
    static let port = Setting<UInt16>("SIGNAL_PORT", default: 8791, parser: .port, help: "port")
    static let allowedOrigins = Setting<[String]>("SIGNAL_ALLOWED_ORIGINS", default: [], defaultText: "(none)", parser: list,
                                                  help: "comma-separated exact Origin values allowed to upgrade; empty refuses every Origin")
    static let maxSockets = Setting<Int64>("SIGNAL_MAX_SOCKETS", default: 100_000, parser: .positiveInteger,
                                           help: "total sockets; more are refused 503 capacity")
    /// §6.4's 50 per 10 s is the protocol's; a load test needs far more from one connection.
    static let signalRateLimit = Setting<Int64>("SIGNAL_SIGNAL_RATE_LIMIT", default: 50, parser: .zeroOrPositive,
                                                help: "signals per connection per 10 s (0 = unlimited, for load tests only)")
    static let trustProxy = Setting<Bool>("SIGNAL_TRUST_PROXY", default: false, parser: .trueOrFalse, help: "true: key clients by X-Forwarded-For")
    static let trustCloudflare = Setting<Bool>("SIGNAL_TRUST_CLOUDFLARE", default: false, parser: .trueOrFalse,
                                               help: "true: key clients by CF-Connecting-IP, then X-Forwarded-For")
    static let trustedHops = Setting<Int64>("SIGNAL_TRUSTED_HOPS", default: 1, parser: .positiveInteger,
                                            help: "which X-Forwarded-For element, counted from the right")
    static let turnMode = Setting<TURNMode>("TURN_MODE", default: .none, defaultText: "none", parser: mode,
                                            help: "coturn, cloudflare or none: how TURN credentials are issued")
    static let turnSecret = Setting<String?>("TURN_SECRET", defaultText: "(coturn mode: required)",
                                             help: "coturn static-auth-secret (never logged)")
    static let turnURLs = Setting<[String]>("TURN_URLS", default: [], defaultText: "(coturn mode: required)", parser: urlList(["turn", "turns"]),
                                            help: "comma-separated turn:/turns: URLs (coturn mode)")
    static let stunURLs = Setting<[String]>("STUN_URLS", default: [], defaultText: "(none)", parser: urlList(["stun", "stuns"]),
                                            help: "comma-separated stun: URLs (coturn and none modes)")
    static let cloudflareKeyID = Setting<String?>("CLOUDFLARE_TURN_KEY_ID", defaultText: "(cloudflare mode: required)",
                                                  help: "Cloudflare TURN key id")
    static let cloudflareToken = Setting<String?>("CLOUDFLARE_TURN_API_TOKEN", defaultText: "(cloudflare mode: required)",
                                                  help: "Cloudflare TURN key API token (never logged, never returned)")
    static let cloudflareURL = Setting<String>("CLOUDFLARE_TURN_API_URL", default: "https://rtc.live.cloudflare.com", parser: apiURL,
                                               help: "base URL of the Cloudflare API; http: only for loopback hosts")
    static let cloudflareCAFile = Setting<String?>("CLOUDFLARE_CA_FILE", defaultText: "(system roots only)", parser: .readableFile,
                                                   help: "extra PEM trust root for the Cloudflare API, in addition to the system roots")
    static let log = Setting<Bool>("SIGNAL_LOG", default: false, parser: .trueOrFalse, help: "verbose diagnostics iff true (SIGUSR2 toggles)")
    static let logLevel = Setting<LogLevel>("SIGNAL_LOG_LEVEL", default: .info, defaultText: "info", parser: .logLevel,
                                            help: "the least a line must weigh to be written: debug (as SIGNAL_LOG=true), info, warning or error")
    static let logFormat = Setting<LogFormat>("SIGNAL_LOG_FORMAT", default: .plain, defaultText: "plain", parser: .logFormat,
                                              help: "plain (the line alone, as journald expects), timestamp (RFC 3339 time and level first) or json (one object per line)")
    static let adminHost = Setting<String>("SIGNAL_ADMIN_HOST", default: "127.0.0.1", parser: .ipAddress,
                                           help: "admin listener address (/metrics, /healthz, /readyz; loopback peers only)")
    static let adminPort = Setting<UInt16?>("SIGNAL_ADMIN_PORT", default: nil, defaultText: "off", parser: .optionalPort,
                                            help: "admin listener port (unset: no admin listener)")
    static let tlsCertificate = Setting<String?>("SIGNAL_TLS_CERT", extraFlags: [.init("--tls-cert", needs: "a file path")], parser: .readableFile,
                                                 help: "serve TLS with this PEM chain")
    static let acme = ACMESettings(prefix: "SIGNAL")
    static let tlsKey = Setting<String?>("SIGNAL_TLS_KEY", extraFlags: [.init("--tls-key", needs: "a file path")], parser: .readableFile,
                                         help: "PEM private key for SIGNAL_TLS_CERT")

    /// A §13.1 list: comma-separated, each element trimmed, empty elements ignored.
    static func elements(_ text: String) -> [String] {
        text.split(separator: ",", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }
    }

    static let list = SettingParser<[String]> { text throws(InvalidSettingValue) in elements(text) }

    /// A list of ICE server URLs whose schemes are among `schemes` (RFC 7064/7065 `scheme:host…`).
    static func urlList(_ schemes: Set<String>) -> SettingParser<[String]> {
        SettingParser { text throws(InvalidSettingValue) in
            let urls = elements(text)
            for url in urls {
                guard let colon = url.firstIndex(of: ":"), schemes.contains(String(url[..<colon])), url.index(after: colon) < url.endIndex,
                      !url.contains(" ") else {
                    throw InvalidSettingValue("expected \(schemes.sorted().map { $0 + ":" }.joined(separator: " or ")) URLs: \(url)")
                }
            }
            return urls
        }
    }

    static let mode = SettingParser<TURNMode> { text throws(InvalidSettingValue) in
        guard let mode = TURNMode(rawValue: text) else { throw InvalidSettingValue("expected coturn, cloudflare or none: \(text)") }
        return mode
    }

    /// `https://host[:port]`, or `http://` for a loopback host; no path, query or fragment.
    static let apiURL = SettingParser<String> { text throws(InvalidSettingValue) in
        let trimmed = text.hasSuffix("/") ? String(text.dropLast()) : text
        guard let url = URLComponents(string: trimmed), let scheme = url.scheme, let host = url.host, !host.isEmpty,
              url.path.isEmpty, url.query == nil, url.fragment == nil, url.user == nil else {
            throw InvalidSettingValue("must be an https:// origin with no path or query: \(text)")
        }
        let loopback = host == "127.0.0.1" || host == "localhost" || host == "[::1]" || host == "::1"
        guard scheme == "https" || (scheme == "http" && loopback) else {
            throw InvalidSettingValue("must be https:// (http:// only for a loopback host): \(text)")
        }
        return trimmed
    }
}

/// How registrations get TURN credentials (signaling.md §8.1).
public enum TURNMode: String, Sendable, Hashable {
    /// coturn REST credentials (HMAC-SHA1 over a shared secret), §8.2.
    case coturn
    /// Cloudflare's `generate-ice-servers`, §8.3.
    case cloudflare
    /// No TURN: the STUN URLs only. For local tests.
    case none
}
