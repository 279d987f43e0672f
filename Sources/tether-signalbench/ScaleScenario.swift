import Foundation

/// `scale` (issue 34, run by `scripts/bench-scale` at growing sizes): one server holding
/// `--clients` registered idle clients, and what they cost it. While they are held:
///
/// - `rss_per_client_bytes`: the server's VmRSS growth per client over its idle start after a
///   warm-up (50 clients registered, signalling and gone: code paths touched once and first
///   allocations are not a client's cost); `rss_per_client_cold_bytes` counts from before it;
/// - `idle_cpu_us_per_s_per_1k`: the server's CPU while only they exist (over `--idle` seconds,
///   one keepalive round included), per second and per 1,000 clients;
/// - `registration_us`: one registration at a time from `--fresh` new clients beside them, from
///   the TCP connect to `registered`, and `register_answer_us` from the challenge to
///   `registered` (the server's part: the connect's port search on this side grows with the
///   connections one source address holds); the whole crowd's, with `--concurrency` in flight,
///   is reported too;
/// - `forwarding_us`: a ring of `--probe-clients` signalling at `--probe-rate` for
///   `--probe-seconds` (open loop, as `latency`).
///
/// The JSON line is printed, flushed, and only then are the clients closed: the harness times
/// the server's close of them all from that line.
enum ScaleScenario {
    static let flags: [Options.Flag] = [
        .url, .concurrency, .pid("the server's process id (required: its VmRSS and CPU are the figures)"),
        .init("clients", "10000", "registered idle clients held"),
        .init("idle", "32", "seconds of the idle window (one 30 s keepalive round included)"),
        .init("fresh", "200", "fresh clients registered one at a time beside the crowd"),
        .init("probe-clients", "100", "clients of the forwarding ring"),
        .init("probe-rate", "1000", "offered signals/s of the forwarding ring (the server needs SIGNAL_SIGNAL_RATE_LIMIT=0)"),
        .init("probe-seconds", "5", "measured seconds of the forwarding ring"),
        .init("settle", "3", "seconds to wait after registering before reading VmRSS"),
    ]

    static func run(_ arguments: [String]) -> Never {
        let options = Options("scale", arguments, flags: flags)
        guard let pid = options.pid("pid") else { options.fail("--pid is required: the server's VmRSS and CPU are what this measures") }
        let count = options.int("clients")
        guard count >= 1 else { options.fail("--clients needs at least 1") }
        func rss() -> Int {
            guard let bytes = Measure.rss(of: pid) else { options.fail("cannot read /proc/\(pid)/status") }
            return bytes
        }
        let url = options.string("url")
        let cold = rss()
        _ = probe(url: url, clients: 50, rate: 500, seconds: 1, options: options)
        Fleet.sleep(1)
        let before = rss()
        let crowd = Fleet(url: url, count: count, options: options)
        let (registrar, start, end) = crowd.register(concurrency: options.int("concurrency"))
        guard registrar.failureCount == 0 else {
            options.fail("\(registrar.failureCount) of \(count) clients did not register: \(registrar.failureJSON.text)")
        }
        Fleet.sleep(options.double("settle"))
        let held = rss()
        let idle = CPUWindow(server: pid)
        Fleet.sleep(options.double("idle"))
        let idleUse = idle.since()

        let fresh = Fleet(url: url, count: options.int("fresh"), options: options)
        let freshRegistrar = fresh.register(concurrency: 1).registrar
        let forwarding = probe(url: url, clients: options.int("probe-clients"), rate: options.double("probe-rate"),
                               seconds: options.double("probe-seconds"), options: options)

        var line = JSON.object([("scenario", .string("scale")), ("url", .string(url)), ("clients", .int(count))])
        line["register_all_s"] = .number(Measure.seconds(end - start), digits: 2)
        line["registration_in_crowd_us"] = Distribution(registrar.durations).microseconds
        line["rss_cold_bytes"] = .int(cold)
        line["rss_before_bytes"] = .int(before)
        line["rss_held_bytes"] = .int(held)
        line["rss_per_client_bytes"] = .number(Double(held - before) / Double(count), digits: 0)
        line["rss_per_client_cold_bytes"] = .number(Double(held - cold) / Double(count), digits: 0)
        line["idle_cpu_pct"] = .optional(idleUse.server, digits: 2)
        line["idle_cpu_us_per_s_per_1k"] = .optional(idleUse.server.map { $0 / 100 * 1e6 / (Double(count) / 1000) }, digits: 1)
        line["registration_us"] = Distribution(freshRegistrar.durations).microseconds
        line["register_answer_us"] = Distribution(freshRegistrar.answerDurations).microseconds
        line["registration_failures"] = freshRegistrar.failureJSON
        line["forwarding_us"] = forwarding.latency
        line["forwarding_undelivered"] = .int(forwarding.undelivered)
        line["load_cpu_s"] = .number(Measure.seconds(Measure.ownCPU()), digits: 2)
        line.printLine()
        fresh.closeAll()
        crowd.closeAll()
        exit(0)
    }

    /// The ring's open-loop latency, its clients closed afterwards.
    private static func probe(url: String, clients: Int, rate: Double, seconds: Double, options: Options) -> (latency: JSON, undelivered: Int) {
        let fleet = Fleet(url: url, count: max(2, clients), options: options)
        let ring = Ring(fleet.clients, envelopesPerSender: 4)
        let (registrar, _, _) = fleet.register(concurrency: options.int("concurrency"))
        guard registrar.failureCount == 0 else { options.fail("the forwarding ring did not register: \(registrar.failureJSON.text)") }
        let start = Measure.now()
        let (from, until) = (start + 1_000_000_000, start + 1_000_000_000 + UInt64(seconds * 1e9))
        fleet.onLoop {
            ring.recordFrom = from
            ring.recordUntil = until
            ring.startOpenLoop(rate: rate, until: until)
        }
        Fleet.sleep(until: until)
        let undelivered = TrafficScenarios.drain(fleet, ring, seconds: 10)
        let latency = Distribution(fleet.onLoop { ring.latencies }).microseconds
        fleet.closeAll()
        return (latency, undelivered)
    }
}
