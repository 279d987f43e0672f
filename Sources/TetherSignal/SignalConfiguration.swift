import Foundation
public import TetherNet
public import TetherService

/// Everything `tether signal` is configured with (signaling.md §13, §13.1), from an env-file, the
/// environment and flags (flags win). A mode without its required settings refuses to start
/// with one line naming the setting; secrets never appear in any message.
public struct SignalConfiguration: Sendable, ReloadableSettings {
    /// `SIGNAL_HOST`: the public listener's address.
    public var host = "127.0.0.1"
    /// `SIGNAL_PORT`: the public listener's port.
    public var port: UInt16 = 8791
    /// `SIGNAL_ALLOWED_ORIGINS`: the exact `Origin` values allowed to upgrade; empty refuses every
    /// `Origin`.
    public var allowedOrigins: Set<String> = []
    /// `SIGNAL_MAX_SOCKETS`: sockets in all; more are refused 503 `capacity`.
    public var maxSockets = 100_000
    /// Signals per connection per 10 s (§6.4); 0 lifts the limit (load tests).
    public var signalRateLimit = 50
    /// The kernel's send buffer per socket. Messages are at most 64 KiB and most are a few
    /// hundred bytes, so 64 KiB (the kernel doubles it) carries any burst; a socket that never
    /// reads backs up after about that much of its own `error` replies, instead of the few MiB
    /// autotuning allows (1,000 such sockets kept the loop busy for a minute, and starved everyone).
    public var sendBufferBytes: Int? = 64 * 1024
    /// `SIGNAL_TRUST_PROXY`, `SIGNAL_TRUST_CLOUDFLARE`, `SIGNAL_TRUSTED_HOPS`: which header names
    /// the client's address.
    public var clientIP = ClientIPResolver()
    /// `TURN_MODE`: how TURN credentials are issued (coturn, cloudflare or none).
    public var turnMode = TURNMode.none
    /// coturn's `static-auth-secret` (never logged).
    public var turnSecret: String?
    /// `TURN_URLS`: the `turn:`/`turns:` URLs handed out (coturn mode).
    public var turnURLs: [String] = []
    /// `STUN_URLS`: the `stun:` URLs handed out (coturn and none modes).
    public var stunURLs: [String] = []
    /// `CLOUDFLARE_TURN_KEY_ID`: the Cloudflare TURN key's id (cloudflare mode).
    public var cloudflareKeyID: String?
    /// The Cloudflare TURN key's API token (never logged, never returned).
    public var cloudflareToken: String?
    /// `CLOUDFLARE_TURN_API_URL`: the Cloudflare API's base URL.
    public var cloudflareURL = "https://rtc.live.cloudflare.com"
    /// `CLOUDFLARE_CA_FILE`: an extra trust root for the Cloudflare API.
    public var cloudflareCAFile: String?
    /// `SIGNAL_LOG`: verbose diagnostics (SIGUSR2 toggles them).
    public var verboseLog = false
    /// `SIGNAL_LOG_FORMAT`: plain, timestamp or json.
    public var logFormat = LogFormat.plain
    /// Lines below this level are not written (`debug` turns verbose diagnostics on, as `*_LOG=true`).
    public var logLevel = LogLevel.info
    /// `SIGNAL_ADMIN_HOST`: the admin listener's address.
    public var adminHost = "127.0.0.1"
    public var adminPort: UInt16?
    public var tlsCertificatePath: String?
    /// `SIGNAL_TLS_KEY`: the private key that goes with ``tlsCertificatePath``.
    public var tlsKeyPath: String?
    /// `SIGNAL_ACME_DOMAIN`: the certificate obtained and renewed over ACME instead of the files.
    public var acme: ACMECertificates.Configuration?
    /// `--local`: loopback only, `TURN_MODE=none`, for trying it out.
    public var local = false
    /// Several nodes (SIGNAL_DB): the shared registry, this node's cluster address and listener,
    /// and the secret node-to-node connections present.
    public var database: String?
    /// `SIGNAL_NODE_URL`: where the other nodes reach this node's cluster listener
    /// (`ws://host:port/cluster`).
    public var nodeURL: String?
    /// `SIGNAL_CLUSTER_HOST`: the cluster listener's address (keep it on the internal network).
    public var clusterHost = "127.0.0.1"
    /// `SIGNAL_CLUSTER_PORT`: the cluster listener's port.
    public var clusterPort: UInt16?
    /// Never logged.
    public var clusterSecret: String?
    /// `SIGNAL_LEASE_TTL_MS`: a node not renewing its lease for this long frees its IDs.
    public var leaseTTLms: Int64 = 10_000

    /// The defaults of every setting; `SignalSetting` reads the real ones.
    public init() {}

    /// Reads `arguments` (`--config ENV-FILE` beneath the environment, flags on top) and
    /// `environment`; returns the configuration and start-up notes, the warnings about
    /// look-alike variables first.
    public static func load(environment: [String: String], arguments: [String],
                            readFile: (String) -> String? = SettingsTable.readTextFile) throws(SettingError) -> (SignalConfiguration, [String]) {
        try SignalSetting.table.configuration(arguments: arguments, environment: environment, readFile: readFile, build: build)
    }

    /// The signaling server's settings table (`tether signal --check` lists it with the values
    /// in effect).
    public static var settingsTable: SettingsTable { SignalSetting.table }

    /// The configuration from read settings, and its start-up notes.
    public static func build(_ values: SettingValues) throws(SettingError) -> (SignalConfiguration, [String]) {
        typealias S = SignalSetting
        var c = SignalConfiguration()
        var notes: [String] = []
        c.local = values.isOn(S.local)
        c.host = try values.value(of: S.host)
        c.port = try values.value(of: S.port)
        c.allowedOrigins = Set(try values.value(of: S.allowedOrigins))
        c.maxSockets = Int(try values.value(of: S.maxSockets))
        c.signalRateLimit = Int(clamping: try values.value(of: S.signalRateLimit))
        c.clientIP = ClientIPResolver(trustCloudflare: try values.value(of: S.trustCloudflare), trustProxy: try values.value(of: S.trustProxy),
                                      trustedHops: Int(try values.value(of: S.trustedHops)))
        c.turnMode = try values.value(of: S.turnMode)
        c.turnSecret = try values.value(of: S.turnSecret)
        c.turnURLs = try values.value(of: S.turnURLs)
        c.stunURLs = try values.value(of: S.stunURLs)
        c.cloudflareKeyID = try values.value(of: S.cloudflareKeyID)
        c.cloudflareToken = try values.value(of: S.cloudflareToken)
        c.cloudflareURL = try values.value(of: S.cloudflareURL)
        c.cloudflareCAFile = try values.value(of: S.cloudflareCAFile)
        c.verboseLog = try values.value(of: S.log)
        c.logFormat = try values.value(of: S.logFormat)
        c.logLevel = try values.value(of: S.logLevel)
        if c.logLevel == .debug { c.verboseLog = true }
        c.adminHost = try values.value(of: S.adminHost)
        c.adminPort = try values.value(of: S.adminPort)
        c.tlsCertificatePath = try values.value(of: S.tlsCertificate)
        c.tlsKeyPath = try values.value(of: S.tlsKey)
        c.database = try values.value(of: S.database).flatMap { $0.isEmpty ? nil : $0 }
        c.nodeURL = try values.value(of: S.nodeURL)
        c.clusterHost = try values.value(of: S.clusterHost)
        c.clusterPort = try values.value(of: S.clusterPort)
        c.clusterSecret = try values.value(of: S.clusterSecret)
        c.leaseTTLms = try values.value(of: S.leaseTTL)
        if let database = c.database {
            guard database.hasPrefix("postgres://") || database.hasPrefix("postgresql://") else {
                throw SettingError(variable: "SIGNAL_DB", message: "expected a postgres:// URL (the signaling server keeps nothing on disk)")
            }
            guard let url = c.nodeURL, url.hasPrefix("ws://") || url.hasPrefix("wss://"), url.hasSuffix("/cluster") else {
                throw SettingError(variable: "SIGNAL_NODE_URL", message: "required with SIGNAL_DB: ws://host:port/cluster where the other nodes reach this one")
            }
            guard c.clusterPort != nil else { throw SettingError(variable: "SIGNAL_CLUSTER_PORT", message: "required with SIGNAL_DB") }
            guard (c.clusterSecret?.utf8.count ?? 0) >= 32 else {
                throw SettingError(variable: "SIGNAL_CLUSTER_SECRET", message: "required with SIGNAL_DB: at least 32 characters, the same on every node")
            }
        }
        if c.local {
            // Trying it out: loopback, and no TURN whatever the environment says.
            if !["127.0.0.1", "::1"].contains(c.host) { c.host = "127.0.0.1" }
            c.turnMode = .none
        }
        switch c.turnMode {
        case .coturn:
            guard c.turnSecret?.isEmpty == false else { throw SettingError(variable: "TURN_SECRET", message: "required in coturn mode: coturn's static-auth-secret") }
            guard !c.turnURLs.isEmpty else { throw SettingError(variable: "TURN_URLS", message: "required in coturn mode: the turn:/turns: URLs clients use") }
        case .cloudflare:
            guard c.cloudflareKeyID?.isEmpty == false else { throw SettingError(variable: "CLOUDFLARE_TURN_KEY_ID", message: "required in cloudflare mode") }
            guard c.cloudflareToken?.isEmpty == false else { throw SettingError(variable: "CLOUDFLARE_TURN_API_TOKEN", message: "required in cloudflare mode") }
        case .none:
            break
        }
        if (c.tlsCertificatePath == nil) != (c.tlsKeyPath == nil) {
            throw SettingError(variable: c.tlsCertificatePath == nil ? "SIGNAL_TLS_CERT" : "SIGNAL_TLS_KEY", message: "TLS needs both a certificate chain and a key")
        }
        c.acme = try S.acme.configuration(from: values, host: c.host, certificateFiles: c.tlsCertificatePath != nil)
        if c.clientIP.shouldWarnBehindProxy(boundToLoopback: c.host == "127.0.0.1" || c.host == "::1") && !c.local {
            notes.append("warning: bound to loopback without SIGNAL_TRUST_PROXY or SIGNAL_TRUST_CLOUDFLARE: behind a proxy every client shares one per-IP limit")
        }
        return (c, notes)
    }

    /// The issuer the mode calls for.
    public func issuer(loops: [EventLoop]) throws -> any TURNIssuer {
        switch turnMode {
        case .none: return STUNOnlyIssuer(stunURLs: stunURLs)
        case .coturn: return CoturnIssuer(secret: turnSecret ?? "", turnURLs: turnURLs, stunURLs: stunURLs)
        case .cloudflare:
            let tls = cloudflareURL.hasPrefix("https:") ? try TLSClientContext(extraRootsFile: cloudflareCAFile) : nil
            return CloudflareIssuer(baseURL: cloudflareURL, keyID: cloudflareKeyID ?? "", token: cloudflareToken ?? "", tls: tls, loops: loops)
        }
    }

    /// `tether signal --help`.
    public static var helpText: String { SignalSetting.table.helpText }
    /// The settings as the Markdown tables of docs/configuration.md.
    public static var markdownReference: String { SignalSetting.table.markdownReference }
}
