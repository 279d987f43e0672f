import TetherRelay
import XCTest

final class RelayMetricsTests: XCTestCase {
    private func lines(_ metrics: RelayMetrics, _ occupancy: RelayMetrics.Occupancy = .init(), sockets: Int = 0) -> [String] {
        metrics.render(occupancy: occupancy, socketsLive: sockets).split(separator: "\n").map(String.init)
    }

    func testPreRegisteredCountersComeFirstAtZeroAndLazyOnesStayHidden() {
        let samples = lines(RelayMetrics()).filter { !$0.hasPrefix("#") }
        XCTAssertEqual(Array(samples.prefix(5)), ["relay_quota_exceeded_total 0", "relay_phone_no_mac_total 0",
                                                  "relay_ws_keepalive_terminated_total 0", "relay_metrics_push_errors_total 0",
                                                  "relay_process_exceptions_total 0"])
        XCTAssertFalse(samples.contains { $0.hasPrefix("relay_http_requests_total") || $0.hasPrefix("relay_ws_upgrades") || $0.hasPrefix("relay_http_errors_total") })
    }

    func testEverySeriesHasHelpAndTypeLines() {
        let metrics = RelayMetrics()
        metrics.httpRequest()
        metrics.upgradeRejected(.gate)
        let all = lines(metrics)
        for name in ["quota_exceeded_total", "http_requests_total", "ws_upgrades_rejected_total", "rooms_neither", "socket_lifetime_seconds"] {
            XCTAssertTrue(all.contains { $0.hasPrefix("# HELP relay_\(name) ") }, name)
            XCTAssertTrue(all.contains { $0.hasPrefix("# TYPE relay_\(name) ") }, name)
        }
        XCTAssertTrue(all.contains("# TYPE relay_socket_lifetime_seconds histogram"))
        XCTAssertTrue(all.contains("# TYPE relay_rooms_live gauge"))
    }

    func testRejectionsAreLabelledAndSortedByReason() {
        let metrics = RelayMetrics()
        metrics.upgradeRejected(.total_cap)
        metrics.upgradeRejected(.gate)
        metrics.upgradeRejected(.total_cap)
        metrics.upgradeRejected(.ip_cap)
        XCTAssertEqual(lines(metrics).filter { $0.hasPrefix("relay_ws_upgrades_rejected_total") },
                       ["relay_ws_upgrades_rejected_total{reason=\"gate\"} 1", "relay_ws_upgrades_rejected_total{reason=\"ip_cap\"} 1",
                        "relay_ws_upgrades_rejected_total{reason=\"total_cap\"} 2"])
    }

    func testQuotaAndMacOfflineClosesAreCountedFromTheCloseReason() {
        let metrics = RelayMetrics()
        metrics.closed(code: 1008, reason: "daily quota exceeded")
        metrics.closed(code: 1008, reason: "mac offline")
        metrics.closed(code: 1008, reason: "bad hello")
        metrics.closed(code: 1001, reason: "quota")
        let all = lines(metrics)
        XCTAssertTrue(all.contains("relay_quota_exceeded_total 1"))
        XCTAssertTrue(all.contains("relay_phone_no_mac_total 1"))
    }

    func testLifetimeHistogramIsCumulativeWithSumAndCount() {
        let metrics = RelayMetrics()
        for ms: UInt64 in [500, 1_000, 4_000, 3_600_000] { metrics.socketLifetime(.milliseconds(ms)) }
        let buckets = lines(metrics).filter { $0.hasPrefix("relay_socket_lifetime_seconds") }
        XCTAssertEqual(buckets, [
            "relay_socket_lifetime_seconds_bucket{le=\"1\"} 2", "relay_socket_lifetime_seconds_bucket{le=\"5\"} 3",
            "relay_socket_lifetime_seconds_bucket{le=\"15\"} 3", "relay_socket_lifetime_seconds_bucket{le=\"60\"} 3",
            "relay_socket_lifetime_seconds_bucket{le=\"300\"} 3", "relay_socket_lifetime_seconds_bucket{le=\"1800\"} 3",
            "relay_socket_lifetime_seconds_bucket{le=\"+Inf\"} 4", "relay_socket_lifetime_seconds_sum 3605.5",
            "relay_socket_lifetime_seconds_count 4",
        ])
    }

    func testGaugesReportTheScrapeTimeOccupancy() {
        var occupancy = RelayMetrics.Occupancy()
        occupancy.rooms = 3
        occupancy.both = 1
        occupancy.macOnly = 2
        let all = lines(RelayMetrics(), occupancy, sockets: 4)
        for expected in ["relay_rooms_live 3", "relay_sockets_live 4", "relay_rooms_both 1", "relay_rooms_mac_only 2",
                         "relay_rooms_phone_only 0", "relay_rooms_neither 0"] {
            XCTAssertTrue(all.contains(expected), expected)
        }
    }
}
