import TetherSync
public import TetherService

/// The push relay's metrics (admin listener only, never the public port): the `pushrelay_*`
/// names of push.md §1.1 (iTerm2's self-hosted relay's), then Tether's APNs latency and outcomes.
public final class PushMetrics: Sendable {
    /// The registry every series is in (`/metrics` on the admin listener).
    public let registry = MetricsRegistry()
    /// Every request answered, and those answered with a 5xx.
    public let httpRequests: Counter
    /// `pushrelay_http_errors_total`.
    public let httpErrors: Counter
    /// Registrations asked for (both profiles), written, skipped as unchanged (Profile I), refused.
    public let registers: Counter
    /// `pushrelay_register_written_total`.
    public let registersWritten: Counter
    /// `pushrelay_register_skipped_total`.
    public let registersSkipped: Counter
    /// `pushrelay_register_rejected_total`.
    public let registersRejected: Counter
    /// Pushes asked for, delivered, refused for a bad secret or signature, for an unknown token or
    /// push id, and failed at APNs.
    public let pushes: Counter
    /// `pushrelay_push_delivered_total`.
    public let pushesDelivered: Counter
    /// `pushrelay_push_bad_secret_total`.
    public let badSecrets: Counter
    /// `pushrelay_connections_refused_total`: connections refused at accept, over the per-address
    /// cap.
    public let connectionsRefused: Counter
    /// `pushrelay_push_unknown_token_total`.
    public let unknownTokens: Counter
    /// `pushrelay_push_apns_error_total`.
    public let apnsErrors: Counter
    /// Requests refused by a rate limit.
    public let rateLimited: Counter
    /// Internal faults survived (a failing store is counted in `storageErrors` instead).
    public let processExceptions: Counter
    /// Store calls that failed (database down, disk full); each was answered 503 or 500.
    public let storageErrors: Counter
    /// 1 while the store answers, 0 from a failed call until one succeeds.
    public let storageAvailable: Gauge
    /// Live registrations of both profiles (refreshed by housekeeping).
    public let devices: Gauge
    /// APNs round trips, from the first send to the final answer (retries included).
    public let apnsLatency: Histogram
    /// APNs outcomes by reason: `delivered`, an APNs reason, `no-reason` or `unreachable`.
    public let apnsOutcomes: MetricFamily<Counter>

    /// Every series, at 0.
    public init() {
        httpRequests = registry.counter("pushrelay_http_requests_total", help: "HTTP requests answered.")
        httpErrors = registry.counter("pushrelay_http_errors_total", help: "HTTP requests answered with a 5xx status.")
        registers = registry.counter("pushrelay_register_total", help: "Registration requests.")
        registersWritten = registry.counter("pushrelay_register_written_total", help: "Registrations written.")
        registersSkipped = registry.counter("pushrelay_register_skipped_total", help: "Re-registrations skipped as unchanged.")
        registersRejected = registry.counter("pushrelay_register_rejected_total", help: "Registration requests refused (invalid, rate limited).")
        pushes = registry.counter("pushrelay_push_total", help: "Push requests.")
        pushesDelivered = registry.counter("pushrelay_push_delivered_total", help: "Pushes APNs accepted.")
        badSecrets = registry.counter("pushrelay_push_bad_secret_total", help: "Pushes refused for a bad secret or signature.")
        unknownTokens = registry.counter("pushrelay_push_unknown_token_total", help: "Pushes for no live registration.")
        apnsErrors = registry.counter("pushrelay_push_apns_error_total", help: "Pushes APNs refused or could not be reached for.")
        rateLimited = registry.counter("pushrelay_rate_limited_total", help: "Requests refused by a rate limit.")
        connectionsRefused = registry.counter("pushrelay_connections_refused_total",
                                              help: "Connections refused at accept: the client address held PUSH_MAX_CONNECTIONS_PER_IP.")
        processExceptions = registry.counter("pushrelay_process_exceptions_total", help: "Internal faults survived.")
        storageErrors = registry.counter("pushrelay_storage_errors_total", help: "Store calls that failed (database down, disk full).")
        storageAvailable = registry.gauge("pushrelay_storage_available", help: "1 while the store answers, 0 from a failed call until one succeeds.")
        storageAvailable.set(1)
        devices = registry.gauge("pushrelay_devices", help: "Live registrations, both profiles.")
        apnsLatency = registry.histogram("pushrelay_apns_latency_seconds", help: "APNs round trip per push, retries included.",
                                         buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10])
        apnsOutcomes = registry.counter("pushrelay_apns_outcomes_total", help: "APNs outcomes by reason.", labels: ["reason"])
        // Every reason is exposed from the start, at 0 (APNs' documented ones and the three words).
        for reason in ["delivered", "no-reason", "unreachable"] + APNsReason.classes.keys.sorted() { _ = apnsOutcomes.labels(reason) }
    }

    /// Gauges read at scrape time from their owners.
    func register(storageBacklog: @escaping @Sendable () -> Int, apnsConnections: @escaping @Sendable () -> Int,
                  tokensMinted: @escaping @Sendable () -> Int, droppedLogLines: @escaping @Sendable () -> Int) {
        registry.registerBuildInfo(service: "push")
        registry.registerProcessMetrics()
        registry.gauge("pushrelay_store_backlog", help: "Storage calls queued and not yet finished.") { Int64(storageBacklog()) }
        registry.counter("pushrelay_apns_connections_opened_total", help: "HTTP/2 connections opened to APNs.") { UInt64(apnsConnections()) }
        registry.counter("pushrelay_apns_provider_tokens_minted_total", help: "Provider tokens signed.") { UInt64(tokensMinted()) }
        registry.counter("pushrelay_log_lines_dropped_total", help: "Log lines dropped because standard error was too slow.") {
            UInt64(droppedLogLines())
        }
    }

    /// Every finished APNs delivery. Reason labels are APNs' documented reasons or one of three
    /// words, so a misbehaving upstream cannot grow the label set without bound.
    func apnsFinished(_ outcome: APNsOutcome, latency: Duration) {
        apnsLatency.observe(latency.secondsDouble)
        let label: String
        switch outcome {
        case .delivered: label = "delivered"
        case let .rejected(_, reason?, _, _) where APNsReason.classes[reason] != nil: label = reason
        case .rejected: label = "no-reason"
        case .unreachable: label = "unreachable"
        }
        apnsOutcomes.labels(label).increment()
    }

    /// Counts an answer.
    func answered(_ status: Int) {
        httpRequests.increment()
        if status >= 500 { httpErrors.increment() }
    }
}
