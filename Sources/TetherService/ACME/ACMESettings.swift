import Foundation

/// The ACME rows of a service's settings table, under the service's prefix (`RELAY_ACME_DOMAIN`,
/// `PUSH_ACME_DOMAIN`, `SIGNAL_ACME_DOMAIN`…), and how they read into a configuration: one set of
/// names and checks for every service that serves TLS.
public struct ACMESettings: Sendable {
    /// The service's setting prefix (`RELAY`, `PUSH`, `SIGNAL`).
    public let prefix: String
    /// `<PREFIX>_ACME_DOMAIN`: the names to obtain a certificate for; unset turns ACME off.
    public let domain: Setting<String?>
    /// `<PREFIX>_ACME_EMAIL`: the account's contact address.
    public let email: Setting<String?>
    /// `<PREFIX>_ACME_DIRECTORY`: the ACME server's directory URL.
    public let directory: Setting<String>
    /// `<PREFIX>_ACME_CA_FILE`: an extra trust root for the ACME server.
    public let caFile: Setting<String?>
    /// `<PREFIX>_ACME_DIR`: where the account key, the certificate and its key are kept.
    public let stateDirectory: Setting<String>
    /// `<PREFIX>_ACME_HTTP_PORT`: the HTTP-01 listener's port (0: TLS-ALPN-01 only).
    public let httpPort: Setting<UInt16>

    /// The ACME rows under `prefix` (`RELAY` gives `RELAY_ACME_DOMAIN`, `--acme-domain`, …).
    public init(prefix: String) {
        self.prefix = prefix
        domain = Setting<String?>("\(prefix)_ACME_DOMAIN", extraFlags: [.init("--acme-domain", needs: "a domain name")],
                                  help: "obtain and renew the TLS certificate for this name over ACME, in place of \(prefix)_TLS_CERT/KEY (comma-separated for several)")
        email = Setting<String?>("\(prefix)_ACME_EMAIL", extraFlags: [.init("--acme-email", needs: "an e-mail address")],
                                 help: "the ACME account's contact address (expiry notices)")
        directory = Setting<String>("\(prefix)_ACME_DIRECTORY", default: ACMECertificates.Configuration.letsEncrypt,
                                    extraFlags: [.init("--acme-directory", needs: "a URL")], parser: .text,
                                    help: "the ACME server's directory URL")
        caFile = Setting<String?>("\(prefix)_ACME_CA_FILE", extraFlags: [.init("--acme-ca-file", needs: "a file path")], parser: .readableFile, help: "an extra PEM trust root for the ACME server (a private or test CA)")
        stateDirectory = Setting<String>("\(prefix)_ACME_DIR", default: "acme", extraFlags: [.init("--acme-dir", needs: "a directory path")],
                                         parser: .directoryPath,
                                         help: "where the ACME account key, the certificate and its key are kept (owner-only)")
        httpPort = Setting<UInt16>("\(prefix)_ACME_HTTP_PORT", default: 80, extraFlags: [.init("--acme-http-port", needs: "a port")], parser: .port,
                                   help: "the HTTP-01 challenge listener's port, on \(prefix)_HOST (0: TLS-ALPN-01 only, on the service's port)")
    }

    /// In the order `--help` lists them.
    public var rows: [any SettingRow] { [domain, email, directory, caFile, stateDirectory, httpPort] }

    /// The ACME configuration, or nil when no domain is set. Refused beside certificate files
    /// (ACME keeps its own), for a name that is not a domain, and for a directory that is not https.
    public func configuration(from values: SettingValues, host: String, certificateFiles: Bool) throws(SettingError) -> ACMECertificates.Configuration? {
        guard let domains = try values.value(of: domain) else { return nil }
        guard !certificateFiles else {
            throw SettingError(variable: domain.entry.name, message: "ACME keeps the certificate itself: unset \(prefix)_TLS_CERT and \(prefix)_TLS_KEY")
        }
        let names = domains.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
        if let address = names.first(where: SettingParser<String>.isNumericAddress) {
            throw SettingError(variable: domain.entry.name,
                               message: "\(address) is an IP address: ACME certifies domain names only (use \(prefix)_TLS_CERT and \(prefix)_TLS_KEY for a certificate of an address)")
        }
        guard !names.isEmpty, names.allSatisfy(Self.isDomainName) else {
            throw SettingError(variable: domain.entry.name, message: "not a domain name (or a comma-separated list of them): \(domains)")
        }
        let url = try values.value(of: directory)
        guard url.hasPrefix("https://") else { throw SettingError(variable: directory.entry.name, message: "must be an https:// URL") }
        let port = try values.value(of: httpPort)
        return ACMECertificates.Configuration(domains: names, email: try values.value(of: email), directoryURL: url, caFile: try values.value(of: caFile),
                                              stateDirectory: try values.value(of: stateDirectory), httpHost: host, httpPort: port == 0 ? nil : port)
    }

    /// A DNS name a certificate may carry: dot-separated labels of letters, digits and inner
    /// hyphens, at most 253 characters (no wildcard: HTTP-01 cannot prove one), whose last label
    /// is not all digits: `192.0.2.1` is an address, for which ACME issues nothing.
    public static func isDomainName(_ name: String) -> Bool {
        let labels = name.split(separator: ".", omittingEmptySubsequences: false)
        guard let last = labels.last, !last.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return false }
        return name.utf8.count <= 253 && labels.count >= 2 && labels.allSatisfy { label in
            (1...63).contains(label.utf8.count) && label.first != "-" && label.last != "-"
                && label.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == 0x2D }
        }
    }
}
