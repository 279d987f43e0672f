import Glibc

/// The two system clocks in milliseconds, read with `clock_gettime` (no Foundation `Date` per
/// frame).
enum SystemTime {
    static func monotonicMs() -> UInt64 { read(CLOCK_MONOTONIC) }
    static func wallMs() -> UInt64 { read(CLOCK_REALTIME) }

    private static func read(_ clock: clockid_t) -> UInt64 {
        var ts = timespec()
        clock_gettime(clock, &ts)
        return UInt64(ts.tv_sec) * 1_000 + UInt64(ts.tv_nsec) / 1_000_000
    }
}
