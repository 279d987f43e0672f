import TetherNet

extension RelayServer {
    /// §2.11: when both the URL and the token are set, push at start and then every
    /// `RELAY_METRICS_PUSH_MS`. Pushes are independent (not serialised, never retried); a failure
    /// only counts in `relay_metrics_push_errors_total` — no reason is logged, since a monitor's
    /// error text is not ours to put in the relay's log.
    func startMetricsPush() {
        guard let url = configuration.metricsPushURL, let token = configuration.metricsPushToken else { return }
        start(.metricsPush, every: .milliseconds(configuration.metricsPushMs), runNow: true) { $0.pushMetrics(to: url, token: token) }
    }


    private func pushMetrics(to url: String, token: String) {
        let socketsLive = self.socketsLive
        let loop = group.loops[0]
        occupancy { [metrics, clock] occupancy in
            let body = metrics.pushBody(timestamp: clock.wall(), roomsLive: occupancy.rooms, socketsLive: socketsLive)
            loop.execute {
                HTTPClient.postJSON(url, body: Array(body.utf8), headers: HTTPHeaders([("Authorization", "Bearer \(token)")]), on: loop) { result in
                    if case let .success(response) = result, (200..<300).contains(response.status) { return }
                    metrics.pushFailed()
                }
            }
        }
    }
}
