public import TetherService
/// "Now", as a room needs it: two clocks for two jobs. Deadlines, windows and timeouts read the
/// monotonic clock, which a wall-clock step (NTP, an operator, a VM resume) cannot move, so a
/// backwards step never closes a pending socket and a forwards one never reopens a rate window.
/// Only what is persisted — activity, expiry stamps, the quota day — is stamped with wall time,
/// since it must mean the same after a restart or on another node.
public struct RoomTime: Sendable, Equatable, ExpressibleByIntegerLiteral {
    /// Monotonic milliseconds (any origin).
    public var monotonic: UInt64
    /// Wall-clock milliseconds since 1970.
    public var wall: UInt64

    public init(monotonic: UInt64, wall: UInt64) {
        self.monotonic = monotonic
        self.wall = wall
    }

    /// Both clocks at one value (tests where the two never disagree).
    public init(integerLiteral value: UInt64) { self.init(monotonic: value, wall: value) }
}

/// Where a relay reads the time: the chassis's clock pair (the system's, or a test's).
public typealias RelayClock = ServiceClock

extension ServiceClock {
    public func now() -> RoomTime { RoomTime(monotonic: monotonicMs(), wall: wallMs()) }
}
