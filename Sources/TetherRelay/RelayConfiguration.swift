import Foundation
public import TetherService
public import TetherWire

/// Everything `tether relay` is configured with (relay.md §7.1), read from an env-file, the
/// environment and command-line flags (in that order of precedence, lowest first) under the
/// reference relay's names, so `/etc/iterm2-companion-relay.env` works unchanged.
///
/// Tether is stricter than the reference where a wrong value would silently weaken or break the
/// relay: an invalid value stops start-up with a message naming the variable.
public struct RelayConfiguration: Sendable, Equatable, ReloadableSettings {
    /// `RELAY_HOST`: the public listener's address.
    public var host = "127.0.0.1"
    /// `RELAY_PORT` (or `PORT`): the public listener's port.
    public var port: UInt16 = 8787
    /// `RELAY_DB`: a SQLite path, a `postgres://` URL every node shares, or `:memory:`.
    public var databasePath = "relay.db"
    /// Attestation mode unless `ATTEST_REQUIRED` is exactly `false`.
    public var attestationRequired = true
    /// `APP_ID`: the team and bundle id App Attest binds (required in attestation mode).
    public var appID: String?
    /// `APPATTEST_ENV=development`: accept development App Attest keys instead of production ones.
    public var appAttestDevelopment = false
    /// `APPATTEST_ROOT_PEM`: the App Attest root to trust instead of Apple's (a software
    /// attester's, for tests).
    public var appAttestRootPEM: String?
    /// The public origin bound into every signature and attestation (used verbatim).
    public var origin = ""
    /// `RELAY_DAILY_BYTE_QUOTA`: bytes a room may relay per 24 h.
    public var dailyByteQuota: Int64 = 536_870_912
    /// `RELAY_ESTABLISHED_IDLE_TTL_MS`: an established room unused this long is reaped.
    public var establishedIdleTTLms: Int64 = 2_592_000_000
    /// Shard failover (relay.md §8): how long a node's lease lives without a renewal.
    public var leaseTTLms: Int64 = 10_000
    /// `RELAY_LOG`: verbose diagnostics (SIGUSR2 toggles them).
    public var verboseLog = false
    /// `RELAY_LOG_FORMAT`: plain, timestamp or json.
    public var logFormat = LogFormat.plain
    /// Lines below this level are not written (`debug` turns verbose diagnostics on, as `*_LOG=true`).
    public var logLevel = LogLevel.info
    /// `RELAY_TRUST_PROXY`, `RELAY_TRUST_CLOUDFLARE`, `RELAY_TRUSTED_HOPS`: which header names the
    /// client's address.
    public var clientIP = ClientIPResolver()
    /// `RELAY_MAX_ROOMS`: resident rooms at most.
    public var maxRooms = 200_000
    /// `RELAY_MAX_SOCKETS_PER_IP`: concurrent sockets per client address.
    public var maxSocketsPerIP = 64
    /// `RELAY_MAX_TOTAL_SOCKETS`: concurrent sockets in all.
    public var maxTotalSockets = 200_000
    /// `RELAY_KEEPALIVE_MS`: the WebSocket ping sweep's interval.
    public var keepaliveMs: Int64 = 30_000
    /// `RELAY_METRICS_PUSH_URL`: where to push metrics (with the token); nil pushes none.
    public var metricsPushURL: String?
    /// `RELAY_METRICS_PUSH_TOKEN`: the bearer token of the metrics push.
    public var metricsPushToken: String?
    /// `RELAY_METRICS_PUSH_MS`: how often metrics are pushed.
    public var metricsPushMs: Int64 = 60_000
    /// `RELAY_STALL_TIMEOUT_MS`: how long an admitted socket may hold its peer back (its queue
    /// above the high-water mark, so its peer is not read) before it is closed 1008 `write stalled`.
    public var stallTimeoutMs: Int64 = 60_000
    /// `RELAY_PUBLIC_METRICS`: `/metrics` and `/healthz` on the public port (direct loopback
    /// scrapes only, relay.md §2.10); false keeps them to the admin listener.
    public var publicMetrics = true
    /// The admin listener (`/metrics`, `/healthz`, `/readyz`), off unless a port is set.
    public var adminHost = "127.0.0.1"
    public var adminPort: UInt16?
    /// Per-IP WebSocket upgrades per `wsRateWindowMs` (0 = off).
    public var wsRateLimit = 120
    /// `RELAY_WS_RATE_WINDOW_MS`: the window of ``wsRateLimit``.
    public var wsRateWindowMs: UInt64 = 60_000
    /// Per-IP `/attest*` requests per `attestRateWindowMs` (0 = off).
    public var attestRateLimit = 30
    /// `RELAY_ATTEST_RATE_WINDOW_MS`: the window of ``attestRateLimit``.
    public var attestRateWindowMs: UInt64 = 60_000
    /// Spliced frames per room per second (0 = off).
    public var maxFramesPerSecond = 500
    public var tlsCertificatePath: String?
    /// `RELAY_TLS_KEY`: the private key that goes with ``tlsCertificatePath``.
    public var tlsKeyPath: String?
    /// `RELAY_ACME_DOMAIN`: the certificate obtained and renewed over ACME instead of the files.
    public var acme: ACMECertificates.Configuration?
    /// Newcomer mode: loopback only, open admission, a local http origin.
    public var local = false
    /// `--local` without `RELAY_ORIGIN`: the origin is the bound address (`localOrigin`), so it
    /// must follow the port once a port of 0 has been given one.
    public var originFollowsBinding = false

    /// `RELAY_SHARD_MAP`: a map to publish to the shared store at start-up (§8).
    public var shardMap: ShardMap?
    /// `RELAY_NODE_URL` and its listener: any node serves any v1 room, passing it to its owner.
    public var cluster: RelayClusterSettings?

    /// The defaults of every setting; `RelaySetting` reads the real ones.
    public init() {}
}

/// How the nodes of a v1 cluster reach each other (`RELAY_NODE_URL`, `RELAY_CLUSTER_*`).
public struct RelayClusterSettings: Sendable, Equatable {
    /// This node's name in the shard map and leases: the authority of `RELAY_NODE_URL`.
    public var node: String
    /// `RELAY_CLUSTER_HOST`: the cluster listener's address (keep it on the internal network).
    public var host = "127.0.0.1"
    /// `RELAY_CLUSTER_PORT`: the cluster listener's port.
    public var port: UInt16 = 0
    /// Presented on every connection a node opens to another (`RELAY_CLUSTER_SECRET`).
    public var secret: [UInt8]

    /// The cluster settings of node `node`, listening on `host`:`port`, presenting `secret`.
    public init(node: String, host: String = "127.0.0.1", port: UInt16 = 0, secret: [UInt8]) {
        self.node = node
        self.host = host
        self.port = port
        self.secret = secret
    }

    /// `http://10.0.0.11:8788` → `10.0.0.11:8788`; nil unless it is a plain http URL with an
    /// explicit port and nothing after the authority, spelled as a map host must be.
    static func node(fromURL url: String) -> String? {
        guard url.hasPrefix("http://") else { return nil }
        var authority = String(url.dropFirst("http://".count))
        if authority.hasSuffix("/") { authority.removeLast() }
        guard ShardMap.isBareAuthority(authority), let colon = authority.lastIndex(of: ":"),
              UInt16(authority[authority.index(after: colon)...]).map({ $0 > 0 }) == true else { return nil }
        return authority
    }
}

/// A setting that stops start-up, named so the operator can fix it (the chassis's error: every
/// service words its start-up errors alike).
public typealias RelayConfigurationError = SettingError

/// relay.md §2.4's client-IP derivation, now the chassis's; named here too because
/// `RelayConfiguration.clientIP` is one.
public typealias ClientIPResolver = TetherService.ClientIPResolver

extension RelayConfiguration {
    /// Reads `arguments` (`--config ENV-FILE` beneath the environment, flags on top) and
    /// `environment`. Returns the configuration and the start-up notes to print, the warnings
    /// about look-alike variables first.
    public static func load(environment: [String: String], arguments: [String],
                            readFile: (String) -> String? = SettingsTable.readTextFile) throws(RelayConfigurationError) -> (RelayConfiguration, [String]) {
        try RelaySetting.table.configuration(arguments: arguments, environment: environment, readFile: readFile, build: build)
    }

    /// The relay's settings table (`tether relay --check` lists it with the values in effect).
    public static var settingsTable: SettingsTable { RelaySetting.table }

    /// The settings read in the order their errors are reported (which the table's order, made
    /// for reading, is not): one value at a time, then the checks that span several.
    public static func build(_ values: SettingValues) throws(RelayConfigurationError) -> (RelayConfiguration, [String]) {
        typealias S = RelaySetting
        var c = RelayConfiguration()
        var notes: [String] = []
        let local = values.isOn(S.local)
        c.local = local
        c.host = try values.value(of: S.host)
        c.port = try values.value(of: S.port)
        c.databasePath = try values.value(of: S.database)
        c.attestationRequired = try values.value(of: S.attestationRequired)
        c.appID = try values.value(of: S.appID)
        c.appAttestDevelopment = try values.value(of: S.appAttestEnvironment)
        c.appAttestRootPEM = try values.value(of: S.appAttestRootPEM)
        c.dailyByteQuota = try values.value(of: S.dailyByteQuota)
        c.establishedIdleTTLms = try values.value(of: S.establishedIdleTTL)
        c.leaseTTLms = try values.value(of: S.leaseTTL)
        c.verboseLog = try values.value(of: S.log)
        c.logFormat = try values.value(of: S.logFormat)
        c.logLevel = try values.value(of: S.logLevel)
        if c.logLevel == .debug { c.verboseLog = true }
        c.clientIP = ClientIPResolver(trustCloudflare: try values.value(of: S.trustCloudflare),
                                      trustProxy: try values.value(of: S.trustProxy),
                                      trustedHops: Int(try values.value(of: S.trustedHops)))
        c.maxRooms = Int(try values.value(of: S.maxRooms))
        c.maxSocketsPerIP = Int(try values.value(of: S.maxSocketsPerIP))
        c.maxTotalSockets = Int(try values.value(of: S.maxTotalSockets))
        c.keepaliveMs = try values.value(of: S.keepalive)
        c.wsRateLimit = Int(try values.value(of: S.wsRateLimit))
        c.attestRateLimit = Int(try values.value(of: S.attestRateLimit))
        c.wsRateWindowMs = UInt64(try values.value(of: S.wsRateWindow))
        c.attestRateWindowMs = UInt64(try values.value(of: S.attestRateWindow))
        c.maxFramesPerSecond = Int(try values.value(of: S.maxFramesPerSecond))
        c.metricsPushURL = try values.value(of: S.metricsPushURL)
        c.metricsPushToken = try values.value(of: S.metricsPushToken)
        c.metricsPushMs = try values.value(of: S.metricsPushInterval)
        c.stallTimeoutMs = try values.value(of: S.stallTimeout)
        c.publicMetrics = try values.value(of: S.publicMetrics)
        c.adminHost = try values.value(of: S.adminHost)
        c.adminPort = try values.value(of: S.adminPort)
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
        c.tlsCertificatePath = try values.value(of: S.tlsCertificate)
        c.tlsKeyPath = try values.value(of: S.tlsKey)
        if (c.tlsCertificatePath == nil) != (c.tlsKeyPath == nil) {
            throw .init(variable: c.tlsCertificatePath == nil ? "RELAY_TLS_CERT" : "RELAY_TLS_KEY", message: "TLS needs both a certificate chain and a key")
        }
        c.acme = try S.acme.configuration(from: values, host: c.host, certificateFiles: c.tlsCertificatePath != nil)

        let origin = try values.value(of: S.origin)
        if local {
            guard isLoopback(c.host) else { throw .init(variable: "RELAY_HOST", message: "--local binds loopback only, not \(c.host)") }
            c.attestationRequired = false
            c.origin = origin ?? localOrigin(host: c.host, port: c.port, tls: c.servesTLS)
            c.originFollowsBinding = origin == nil
            if c.port != 0 { notes.append("local mode: listening on \(c.host.contains(":") ? "[\(c.host)]" : c.host):\(c.port) only, open admission (no App Attest), origin \(c.origin), database \(c.databasePath) in the working directory") }
        } else {
            guard let origin else {
                throw .init(variable: "RELAY_ORIGIN", message: "required: the public https origin clients connect to (or run with --local)")
            }
            // Bound into signatures verbatim, so it must already be in canonical form.
            guard RelayOrigin.canonicalize(origin) == origin else {
                throw .init(variable: "RELAY_ORIGIN", message: "must be a bare https origin such as https://relay.example.com (no path, query, user or trailing slash): \(origin)")
            }
            c.origin = origin
            if let acme = c.acme, let host = RelayOrigin.host(of: origin), !acme.domains.contains(host) {
                notes.append("warning: RELAY_ACME_DOMAIN (\(acme.domains.joined(separator: ","))) does not name RELAY_ORIGIN's host \(host): clients connecting to \(origin) will be refused the certificate")
            }
            if c.attestationRequired, c.appID == nil {
                throw .init(variable: "APP_ID", message: "required in attestation mode (set ATTEST_REQUIRED=false for open mode)")
            }
        }
        c.cluster = try clusterSettings(values, database: c.databasePath)
        if let path = try values.value(of: S.shardMap) {
            c.shardMap = try loadShardMap(path)
            let host = c.cluster?.node ?? ShardOwnershipHost.of(origin: c.origin)
            if let map = c.shardMap, !map.hosts.contains(host) {
                notes.append(c.cluster == nil
                    ? "warning: RELAY_SHARD_MAP gives this node (\(host), from RELAY_ORIGIN) no bucket: it will answer 421 for every room"
                    : "warning: RELAY_SHARD_MAP gives this node (\(host), from RELAY_NODE_URL) no bucket: it will pass every room to its owner")
            }
        }
        if c.clientIP.shouldWarnBehindProxy(boundToLoopback: isLoopback(c.host)), !local {
            notes.append("warning: bound to loopback without RELAY_TRUST_PROXY or RELAY_TRUST_CLOUDFLARE: behind a proxy every client shares one rate-limit bucket")
        }
        return (c, notes)
    }

    /// `RELAY_NODE_URL` and the listener and secret it needs; nil when it is not set.
    private static func clusterSettings(_ values: SettingValues, database: String) throws(RelayConfigurationError) -> RelayClusterSettings? {
        typealias S = RelaySetting
        guard let url = try values.value(of: S.nodeURL) else { return nil }
        guard let node = RelayClusterSettings.node(fromURL: url) else {
            throw .init(variable: "RELAY_NODE_URL", message: "expected http://host:port (lowercase, an explicit port, nothing after it) where the other nodes reach this node's cluster listener: \(url)")
        }
        guard database.hasPrefix("postgres://") || database.hasPrefix("postgresql://") else {
            throw .init(variable: "RELAY_DB", message: "RELAY_NODE_URL needs a postgres:// URL every node shares (the shard map and leases live there)")
        }
        guard let port = try values.value(of: S.clusterPort) else { throw .init(variable: "RELAY_CLUSTER_PORT", message: "required with RELAY_NODE_URL") }
        // It travels as a header value: visible ASCII only, so nothing in it can end the field.
        guard let secret = try values.value(of: S.clusterSecret), secret.utf8.count >= 32, secret.utf8.allSatisfy({ (0x21...0x7e).contains($0) }) else {
            throw .init(variable: "RELAY_CLUSTER_SECRET", message: "required with RELAY_NODE_URL: at least 32 visible ASCII characters (no spaces), the same on every node")
        }
        return RelayClusterSettings(node: node, host: try values.value(of: S.clusterHost), port: port, secret: Array(secret.utf8))
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

    /// Whether the relay serves TLS itself, from certificate files or from ACME.
    public var servesTLS: Bool { tlsCertificatePath != nil || acme != nil }

    /// The origin clients reach a `--local` relay at: its bound address, an IPv6 one bracketed,
    /// `https` when it serves TLS itself (the Mac's pairing link then names the scheme the relay
    /// really speaks).
    public static func localOrigin(host: String, port: UInt16, tls: Bool = false) -> String {
        (tls ? "https://" : "http://") + (host.contains(":") ? "[\(host)]" : host) + ":\(port)"
    }

    /// The configuration once the relay's port is known (a `--relay-port 0` given one by the
    /// kernel): a derived origin follows it, since every signature binds the origin.
    public func bound(to port: UInt16) -> RelayConfiguration {
        var bound = self
        bound.port = port
        if originFollowsBinding { bound.origin = Self.localOrigin(host: host, port: port, tls: servesTLS) }
        return bound
    }

    /// Parses an env-file (systemd `EnvironmentFile` syntax: `NAME=value`, `#` comments,
    /// optional surrounding quotes).
    public static func parseEnvironmentFile(_ text: String) -> [String: String] { EnvironmentFile.parse(text) }

    /// `tether relay --help`, generated from the settings table.
    public static var helpText: String { RelaySetting.table.helpText }

    /// `tether relay --help-markdown`: docs/configuration.md's reference, from the same table.
    public static var markdownReference: String { RelaySetting.table.markdownReference }
}
