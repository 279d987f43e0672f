public import TetherRelay
import TetherTestSupport

/// Tests name a room's "now" by one number: that many milliseconds after the origin of both
/// clocks (the tests where the monotonic and the wall clock never disagree).
extension RoomTime: ExpressibleByIntegerLiteral {
    public init(integerLiteral value: UInt64) { self.init(monotonic: .milliseconds(value), wall: .milliseconds(value)) }
}
