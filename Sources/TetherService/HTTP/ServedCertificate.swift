import Synchronization
import TetherCrypto

/// The expiry of the certificate this process serves, for `tether_tls_certificate_expiry_timestamp_seconds`:
/// set when the listener starts, on each SIGHUP reload and each ACME installation. One per
/// process, since a process runs one service.
enum ServedCertificate {
    private static let expiry = Atomic<Int64>(0)

    /// Seconds since the Unix epoch; 0 while nothing with TLS is served.
    static var notAfter: Int64 { expiry.load(ordering: .relaxed) }

    /// Reads the leaf of the PEM chain at `path`; leaves the figure as it was when it cannot.
    static func record(certificateChainPath path: String) {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
              let leaf = (try? Certificate.chain(pemRepresentation: text))?.first else { return }
        expiry.store(leaf.notAfter, ordering: .relaxed)
    }
}

/// ACME outcomes in this process, for `tether_acme_issuances_total{outcome}`.
enum ACMEOutcomes {
    static let successes = Atomic<UInt64>(0)
    static let failures = Atomic<UInt64>(0)
}
