import Foundation
import Glibc

/// Clocks and process readings the scenarios take: CLOCK_MONOTONIC (the event loops' clock, so
/// a send and a receive in this process compare directly), CPU time, RSS and descriptor limits.
enum Measure {
    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) &* 1_000_000_000 &+ UInt64(ts.tv_nsec)
    }

    static func seconds(_ nanoseconds: UInt64) -> Double { Double(nanoseconds) / 1e9 }

    /// This process's user + system time (ns), and that of the children it has waited for
    /// (`verify`'s openssl): what `run` subtracts from the machine's busy time.
    static func ownCPU() -> UInt64 {
        [RUSAGE_SELF, RUSAGE_CHILDREN].reduce(0) { total, who in
            var usage = rusage()
            getrusage(__rusage_who_t(who.rawValue), &usage)
            return [usage.ru_utime, usage.ru_stime].reduce(total) { $0 + UInt64($1.tv_sec) * 1_000_000_000 + UInt64($1.tv_usec) * 1_000 }
        }
    }

    static var ticksPerSecond: UInt64 { UInt64(max(1, sysconf(Int32(_SC_CLK_TCK)))) }

    /// Another process's CPU time (ns): its threads' run time from /proc/PID/task/*/schedstat,
    /// to the nanosecond (an idle server's CPU over half a minute is a few clock ticks, which
    /// /proc/PID/stat counts in 10 ms steps), else user + system from /proc/PID/stat; nil once
    /// it is gone.
    static func cpu(of pid: Int32) -> UInt64? {
        if let tasks = try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task") {
            var total: UInt64 = 0, read = 0
            for task in tasks {
                guard let line = try? String(contentsOfFile: "/proc/\(pid)/task/\(task)/schedstat", encoding: .utf8),
                      let first = line.split(separator: " ").first, let ns = UInt64(first) else { continue }
                total += ns
                read += 1
            }
            if read > 0 { return total }
        }
        return ticksCPU(of: pid)
    }

    private static func ticksCPU(of pid: Int32) -> UInt64? {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let end = stat.lastIndex(of: ")") else { return nil }
        // The command name may hold spaces; utime and stime are the 12th and 13th fields after it.
        let after = stat[stat.index(after: end)...].split(separator: " ")
        guard after.count > 12, let user = UInt64(after[11]), let system = UInt64(after[12]) else { return nil }
        return (user + system) * 1_000_000_000 / ticksPerSecond
    }

    /// Busy time of every CPU together (ns, /proc/stat): what the machine did besides the two
    /// processes under test is this minus theirs.
    static func machineBusy() -> UInt64? {
        guard let stat = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let total = stat.split(separator: "\n").first(where: { $0.hasPrefix("cpu ") }) else { return nil }
        let ticks = total.split(separator: " ").dropFirst().compactMap { UInt64($0) }
        guard ticks.count >= 8 else { return nil }
        // user nice system [idle iowait] irq softirq steal
        return (ticks[0] + ticks[1] + ticks[2] + ticks[5] + ticks[6] + ticks[7]) * 1_000_000_000 / ticksPerSecond
    }

    /// VmRSS of `pid` in bytes (the kernel reports KiB).
    static func rss(of pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kib = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return nil }
        return kib * 1024
    }

    /// The soft descriptor limit raised to the hard one (10,000 idle clients are 10,000
    /// sockets here and as many in a server this process starts, which inherits the limit).
    @discardableResult
    static func raiseDescriptorLimit() -> Int {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        let soft = limit.rlim_cur
        limit.rlim_cur = limit.rlim_max
        return Int(clamping: setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 ? limit.rlim_max : soft)
    }
}

/// Nearest-rank order statistics of nanosecond samples, reported in microseconds.
struct Distribution {
    let sorted: [UInt64]

    init(_ samples: [UInt64]) { sorted = samples.sorted() }

    func quantile(_ q: Double) -> UInt64? {
        guard !sorted.isEmpty else { return nil }
        let rank = Int((q * Double(sorted.count)).rounded(.up)) - 1
        return sorted[min(sorted.count - 1, max(0, rank))]
    }

    var microseconds: JSON {
        var object = JSON.object([("n", .int(sorted.count))])
        for (name, q) in [("p50", 0.5), ("p90", 0.9), ("p99", 0.99), ("p99.9", 0.999), ("max", 1.0)] {
            object[name] = quantile(q).map { .number(Double($0) / 1e3, digits: 1) } ?? .null
        }
        return object
    }
}
