import Dispatch
import Synchronization
import TetherService
import XCTest

final class MetricsRegistryTests: XCTestCase {
    func testEverySeriesHasHelpAndTypeLinesInRegistrationOrder() {
        let registry = MetricsRegistry()
        registry.counter("b_total", help: "Bees.").increment(by: 3)
        registry.gauge("a_live", help: "Ayes.").set(-2)
        XCTAssertEqual(registry.render(), """
        # HELP b_total Bees.
        # TYPE b_total counter
        b_total 3
        # HELP a_live Ayes.
        # TYPE a_live gauge
        a_live -2

        """)
    }

    func testLabelledChildrenAreSortedByLabelValuesAndEscaped() {
        let registry = MetricsRegistry()
        let family = registry.counter("refused_total", help: "Refusals by reason.", labels: ["reason", "via"])
        family.labels("total_cap", "ws").increment()
        family.labels("gate", "http").increment(by: 2)
        family.labels("a\\b\"c\nd", "x").increment()
        XCTAssertEqual(registry.render().split(separator: "\n").filter { !$0.hasPrefix("#") }, [
            #"refused_total{reason="a\\b\"c\nd",via="x"} 1"#,
            #"refused_total{reason="gate",via="http"} 2"#,
            #"refused_total{reason="total_cap",via="ws"} 1"#,
        ])
        XCTAssertTrue(family.labels("gate", "http") === family.labels("gate", "http"), "a child is made once")
    }

    func testHelpTextEscapesBackslashAndNewlineButNotQuotes() {
        let registry = MetricsRegistry()
        registry.counter("x_total", help: "A \"quoted\" \\ path\nsecond line")
        XCTAssertTrue(registry.render().hasPrefix(#"# HELP x_total A "quoted" \\ path\nsecond line"# + "\n"))
    }

    func testSeriesHiddenAtZeroAppearOnceTheyCountAndAnEmptyFamilyIsLeftOutWhole() {
        let registry = MetricsRegistry()
        let lazy = registry.counter("lazy_total", help: "Lazy.", hiddenAtZero: true)
        let reasons = registry.counter("reasons_total", help: "By reason.", labels: ["reason"], hiddenAtZero: true)
        let gate = reasons.labels("gate")
        _ = reasons.labels("ip_cap")
        XCTAssertEqual(registry.render(), "")
        lazy.increment()
        gate.increment()
        XCTAssertEqual(registry.render(), """
        # HELP lazy_total Lazy.
        # TYPE lazy_total counter
        lazy_total 1
        # HELP reasons_total By reason.
        # TYPE reasons_total counter
        reasons_total{reason="gate"} 1

        """)
    }

    func testCallbackMetricsAreReadAtEachScrapeOutsideTheRegistryLock() {
        let registry = MetricsRegistry()
        let rooms = Atomic<Int64>(0)
        registry.gauge("rooms_live", help: "Rooms.") { rooms.load(ordering: .relaxed) }
        registry.gauge("ratio", help: "A ratio.") { 0.25 }
        registry.counter("log_lines_dropped_total", help: "Dropped.") {
            // Registering from inside a scrape would deadlock if the scrape held the lock.
            registry.counter("late_\(rooms.load(ordering: .relaxed))_total", help: "Late.")
            return 7
        }
        rooms.store(3, ordering: .relaxed)
        let first = registry.render()
        XCTAssertTrue(first.contains("\nrooms_live 3\n"), first)
        XCTAssertTrue(first.contains("\nratio 0.25\n"), first)
        XCTAssertTrue(first.contains("# TYPE log_lines_dropped_total counter\nlog_lines_dropped_total 7\n"), first)
        rooms.store(4, ordering: .relaxed)
        XCTAssertTrue(registry.render().contains("\nrooms_live 4\n"))
    }

    func testAHistogramIsCumulativeWithLeLastAndSumAndCount() {
        let registry = MetricsRegistry()
        let latency = registry.histogram("latency_seconds", help: "Latency.", labels: ["route"], buckets: [0.005, 1, 2.5])
        for value in [0.001, 0.005, 0.5, 3, 100] { latency.labels("/x").observe(value) }
        XCTAssertEqual(registry.render().split(separator: "\n").filter { !$0.hasPrefix("#") }, [
            #"latency_seconds_bucket{route="/x",le="0.005"} 2"#,
            #"latency_seconds_bucket{route="/x",le="1"} 3"#,
            #"latency_seconds_bucket{route="/x",le="2.5"} 3"#,
            #"latency_seconds_bucket{route="/x",le="+Inf"} 5"#,
            #"latency_seconds_sum{route="/x"} 103.506"#,
            #"latency_seconds_count{route="/x"} 5"#,
        ])
        XCTAssertTrue(registry.render().contains("# TYPE latency_seconds histogram\n"))
    }

    func testAnEmptyHistogramStillExposesEveryBucket() {
        let registry = MetricsRegistry()
        registry.histogram("life_seconds", help: "Life.", buckets: [1, 5])
        XCTAssertTrue(registry.render().hasSuffix("""
        life_seconds_bucket{le="1"} 0
        life_seconds_bucket{le="5"} 0
        life_seconds_bucket{le="+Inf"} 0
        life_seconds_sum 0.0
        life_seconds_count 0

        """))
    }

    func testNumbersUseTheFormatsOwnSpellings() {
        XCTAssertEqual(Prometheus.format(.infinity), "+Inf")
        XCTAssertEqual(Prometheus.format(-.infinity), "-Inf")
        XCTAssertEqual(Prometheus.format(.nan), "NaN")
        XCTAssertEqual(Prometheus.format(3605.5), "3605.5")
        XCTAssertEqual(Prometheus.format(0.00001), "1e-05")
        XCTAssertEqual(Prometheus.formatBound(1800), "1800")
        XCTAssertEqual(Prometheus.formatBound(0.25), "0.25")
    }

    func testNamesFollowTheFormatsGrammar() {
        XCTAssertTrue(Prometheus.isValidMetricName("relay_ws:upgrades_total"))
        XCTAssertFalse(Prometheus.isValidMetricName("2fast"))
        XCTAssertFalse(Prometheus.isValidMetricName("a-b"))
        XCTAssertFalse(Prometheus.isValidMetricName(""))
        XCTAssertTrue(Prometheus.isValidLabelName("reason"))
        XCTAssertFalse(Prometheus.isValidLabelName("__name"))
        XCTAssertFalse(Prometheus.isValidLabelName("a:b"))
    }

    func testIncrementsFromManyThreadsAreAllCounted() {
        let registry = MetricsRegistry()
        let counter = registry.counter("hits_total", help: "Hits.")
        let gauge = registry.gauge("level", help: "Level.")
        let histogram = registry.histogram("sizes", help: "Sizes.", buckets: [1])
        DispatchQueue.concurrentPerform(iterations: 4) { _ in
            for _ in 0..<50_000 {
                counter.increment()
                gauge.increment()
                gauge.decrement(by: 2)
                histogram.observe(0.5)
            }
        }
        XCTAssertEqual(counter.value, 200_000)
        XCTAssertEqual(gauge.value, -200_000)
        XCTAssertEqual(histogram.count, 200_000)
        XCTAssertEqual(histogram.sum, 100_000)
    }
}
