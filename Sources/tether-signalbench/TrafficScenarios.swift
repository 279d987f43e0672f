import Foundation
import TetherNet

/// `signals` and `latency`: 1,000 registered clients in a ring (`Ring`), closed loop for the
/// forwarding rate, open loop at a fixed offered rate for the latency. The server must run with
/// `SIGNAL_SIGNAL_RATE_LIMIT=0`: §6.4's 50 signals per 10 s per connection would cap 1,000
/// clients at 5,000 signals/s.
enum TrafficScenarios {
    static let common: [Options.Flag] = [
        .url, .pid("the server's process id, for its CPU use"), .concurrency,
        .init("clients", "1000", "registered clients, each signalling the next"),
        .init("seconds", "5", "measured seconds"),
        .init("warmup", "1", "seconds of load before the measurement"),
        .init("envelopes", "4", "pre-signed envelopes per sender, each with its own call UUID"),
    ]

    static let signalsFlags = common + [.init("window", "1000", "signals in flight (closed loop)")]
    static let latencyFlags = common + [
        .init("rate", "20000", "offered signals per second (open loop)"),
        .init("drain", "30", "seconds to wait after the last send for what is still in flight"),
    ]

    /// The clients registered and the ring signed, or the run stops.
    static func prepare(_ options: Options) -> (Fleet, Ring, JSON) {
        let count = options.int("clients")
        guard count >= 2 else { options.fail("--clients needs at least 2 for a ring") }
        let fleet = Fleet(url: options.string("url"), count: count, options: options)
        let ring = Ring(fleet.clients, envelopesPerSender: options.int("envelopes"))
        let (registrar, _, _) = fleet.register(concurrency: options.int("concurrency"))
        guard registrar.failureCount == 0 else {
            options.fail("\(registrar.failureCount) of \(count) clients did not register: \(registrar.failureJSON.text)")
        }
        let base = JSON.object([("url", .string(fleet.url)), ("clients", .int(count)), ("body_bytes", .int(Ring.body.count))])
        return (fleet, ring, base)
    }

    static func signals(_ arguments: [String]) -> Never {
        let options = Options("signals", arguments, flags: signalsFlags)
        let (fleet, ring, base) = prepare(options)
        let pid = options.pid("pid")
        let window = options.int("window")
        fleet.onLoop { ring.startClosedLoop(window: window) }
        Fleet.sleep(options.double("warmup"))
        let cpu = CPUWindow(server: pid)
        let (start, before) = fleet.onLoop {
            ring.recordFrom = Measure.now()
            return (ring.recordFrom, ring.delivered)
        }
        Fleet.sleep(options.double("seconds"))
        let (end, after) = fleet.onLoop {
            ring.recordUntil = Measure.now()
            return (ring.recordUntil, ring.delivered)
        }
        let use = cpu.since()
        fleet.onLoop { ring.stop() }
        let undelivered = drain(fleet, ring, seconds: 10)
        let forwarded = after - before
        let rate = Double(forwarded) / Measure.seconds(end - start)
        var line = base
        line["scenario"] = .string("signals")
        line["window"] = .int(window)
        line["seconds"] = .number(Measure.seconds(end - start), digits: 2)
        line["forwarded"] = .int(forwarded)
        line["forwarded_per_s"] = .number(rate, digits: 0)
        line["server_cpu_pct"] = .optional(use.server, digits: 1)
        // What one fully busy core would forward: the figure that does not depend on whether
        // the load generator kept the server saturated.
        line["forwarded_per_server_cpu_s"] = .optional(use.serverSeconds.map { Double(forwarded) / $0 }, digits: 0)
        line["load_cpu_pct"] = .number(use.load, digits: 1)
        line["latency_us_closed_loop"] = Distribution(fleet.onLoop { ring.latencies }).microseconds
        finish(fleet, ring, line, undelivered: undelivered)
    }

    static func latency(_ arguments: [String]) -> Never {
        let options = Options("latency", arguments, flags: latencyFlags)
        let (fleet, ring, base) = prepare(options)
        let pid = options.pid("pid")
        let rate = options.double("rate")
        guard rate > 0 else { options.fail("--rate must be above 0") }
        let warmup = UInt64(options.double("warmup") * 1e9), seconds = UInt64(options.double("seconds") * 1e9)
        let start = Measure.now()
        let (from, until) = (start + warmup, start + warmup + seconds)
        fleet.onLoop {
            ring.recordFrom = from
            ring.recordUntil = until
            ring.startOpenLoop(rate: rate, until: until)
        }
        Fleet.sleep(until: from)
        let cpu = CPUWindow(server: pid)
        let (sentBefore, deliveredBefore) = fleet.onLoop { (ring.sent, ring.delivered) }
        Fleet.sleep(until: until)
        let (sentAfter, deliveredAfter) = fleet.onLoop { (ring.sent, ring.delivered) }
        let use = cpu.since()
        let elapsed = Measure.seconds(Measure.now() - from)
        let undelivered = drain(fleet, ring, seconds: options.double("drain"))
        let (recorded, lag, delivered, span) = fleet.onLoop { (ring.latencies, ring.pacingLag, ring.delivered, ring.lastDeliveredAt &- ring.firstSentAt) }
        var line = base
        line["scenario"] = .string("latency")
        line["offered_per_s"] = .number(rate, digits: 0)
        line["seconds"] = .number(Measure.seconds(seconds), digits: 2)
        line["sent_per_s"] = .number(Double(sentAfter - sentBefore) / elapsed, digits: 0)
        line["forwarded_per_s"] = .number(Double(deliveredAfter - deliveredBefore) / elapsed, digits: 0)
        // From the first send to the last delivery, drain included: above the rate seen during
        // the sends when the server holds its output back while it works through a backlog.
        line["forwarded_per_s_with_drain"] = .number(Double(delivered) / Measure.seconds(max(1, span)), digits: 0)
        // Signals still in flight at the end of the drain never arrived: with any, the
        // percentiles above their share are unknown, so a p99 is given only while they are
        // under 1% of the measured signals.
        let latency = Distribution(recorded)
        line["latency_us"] = latency.microseconds
        line["latency_p99_ms"] = undelivered * 100 < max(1, recorded.count)
            ? .optional(latency.quantile(0.99).map { Double($0) / 1e6 }, digits: 3) : .null
        line["pacing_lag_us"] = Distribution(lag).microseconds
        line["server_cpu_pct"] = .optional(use.server, digits: 1)
        line["load_cpu_pct"] = .number(use.load, digits: 1)
        finish(fleet, ring, line, undelivered: undelivered)
    }

    /// Waits up to `seconds` for every signal in flight to arrive or be answered; returns how
    /// many did not.
    static func drain(_ fleet: Fleet, _ ring: Ring, seconds: Double) -> Int {
        let deadline = Measure.now() + UInt64(seconds * 1e9)
        var outstanding = fleet.onLoop { ring.outstanding }
        while outstanding > 0, Measure.now() < deadline {
            Fleet.sleep(0.05)
            outstanding = fleet.onLoop { ring.outstanding }
        }
        return outstanding
    }

    static func finish(_ fleet: Fleet, _ ring: Ring, _ line: JSON, undelivered: Int) -> Never {
        var line = line
        let (errors, lost, mismatched, sent, gap) = fleet.onLoop { (ring.errorJSON, ring.lostJSON, ring.mismatched, ring.sent, ring.longestGap) }
        line["longest_delivery_gap_ms"] = .number(Double(gap) / 1e6, digits: 2)
        line["sent"] = .int(sent)
        line["undelivered"] = .int(undelivered)
        line["mismatched"] = .int(mismatched)
        line["errors"] = errors
        line["lost"] = lost
        line["load_cpu_s"] = .number(Measure.seconds(Measure.ownCPU()), digits: 2)
        line.printLine()
        fleet.closeAll()
        exit(0)
    }
}
