import Foundation

/// `register` and `idle`: fresh identities registering (§6.1) with a number in flight, each
/// keeping its socket. `register` times them and the server's CPU over them; `idle` reads the
/// server's VmRSS before, halfway and after, the clients then sitting idle and registered.
enum RegistrationScenarios {
    static let common: [Options.Flag] = [.url, .concurrency, .init("clients", "10000", "clients to register (distinct IDs and forwarded addresses)")]
    static let registerFlags = common + [.pid("the server's process id, for its CPU use")]
    static let idleFlags = common + [
        .pid("the server's process id (required: its VmRSS is the figure)"),
        .init("settle", "2", "seconds to wait before each VmRSS reading"),
    ]

    static func register(_ arguments: [String]) -> Never {
        let options = Options("register", arguments, flags: registerFlags)
        let fleet = Fleet(url: options.string("url"), count: options.int("clients"), options: options)
        let cpu = CPUWindow(server: options.pid("pid"))
        let (registrar, start, end) = fleet.register(concurrency: options.int("concurrency"))
        let use = cpu.since()
        let registered = registrar.durations.count
        let seconds = Measure.seconds(end - start)
        var line = JSON.object([("scenario", .string("register")), ("url", .string(fleet.url)), ("clients", .int(fleet.clients.count)),
                                ("concurrency", .int(registrar.concurrency)), ("registered", .int(registered)), ("seconds", .number(seconds, digits: 3))])
        line["registrations_per_s"] = .number(Double(registered) / seconds, digits: 0)
        line["server_cpu_pct"] = .optional(use.server, digits: 1)
        // The cost of one registration on the server's core: accept, upgrade, challenge, verify,
        // directory, `registered` — whether or not the load kept the core busy.
        line["server_cpu_us_per_registration"] = .optional(use.serverSeconds.map { $0 * 1e6 / Double(max(1, registered)) }, digits: 1)
        line["registration_latency_us"] = Distribution(registrar.durations).microseconds
        line["failures"] = registrar.failureJSON
        line["load_cpu_pct"] = .number(use.load, digits: 1)
        line["load_cpu_s"] = .number(Measure.seconds(Measure.ownCPU()), digits: 2)
        line.printLine()
        fleet.closeAll()
        exit(0)
    }

    static func idle(_ arguments: [String]) -> Never {
        let options = Options("idle", arguments, flags: idleFlags)
        guard let pid = options.pid("pid") else { options.fail("--pid is required: the server's VmRSS is what this measures") }
        let count = options.int("clients")
        guard count >= 2 else { options.fail("--clients needs at least 2") }
        let fleet = Fleet(url: options.string("url"), count: count, options: options)
        let settle = options.double("settle")
        func rss() -> Int {
            guard let bytes = Measure.rss(of: pid) else { options.fail("cannot read /proc/\(pid)/status") }
            return bytes
        }
        let before = rss()
        let half = count / 2
        let first = fleet.register(0..<half, concurrency: options.int("concurrency")).registrar
        Fleet.sleep(settle)
        let middle = rss()
        let second = fleet.register(half..<count, concurrency: options.int("concurrency")).registrar
        Fleet.sleep(settle)
        let after = rss()
        let registered = first.durations.count + second.durations.count
        var failures = first.failures
        failures.merge(second.failures, uniquingKeysWith: +)
        var line = JSON.object([("scenario", .string("idle")), ("url", .string(fleet.url)), ("clients", .int(count)), ("registered", .int(registered))])
        line["rss_before_bytes"] = .int(before)
        line["rss_half_bytes"] = .int(middle)
        line["rss_after_bytes"] = .int(after)
        line["rss_per_client_bytes"] = .number(Double(after - before) / Double(max(1, registered)), digits: 0)
        // The second half alone: what one more client costs once the first half has grown the
        // server's tables and allocator arenas.
        line["rss_per_client_marginal_bytes"] = .number(Double(after - middle) / Double(max(1, second.durations.count)), digits: 0)
        line["failures"] = .counts(failures)
        line["load_cpu_s"] = .number(Measure.seconds(Measure.ownCPU()), digits: 2)
        line.printLine()
        fleet.closeAll()
        exit(0)
    }
}
