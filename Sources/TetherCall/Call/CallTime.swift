public import TetherSync

/// "Now", as a call needs it: two clocks for two jobs. Every deadline of §7.5 reads the monotonic
/// clock, which a wall-clock step cannot move; only the TURN credential margin compares against
/// `iceExpiresAt`, which the server states in UNIX seconds (§5.3), and a text's `sentAt` reads
/// wall time.
public struct CallTime: Sendable, Equatable {
    /// For every deadline.
    public var monotonic: MonotonicInstant
    /// For the TURN credential margin and `sentAt` only.
    public var wall: WallInstant

    /// Both clocks, read at the same moment by the driver.
    public init(monotonic: MonotonicInstant, wall: WallInstant) {
        self.monotonic = monotonic
        self.wall = wall
    }
}
