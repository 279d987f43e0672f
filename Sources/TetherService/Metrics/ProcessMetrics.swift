import Glibc
import TetherNet
import TetherSync

extension MetricsRegistry {
    /// The process's own figures, read at each scrape under Prometheus' usual `process_*` names,
    /// and the TLS handshakes it refused: what an operator graphs beside the service's own.
    public func registerProcessMetrics() {
        gauge("process_resident_memory_bytes", help: "Resident memory (RSS) of the process, bytes.") { ProcessFigures.residentBytes() }
        gauge("process_open_fds", help: "Open file descriptors of the process.") { ProcessFigures.openDescriptors() }
        gauge("process_max_fds", help: "The process's descriptor limit (RLIMIT_NOFILE, soft).") { ProcessFigures.descriptorLimit() }
        let started = Double(WallInstant.now().unixMilliseconds) / 1000
        gauge("process_start_time_seconds", help: "When the service started, seconds since the Unix epoch.", readDouble: { started })
        secondsCounter("process_cpu_seconds_total", help: "CPU time the process has used, user and system, seconds.") { ProcessFigures.cpuSeconds() }
        gauge("tether_tls_certificate_expiry_timestamp_seconds",
              help: "When the TLS certificate the service serves expires, seconds since the Unix epoch (0 without TLS); alert well before it.") {
            ServedCertificate.notAfter
        }
        counter("tether_acme_issuances_total", help: "ACME certificate issuances and renewals by outcome (success, failure); a failure is retried with back-off.",
                label: "outcome", readings: [("failure", { ACMEOutcomes.failures.load(ordering: .relaxed) }),
                                             ("success", { ACMEOutcomes.successes.load(ordering: .relaxed) })])
        counter("tether_tls_handshake_failures_total",
                help: "TLS handshakes the service refused or that failed (no shared protocol or cipher, a malformed hello, an acme-tls/1 offer with no challenge pending); counted, never logged with the peer.") {
            UInt64(TLSServerContext.handshakeFailures.value)
        }
    }
}

/// Read from /proc at scrape time: nothing to keep in step.
public enum ProcessFigures {
    /// User plus system CPU time of every thread of the process (`getrusage`).
    static func cpuSeconds() -> Double {
        var usage = rusage()
        guard getrusage(RUSAGE_SELF.rawValue, &usage) == 0 else { return 0 }
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return seconds(usage.ru_utime) + seconds(usage.ru_stime)
    }

    /// The second field of /proc/self/statm (resident pages) times the page size.
    static func residentBytes() -> Int64 {
        guard let file = fopen("/proc/self/statm", "r") else { return 0 }
        defer { fclose(file) }
        var line = [CChar](repeating: 0, count: 256)
        guard fgets(&line, Int32(line.count), file) != nil else { return 0 }
        let fields = String(cString: line).split(separator: " ")
        guard fields.count >= 2, let pages = Int64(fields[1]) else { return 0 }
        return pages * Int64(sysconf(Int32(_SC_PAGESIZE)))
    }

    static func openDescriptors() -> Int64 {
        guard let directory = opendir("/proc/self/fd") else { return 0 }
        defer { closedir(directory) }
        var count: Int64 = 0
        while let entry = readdir(directory) {
            if entry.pointee.d_name.0 != 0x2E { count += 1 }   // not "." or ".."
        }
        return count - 1   // the directory stream's own descriptor
    }

    /// The soft RLIMIT_NOFILE; -1 when unlimited, 0 when it cannot be read.
    public static func descriptorLimit() -> Int64 {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 else { return 0 }
        if limit.rlim_cur == rlim_t.max { return -1 }   // RLIM_INFINITY
        return Int64(clamping: limit.rlim_cur)
    }
}
