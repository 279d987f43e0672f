public import TetherService
public import TetherSync

/// "Now", as a room needs it: two clocks for two jobs. Deadlines, windows and timeouts read the
/// monotonic clock, which a wall-clock step (NTP, an operator, a VM resume) cannot move, so a
/// backwards step never closes a pending socket and a forwards one never reopens a rate window.
/// Only what is persisted — activity, expiry stamps, the quota day — is stamped with wall time,
/// since it must mean the same after a restart or on another node.
public struct RoomTime: Sendable, Equatable {
    /// For deadlines, windows and timeouts.
    public var monotonic: MonotonicInstant
    /// For what is persisted: activity, expiry stamps, the quota day.
    public var wall: WallInstant

    /// The two readings of one moment.
    public init(monotonic: MonotonicInstant, wall: WallInstant) {
        self.monotonic = monotonic
        self.wall = wall
    }
}

/// Where a relay reads the time: the chassis's clock pair (the system's, or a test's).
public typealias RelayClock = ServiceClock

extension ServiceClock {
    /// Both clocks read now.
    public func roomTime() -> RoomTime { RoomTime(monotonic: monotonic(), wall: wall()) }
}
