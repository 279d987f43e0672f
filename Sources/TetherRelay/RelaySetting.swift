import Foundation
import TetherCrypto
public import TetherService
import TetherStore

/// The relay's settings table (relay.md §7.1): the reference relay's environment names, so its
/// `/etc/iterm2-companion-relay.env` works unchanged, each also a flag (`--relay-max-rooms`) and a
/// config-file key. `--help`, docs/configuration.md's reference and start-up errors all come
/// from here; `RelayConfiguration.load` reads the rows.
public enum RelaySetting {
    /// The table, in the order `--help` lists it.
    public static let table = SettingsTable(
        command: "tether relay", synopsis: "[--local] [--tls-cert FILE --tls-key FILE]", switches: [local],
        rows: [host, port, database, origin, attestationRequired, appID, appAttestEnvironment, appAttestRootPEM,
               dailyByteQuota, establishedIdleTTL, log, logLevel, logFormat, trustProxy, trustCloudflare, trustedHops, maxRooms,
               maxSocketsPerIP, maxTotalSockets, keepalive, wsRateLimit, wsRateWindow, attestRateLimit, attestRateWindow, maxFramesPerSecond,
               stallTimeout, publicMetrics, metricsPushURL, metricsPushToken, metricsPushInterval, adminHost, adminPort, shardMap, leaseTTL,
               nodeURL, clusterHost, clusterPort, clusterSecret,
               tlsCertificate, tlsKey] + acme.rows)

    /// Every setting's documented half (name, flag, default, help).
    public static var all: [SettingEntry] { table.entries }

    static let local = SettingSwitch("--local", help: "newcomer mode: loopback only, open admission, origin http://127.0.0.1:<port>")

    static let host = Setting<String>("RELAY_HOST", default: "127.0.0.1", parser: .ipAddress, help: "bind address")
    static let port = Setting<UInt16>("RELAY_PORT", default: 8787, fallbacks: ["PORT"], parser: .port,
                                      help: "port (PORT is read when RELAY_PORT is unset)")
    static let database = Setting<String>("RELAY_DB", default: "relay.db", parser: .databaseLocation, help: "SQLite database path, or a postgres:// URL every node shares (:memory: for none)")
    static let origin = Setting<String?>("RELAY_ORIGIN", defaultText: "(required)",
                                         help: "public origin clients connect to, exactly as in their pairing links, e.g. https://relay.example.com")
    static let attestationRequired = Setting<Bool>("ATTEST_REQUIRED", default: true, defaultText: "required", parser: .trueOrFalse,
                                                   help: "App Attest for pairing phones: true or false (open mode); any other value stops start-up")
    static let appID = Setting<String?>("APP_ID", defaultText: "(required with attestation)",
                                        help: "team id + bundle id, e.g. H7V7XYVQ7D.com.googlecode.iterm2.companion")
    /// True for `development`.
    static let appAttestEnvironment = Setting<Bool>("APPATTEST_ENV", default: false, defaultText: "production",
                                                    parser: .oneOf([("production", false), ("development", true)]),
                                                    help: "production or development")
    static let appAttestRootPEM = Setting<String?>("APPATTEST_ROOT_PEM", default: nil, defaultText: "(Apple's root)",
                                                   parser: pemCertificate, help: "App Attest root CA, PEM text")
    static let dailyByteQuota = Setting<Int64>("RELAY_DAILY_BYTE_QUOTA", default: 536_870_912, parser: .positiveInteger,
                                               help: "bytes a room may relay per 24 h")
    static let leaseTTL = Setting<Int64>("RELAY_LEASE_TTL_MS", default: 10_000,
                                         parser: .atLeast(LeaseRules.minimumTTLms, why: "three renewals, so one late renewal never costs a live node its buckets"),
                                         help: "with a postgres:// RELAY_DB: a node whose lease is not renewed for this long loses its buckets to the others (renewed every second)")
    static let establishedIdleTTL = Setting<Int64>("RELAY_ESTABLISHED_IDLE_TTL_MS", default: 2_592_000_000, parser: .positiveInteger,
                                                   help: "an established room unused this long is reaped")
    static let log = Setting<Bool>("RELAY_LOG", default: false, parser: .trueOrFalse, help: "verbose diagnostics iff true (SIGUSR2 toggles)")
    static let logLevel = Setting<LogLevel>("RELAY_LOG_LEVEL", default: .info, defaultText: "info", parser: .logLevel,
                                            help: "the least a line must weigh to be written: debug (as RELAY_LOG=true), info, warning or error")
    static let logFormat = Setting<LogFormat>("RELAY_LOG_FORMAT", default: .plain, defaultText: "plain", parser: .logFormat,
                                              help: "plain (the line alone, as journald expects), timestamp (RFC 3339 time and level first) or json (one object per line)")
    static let trustProxy = Setting<Bool>("RELAY_TRUST_PROXY", default: false, parser: .trueOrFalse, help: "true: key clients by X-Forwarded-For")
    static let trustCloudflare = Setting<Bool>("RELAY_TRUST_CLOUDFLARE", default: false, parser: .trueOrFalse,
                                               help: "true: key clients by CF-Connecting-IP, then X-Forwarded-For")
    static let trustedHops = Setting<Int64>("RELAY_TRUSTED_HOPS", default: 1, parser: .positiveInteger,
                                            help: "which X-Forwarded-For element, counted from the right")
    static let maxRooms = Setting<Int64>("RELAY_MAX_ROOMS", default: 200_000, parser: .countOrDefault(200_000), help: "resident rooms (0 = default)")
    static let maxSocketsPerIP = Setting<Int64>("RELAY_MAX_SOCKETS_PER_IP", default: 64, parser: .countOrDefault(64),
                                                help: "concurrent sockets per client IP (0 = default); as many connections per address may be sending their HTTP head")
    static let maxTotalSockets = Setting<Int64>("RELAY_MAX_TOTAL_SOCKETS", default: 200_000, parser: .countOrDefault(200_000),
                                                help: "concurrent sockets in all (0 = default)")
    static let keepalive = Setting<Int64>("RELAY_KEEPALIVE_MS", default: 30_000, parser: keepaliveInterval,
                                          help: "WebSocket ping sweep interval, at least 100 (0 = default)")
    static let wsRateLimit = Setting<Int64>("RELAY_WS_RATE_LIMIT", default: 120, parser: .zeroOrPositive,
                                            help: "WebSocket upgrades per IP per window (0 = off)")
    static let attestRateLimit = Setting<Int64>("RELAY_ATTEST_RATE_LIMIT", default: 30, parser: .zeroOrPositive,
                                                help: "/attest* requests per IP per window (0 = off)")
    static let wsRateWindow = Setting<Int64>("RELAY_WS_RATE_WINDOW_MS", default: 60_000, parser: .positiveInteger,
                                             help: "the window of RELAY_WS_RATE_LIMIT, in milliseconds")
    static let attestRateWindow = Setting<Int64>("RELAY_ATTEST_RATE_WINDOW_MS", default: 60_000, parser: .positiveInteger,
                                                 help: "the window of RELAY_ATTEST_RATE_LIMIT, in milliseconds")
    static let maxFramesPerSecond = Setting<Int64>("RELAY_MAX_FRAMES_PER_SEC", default: 500, parser: .zeroOrPositive,
                                                   help: "spliced frames per room per second (0 = off)")
    static let stallTimeout = Setting<Int64>("RELAY_STALL_TIMEOUT_MS", default: 60_000, parser: .positiveInteger,
                                             help: "an admitted socket that holds its peer back this long is closed 1008 write stalled")
    static let publicMetrics = Setting<Bool>("RELAY_PUBLIC_METRICS", default: true, defaultText: "true", parser: .trueOrFalse,
                                             help: "false: /metrics and /healthz only on the admin listener, not on the public port (set it behind a proxy that adds no forwarding header)")
    static let adminHost = Setting<String>("RELAY_ADMIN_HOST", default: "127.0.0.1", parser: .ipAddress,
                                           help: "admin listener address (/metrics, /healthz, /readyz; loopback peers only)")
    static let adminPort = Setting<UInt16?>("RELAY_ADMIN_PORT", default: nil, defaultText: "off", parser: .optionalPort,
                                            help: "admin listener port (unset: no admin listener)")
    static let metricsPushURL = Setting<String?>("RELAY_METRICS_PUSH_URL", help: "push metrics here (needs the token too)")
    static let metricsPushToken = Setting<String?>("RELAY_METRICS_PUSH_TOKEN", help: "bearer token for the metrics push")
    static let metricsPushInterval = Setting<Int64>("RELAY_METRICS_PUSH_MS", default: 60_000, parser: .positiveInteger, help: "metrics push interval")
    static let shardMap = Setting<String?>("RELAY_SHARD_MAP", parser: .readableFile,
                                           help: "shard map JSON file to publish at start (resolver v2; a newer one in the database wins; also `tether shardmap`)")
    static let nodeURL = Setting<String?>("RELAY_NODE_URL", defaultText: "(off: v1 links need a room-hashing load balancer)",
                                          help: "http://host:port where the other nodes reach this node's cluster listener: with a postgres:// RELAY_DB, any node serves any v1 room, passing its sockets and requests to the node that owns the room's bucket")
    static let clusterHost = Setting<String>("RELAY_CLUSTER_HOST", default: "127.0.0.1", parser: .ipAddress,
                                             help: "cluster listener address (node-to-node forwarding; keep it on the internal network)")
    static let clusterPort = Setting<UInt16?>("RELAY_CLUSTER_PORT", default: nil, defaultText: "(with RELAY_NODE_URL: required)", parser: .optionalPort,
                                              help: "cluster listener port")
    static let clusterSecret = Setting<String?>("RELAY_CLUSTER_SECRET", defaultText: "(with RELAY_NODE_URL: required)",
                                                help: "at least 32 visible ASCII characters every node shares; a node passing on a socket or request presents it (never logged)")
    static let tlsCertificate = Setting<String?>("RELAY_TLS_CERT", extraFlags: [.init("--tls-cert", needs: "a file path")], parser: .readableFile,
                                                 help: "serve TLS with this PEM chain")
    static let tlsKey = Setting<String?>("RELAY_TLS_KEY", extraFlags: [.init("--tls-key", needs: "a file path")], parser: .readableFile,
                                         help: "PEM private key for RELAY_TLS_CERT")

    static let acme = ACMESettings(prefix: "RELAY")

    /// The ping sweep: 0 is the default; under 100 ms a sweep would terminate sockets faster than
    /// a client on an ordinary link can answer its ping (1 ms closed every socket at once).
    static let keepaliveInterval = SettingParser<Int64> { text throws(InvalidSettingValue) in
        let value = try SettingParser<Int64>.countOrDefault(30_000).parse(text)
        guard value >= 100 else { throw InvalidSettingValue("must be at least 100 (milliseconds), or 0 for the default: \(text)") }
        return value
    }

    /// A PEM certificate. An env file holds one line, so the PEM's newlines may be written as
    /// `\n`; they are read back as newlines.
    static let pemCertificate = SettingParser<String?> { pem throws(InvalidSettingValue) in
        let text = pem.replacingOccurrences(of: "\\n", with: "\n")
        guard (try? Certificate(pemRepresentation: text)) != nil else { throw InvalidSettingValue("not a PEM certificate") }
        return text
    }
}
