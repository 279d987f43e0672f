import Foundation
public import TetherCrypto
public import TetherService

/// Everything `tether push` is configured with (push.md §1.1, §5), read from an env-file, the
/// environment and flags (flags win). A missing or malformed key, team id or key id refuses to
/// start with one line naming the setting; the key's text never appears in any message.
public struct PushConfiguration: Sendable, ReloadableSettings {
    /// `PUSH_HOST`: the public listener's address.
    public var host = "127.0.0.1"
    /// `PUSH_PORT`: the public listener's port.
    public var port: UInt16 = 8788
    /// `PUSH_DB`: a SQLite path, a `postgres://` URL every node shares, or `:memory:`.
    public var databasePath = "push.db"
    /// `PUSH_PROFILES`: which client protocols are served (Mytty's, iTerm2's, or both).
    public var profiles: PushProfiles = [.mytty]
    /// `APNS_TEAM_ID`: the Apple team id.
    public var teamID = ""
    /// `APNS_KEY_ID`: the `.p8` key's id.
    public var keyID = ""
    /// The provider key (never logged, never echoed).
    public var key: P256.PrivateKey?
    /// `APNS_TOPIC`: Profile M's topic, the Mytty app's bundle id.
    public var topic = "com.m-tkg.mytty.remote"
    /// `APNS_TOPIC_ITERM2`: Profile I's topic, the iTerm2 app's bundle id.
    public var topicITerm2 = "com.googlecode.iterm2.companion"
    /// `APNS_PRODUCTION_URL`, `APNS_SANDBOX_URL`: the APNs hosts.
    public var endpoints = APNsClient.Endpoints()
    /// Extra trust roots for the APNs connection (`APNS_CA_FILE`).
    public var caFile: String?
    /// Profile I `/register` requests per client IP per 60 s (0 = off).
    public var registerLimit = 10
    /// Profile M `/v1/register` requests per client IP per 60 s (0 = off). The Mytty Worker keeps
    /// none, and each registration is a row kept 180 days: unlimited, one address wrote a gigabyte
    /// an hour. A phone registers when its APNs token changes, so 60 a minute leaves room for
    /// many phones behind one carrier NAT.
    public var registerRateLimit = 60
    /// Open connections one client address may hold, heads still arriving and kept-alive ones
    /// alike: without it one address holds any number for the 30 s head deadline. Generous, as
    /// phones behind one carrier NAT share an address; off behind a trusted proxy, whose
    /// address every client shares.
    public var maxConnectionsPerIP = 256
    /// `PUSH_TRUST_PROXY`, `PUSH_TRUST_CLOUDFLARE`, `PUSH_TRUSTED_HOPS`: which header names the
    /// client's address.
    public var clientIP = ClientIPResolver()
    /// `PUSH_LOG`: verbose diagnostics (SIGUSR2 toggles them).
    public var verboseLog = false
    /// `PUSH_LOG_FORMAT`: plain, timestamp or json.
    public var logFormat = LogFormat.plain
    /// Lines below this level are not written (`debug` turns verbose diagnostics on, as `*_LOG=true`).
    public var logLevel = LogLevel.info
    /// `PUSH_ADMIN_HOST`: the admin listener's address.
    public var adminHost = "127.0.0.1"
    public var adminPort: UInt16?
    public var tlsCertificatePath: String?
    /// `PUSH_TLS_KEY`: the private key that goes with ``tlsCertificatePath``.
    public var tlsKeyPath: String?
    /// `PUSH_ACME_DOMAIN`: the certificate obtained and renewed over ACME instead of the files.
    public var acme: ACMECertificates.Configuration?

    /// The defaults of every setting; `PushSetting` reads the real ones.
    public init() {}
}

extension PushConfiguration {
    /// Reads `arguments` (`--config ENV-FILE` beneath the environment, flags on top) and
    /// `environment`; returns the configuration and start-up notes, the warnings about
    /// look-alike variables first.
    public static func load(environment: [String: String], arguments: [String],
                            readFile: (String) -> String? = SettingsTable.readTextFile) throws(SettingError) -> (PushConfiguration, [String]) {
        try PushSetting.table.configuration(arguments: arguments, environment: environment, readFile: readFile, build: build)
    }

    /// The push relay's settings table (`tether push --check` lists it with the values in effect).
    public static var settingsTable: SettingsTable { PushSetting.table }

    /// The configuration from read settings, and its start-up notes.
    public static func build(_ values: SettingValues) throws(SettingError) -> (PushConfiguration, [String]) {
        typealias S = PushSetting
        var c = PushConfiguration()
        var notes: [String] = []
        c.host = try values.value(of: S.host)
        c.port = try values.value(of: S.port)
        c.databasePath = try values.value(of: S.database)
        c.profiles = try values.value(of: S.profiles)
        guard let team = try values.value(of: S.teamID) else {
            throw SettingError(variable: "APNS_TEAM_ID", message: "required: the 10-character team id that signed the app")
        }
        guard let key = try values.value(of: S.keyID) else {
            throw SettingError(variable: "APNS_KEY_ID", message: "required: the 10-character id of the .p8 key")
        }
        c.teamID = team
        c.keyID = key
        c.key = try loadKey(values)
        c.topic = try values.value(of: S.topic)
        c.topicITerm2 = try values.value(of: S.topicITerm2)
        c.endpoints = APNsClient.Endpoints(production: try values.value(of: S.productionURL), sandbox: try values.value(of: S.sandboxURL))
        c.caFile = try values.value(of: S.caFile)
        c.registerLimit = Int(try values.value(of: S.registerLimit))
        c.registerRateLimit = Int(try values.value(of: S.registerRateLimit))
        c.maxConnectionsPerIP = Int(try values.value(of: S.maxConnectionsPerIP))
        c.clientIP = ClientIPResolver(trustCloudflare: try values.value(of: S.trustCloudflare), trustProxy: try values.value(of: S.trustProxy),
                                      trustedHops: Int(try values.value(of: S.trustedHops)))
        c.verboseLog = try values.value(of: S.log)
        c.logFormat = try values.value(of: S.logFormat)
        c.logLevel = try values.value(of: S.logLevel)
        if c.logLevel == .debug { c.verboseLog = true }
        c.adminHost = try values.value(of: S.adminHost)
        c.adminPort = try values.value(of: S.adminPort)
        c.tlsCertificatePath = try values.value(of: S.tlsCertificate)
        c.tlsKeyPath = try values.value(of: S.tlsKey)
        if (c.tlsCertificatePath == nil) != (c.tlsKeyPath == nil) {
            throw SettingError(variable: c.tlsCertificatePath == nil ? "PUSH_TLS_CERT" : "PUSH_TLS_KEY", message: "TLS needs both a certificate chain and a key")
        }
        c.acme = try S.acme.configuration(from: values, host: c.host, certificateFiles: c.tlsCertificatePath != nil)
        if c.clientIP.shouldWarnBehindProxy(boundToLoopback: isLoopback(c.host)) {
            notes.append("warning: bound to loopback without PUSH_TRUST_PROXY or PUSH_TRUST_CLOUDFLARE: behind a proxy every client shares one rate-limit bucket")
        }
        return (c, notes)
    }

    /// The key from `APNS_PRIVATE_KEY` (or `APNS_P8`), else the file of `APNS_PRIVATE_KEY_FILE`
    /// (or `APNS_P8_FILE`). An env file holds one line, so `\n` in the text reads as a newline.
    private static func loadKey(_ values: SettingValues) throws(SettingError) -> P256.PrivateKey {
        typealias S = PushSetting
        let text: String
        let variable: String
        if let inline = try values.value(of: S.privateKey) {
            text = inline.replacingOccurrences(of: "\\n", with: "\n")
            variable = values.source(of: S.privateKey.entry)?.name ?? "APNS_PRIVATE_KEY"
        } else if let path = try values.value(of: S.privateKeyFile) {
            variable = values.source(of: S.privateKeyFile.entry)?.name ?? "APNS_PRIVATE_KEY_FILE"
            guard let data = FileManager.default.contents(atPath: path), let contents = String(data: data, encoding: .utf8) else {
                throw SettingError(variable: variable, message: "cannot read \(path)")
            }
            text = contents
        } else {
            throw SettingError(variable: "APNS_PRIVATE_KEY", message: "required: the .p8 key text (or APNS_PRIVATE_KEY_FILE with its path)")
        }
        do {
            return try APNsKey.load(p8: text)
        } catch {
            throw SettingError(variable: variable, message: error.description)
        }
    }

    static func isLoopback(_ host: String) -> Bool { host == "127.0.0.1" || host == "::1" || host == "localhost" || host.hasPrefix("127.") }

    /// `tether push --help`.
    public static var helpText: String { PushSetting.table.helpText }
    /// The settings as the Markdown tables of docs/configuration.md.
    public static var markdownReference: String { PushSetting.table.markdownReference }
}
