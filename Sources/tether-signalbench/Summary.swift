import Foundation

/// The targets of the signaling server's issue against what `run` measured: one row each
/// (target, figure, ratio, met or missed) and the notes a reader needs to weigh them — above
/// all that every signal and every registration costs the server one Ed25519 verify.
struct Summary {
    struct Row {
        let name: String
        let target: String
        let measured: String
        /// Measured over target (for an upper bound, above 1 is missed; for a lower bound, below 1).
        let ratio: Double?
        let met: Bool?
        let notes: [String]
    }

    private(set) var rows: [Row] = []
    private(set) var line: JSON = .object([("summary", .bool(true))])
    private var foreign: [Double] = []
    private var verifyRuns: [Double] = []
    /// TetherCrypto's own verify rate over a real signal string (libsodium's fast path): the
    /// floor of this server, below the yardstick's (openssl speed) cost.
    private var serverVerify: Double?

    init(_ results: [String: [[String: Any]]], offered: Double) {
        let verifies = (results["verify"] ?? []).compactMap { $0.number("openssl_verify_per_s") }
        let verify = verifies.isEmpty ? nil : verifies.reduce(0, +) / Double(verifies.count)
        line["openssl_verify_per_s"] = .optional(verify, digits: 1)
        line["openssl_verify_per_s_runs"] = .array(verifies.map { .number($0, digits: 1) })
        verifyRuns = verifies
        let own = (results["verify"] ?? []).compactMap { $0.number("tethercrypto_verify_per_s") }
        serverVerify = own.isEmpty ? nil : own.reduce(0, +) / Double(own.count)
        line["tethercrypto_verify_per_s"] = .optional(serverVerify, digits: 1)
        foreign = results.values.flatMap { $0 }.compactMap { $0.number("foreign_cpu_pct") }
        let signals = results["signals"]?.first
        let capacity = signals?.number("forwarded_per_s")
        addSignals(signals, verify: verify)
        let latency = results["latency"] ?? []
        addLatency(latency.first { $0.number("offered_per_s") == offered }, offered: offered, capacity: capacity, target: true)
        for other in latency where other.number("offered_per_s") != offered {
            addLatency(other, offered: other.number("offered_per_s") ?? 0, capacity: capacity, target: false)
        }
        addIdle(results["idle"]?.first)
        addRegistration(results["register"]?.first, verify: verify)
        line["foreign_cpu_pct_max"] = .optional(foreign.max(), digits: 1)
        line["targets"] = .array(rows.map { row in
            .object([("name", .string(row.name)), ("target", .string(row.target)), ("measured", .string(row.measured)),
                     ("ratio", .optional(row.ratio, digits: 3)), ("met", row.met.map { .bool($0) } ?? .null)])
        })
    }

    private mutating func addSignals(_ result: [String: Any]?, verify: Double?) {
        let target = 50_000.0
        guard let result, let rate = result.number("forwarded_per_s") else { return missing("signals forwarded/s (1 core, 1,000 clients, 64 B)", "≥ 50,000/s") }
        var notes = ["server CPU \(percent(result.number("server_cpu_pct"))), load generator CPU \(percent(result.number("load_cpu_pct")))",
                     "\(count(result.number("forwarded_per_server_cpu_s")))/s per second of server CPU"]
        if let verify {
            let runs = verifyRuns.count > 1 ? ", the mean of \(verifyRuns.map { count($0) }.joined(separator: " and ")) taken first and last" : ""
            notes.append("\(String(format: "%.2f", rate / verify))× the Ed25519 verify rate (\(count(verify))/s, openssl speed on the server's core\(runs)): "
                         + "the meaningful efficiency figure, since the server verifies every signal (§6.2 step 2)")
        }
        if let own = serverVerify {
            notes.append("\(String(format: "%.2f", rate / own))× TetherCrypto's own verify rate (\(count(own))/s over a signal string: libsodium, OpenSSL's verdict kept), this server's floor")
            if own < target {
                notes.append("50,000/s is above even that floor on this hardware: no server that verifies every signal on one of these cores can reach it")
            }
        }
        notes += problems(result)
        rows.append(Row(name: "signals forwarded/s (1 core, 1,000 clients, 64 B)", target: "≥ 50,000/s", measured: "\(count(rate))/s",
                        ratio: rate / target, met: rate >= target, notes: notes))
    }

    private mutating func addLatency(_ result: [String: Any]?, offered: Double, capacity: Double?, target: Bool) {
        let name = target ? "p99 forwarding latency at \(count(offered))/s offered" : "p99 latency at \(count(offered))/s offered, 80% of the closed-loop rate"
        guard let result else { return missing(name, "≤ 5 ms") }
        let p99 = result.number("latency_p99_ms")
        var notes = ["forwarded \(count(result.number("forwarded_per_s")))/s of \(count(result.number("sent_per_s")))/s sent "
                     + "(\(count(result.number("forwarded_per_s_with_drain")))/s from the first send to the last delivery); "
                     + "p50 \(milliseconds(result.number("latency_us", "p50"))), p99.9 \(milliseconds(result.number("latency_us", "p99.9"))); "
                     + "server CPU \(percent(result.number("server_cpu_pct"))); longest gap between two deliveries "
                     + milliseconds(result.number("longest_delivery_gap_ms").map { $0 * 1000 })]
        if let capacity, offered > capacity {
            notes.append("the offered rate is above what the server forwards (\(count(capacity))/s, closed loop): its backlog grows for the whole run, and the latency is that backlog's")
        }
        if target, let own = serverVerify, offered > own * 0.9 {
            notes.append("one core verifies \(count(own)) signals/s at most: at \(count(offered))/s verification alone takes \(String(format: "%.0f%%", offered / own * 100)) of a server pinned to one core")
        }
        if !target { notes.append("80% of the closed-loop rate: the latency of a busy server that keeps up (issue 34's target)") }
        notes += problems(result)
        rows.append(Row(name: name, target: "≤ 5 ms", measured: p99.map { String(format: "%.2f ms", $0) } ?? "unknown (signals undelivered)",
                        ratio: p99.map { $0 / 5 }, met: p99.map { $0 <= 5 } ?? false, notes: notes))
    }

    private mutating func addIdle(_ result: [String: Any]?) {
        let name = "RSS per idle registered client"
        guard let result, let bytes = result.number("rss_per_client_bytes") else { return missing(name, "≤ 2 KiB") }
        var notes = ["\(count(result.number("registered"))) clients: VmRSS \(mebibytes(result.number("rss_before_bytes"))) → \(mebibytes(result.number("rss_after_bytes"))); "
                     + "the second half alone \(count(result.number("rss_per_client_marginal_bytes"))) B each"]
        notes += problems(result)
        rows.append(Row(name: name, target: "≤ 2 KiB", measured: String(format: "%.0f B (%.2f KiB)", bytes, bytes / 1024),
                        ratio: bytes / 2048, met: bytes <= 2048, notes: notes))
    }

    private mutating func addRegistration(_ result: [String: Any]?, verify: Double?) {
        let name = "one registration's server CPU / one Ed25519 verify"
        guard let result, let rate = result.number("registrations_per_s") else { return missing(name, "≤ 1.5×") }
        let cpu = result.number("server_cpu_us_per_registration")
        var notes = ["\(count(rate)) registrations/s on one core (wall clock, \(count(result.number("registered"))) clients, "
                     + "\(count(result.number("concurrency"))) in flight); server CPU \(percent(result.number("server_cpu_pct"))), "
                     + "\(cpu.map { String(format: "%.1f µs", $0) } ?? "?") each"]
        var ratio: Double?
        if let verify, let cpu {
            ratio = cpu / (1e6 / verify)
            notes.append("one verify is \(String(format: "%.1f µs", 1e6 / verify)) (openssl speed); by wall clock a registration costs \(String(format: "%.2f", verify / rate))× one")
        }
        if let own = serverVerify, let cpu {
            notes.append("TetherCrypto's own verify is \(String(format: "%.1f µs", 1e6 / own)) (libsodium): a registration costs \(String(format: "%.2f", cpu / (1e6 / own)))× that; "
                         + "the rest is mostly the kernel's accept and TCP work")
        }
        notes += problems(result)
        rows.append(Row(name: name, target: "≤ 1.5×", measured: ratio.map { String(format: "%.2f×", $0) } ?? "unknown (no verify rate)",
                        ratio: ratio.map { $0 / 1.5 }, met: ratio.map { $0 <= 1.5 }, notes: notes))
    }

    private mutating func missing(_ name: String, _ target: String) {
        rows.append(Row(name: name, target: target, measured: "not measured", ratio: nil, met: nil, notes: []))
    }

    /// What makes a run suspect: failures, errors, mismatches, signals lost, a foreign load.
    private func problems(_ result: [String: Any]) -> [String] {
        var found: [String] = []
        if let why = result["failed"] as? String { found.append("FAILED: \(why)") }
        for key in ["errors", "failures", "lost"] {
            if let counts = result[key] as? [String: Any], !counts.isEmpty {
                found.append("\(key): " + counts.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
            }
        }
        for key in ["mismatched", "undelivered"] where (result.number(key) ?? 0) > 0 { found.append("\(key): \(count(result.number(key)))") }
        if let foreign = result.number("foreign_cpu_pct"), foreign >= 10 {
            found.append("other processes used \(percent(foreign)) of a CPU meanwhile")
        }
        return found
    }

    var table: String {
        var text = "signalbench summary (ratio = measured / target):\n"
        for row in rows {
            let verdict = row.met.map { $0 ? "met" : "MISSED" } ?? "-"
            text += "  \(row.name): target \(row.target), measured \(row.measured), ratio \(row.ratio.map { String(format: "%.2f", $0) } ?? "-"), \(verdict)\n"
            for note in row.notes { text += "      \(note)\n" }
        }
        if let worst = foreign.max() {
            text += "  other load on the machine during the scenarios: up to \(percent(worst)) of one CPU"
                + (worst >= 10 ? " — figures taken beside it are noisier and likely low\n" : "\n")
        }
        return text
    }

    private func count(_ value: Double?) -> String {
        guard let value else { return "?" }
        let formatter = NumberFormatter()
        formatter.numberStyle = .decimal
        formatter.maximumFractionDigits = 0
        return formatter.string(from: NSNumber(value: value.rounded())) ?? String(Int(value))
    }

    private func percent(_ value: Double?) -> String { value.map { String(format: "%.0f%%", $0) } ?? "?" }
    private func milliseconds(_ microseconds: Double?) -> String { microseconds.map { String(format: "%.2f ms", $0 / 1000) } ?? "?" }
    private func mebibytes(_ bytes: Double?) -> String { bytes.map { String(format: "%.1f MiB", $0 / 1_048_576) } ?? "?" }
}
