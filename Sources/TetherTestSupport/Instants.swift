public import TetherSync

/// Tests name instants by their offset from the clock's origin, in the unit the rule they check
/// is written in: `now: .milliseconds(70_001)` is "70.001 s after the origin".
extension MonotonicInstant {
    public static func nanoseconds<T: BinaryInteger>(_ value: T) -> MonotonicInstant { MonotonicInstant(nanoseconds: UInt64(value)) }
    public static func milliseconds<T: BinaryInteger>(_ value: T) -> MonotonicInstant { .zero + .milliseconds(Int64(value)) }
    public static func seconds<T: BinaryInteger>(_ value: T) -> MonotonicInstant { .zero + .seconds(Int64(value)) }
}

extension WallInstant {
    public static func milliseconds<T: BinaryInteger>(_ value: T) -> WallInstant { WallInstant(unixMilliseconds: UInt64(value)) }
    public static func seconds<T: BinaryInteger>(_ value: T) -> WallInstant { WallInstant(unixSeconds: Int64(value)) }
}
