/// The release this build is: printed by `tether --version`, on every service's start-up line,
/// and exported as `tether_build_info`. One place, raised with each release.
public enum TetherVersion {
    /// The version, as `MAJOR.MINOR.PATCH`.
    public static let current = "0.5.0"
}

extension MetricsRegistry {
    /// `tether_build_info{service,version} 1`: which build a scraped process runs.
    public func registerBuildInfo(service: String) {
        gauge("tether_build_info", help: "The Tether build this process runs (always 1).", labels: ["service", "version"])
            .labels(service, TetherVersion.current).set(1)
    }
}
