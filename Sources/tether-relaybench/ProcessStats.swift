import Foundation
import Glibc

/// What the benchmark reads about processes: time, CPU use, and the descriptor limit.
enum ProcessStats {
    /// CLOCK_MONOTONIC in nanoseconds (the same clock as the event loops').
    static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    /// Raises the soft RLIMIT_NOFILE to the hard limit: 5,000 rooms plus 200 pair sockets need
    /// more descriptors than the usual soft limit of 1,024, on both sides. Returns the new limit.
    @discardableResult
    static func raiseDescriptorLimit() -> Int {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        return Int(clamping: limit.rlim_cur)
    }

    /// This process's user + system CPU time, in nanoseconds.
    static func ownCPU() -> UInt64 {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        func ns(_ t: timeval) -> UInt64 { UInt64(t.tv_sec) * 1_000_000_000 + UInt64(t.tv_usec) * 1_000 }
        return ns(usage.ru_utime) + ns(usage.ru_stime)
    }

    /// Another process's user + system CPU time in nanoseconds, from /proc/PID/stat (nil if gone).
    static func cpu(of pid: Int32) -> UInt64? {
        guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = text.lastIndex(of: ")") else { return nil }
        // Fields after the command name (which may hold spaces) start at field 3; utime and stime
        // are fields 14 and 15.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = UInt64(fields[11]), let system = UInt64(fields[12]) else { return nil }
        let ticks = UInt64(max(1, sysconf(Int32(_SC_CLK_TCK))))
        return (user + system) * 1_000_000_000 / ticks
    }

    /// CPU time every CPU of the machine has spent busy, in nanoseconds (from /proc/stat): the
    /// benchmark subtracts its own two processes to see what else ran beside them.
    static func machineBusy() -> UInt64? {
        guard let text = try? String(contentsOfFile: "/proc/stat", encoding: .utf8),
              let line = text.split(separator: "\n").first, line.hasPrefix("cpu ") else { return nil }
        // user nice system idle iowait irq softirq steal: everything but idle and iowait.
        let fields = line.split(separator: " ").dropFirst().compactMap { UInt64($0) }
        guard fields.count >= 8 else { return nil }
        let busy = fields[0] + fields[1] + fields[2] + fields[5] + fields[6] + fields[7]
        return busy * 1_000_000_000 / UInt64(max(1, sysconf(Int32(_SC_CLK_TCK))))
    }
}

/// CPU use over a window: 100 means one core busy throughout.
struct CPUWindow {
    let startWall: UInt64
    let startCPU: UInt64?
    let read: () -> UInt64?

    init(_ read: @escaping () -> UInt64?) {
        self.read = read
        startWall = ProcessStats.now()
        startCPU = read()
    }

    /// Percent of one core since the window began (nil if the process could not be read).
    func percent() -> Double? {
        guard let startCPU, let end = read() else { return nil }
        let wall = ProcessStats.now() - startWall
        return wall == 0 ? nil : Double(end - startCPU) / Double(wall) * 100
    }
}
