import TetherCall
import TetherWire
import TetherSync
import XCTest

/// Two machines on their own loops over the in-memory media transport: the asynchronous path a
/// real driver takes, end to end.
final class CallOverInMemoryMediaTests: XCTestCase {
    private let network = InMemoryMediaNetwork()
    private lazy var alice = CallLoopDriver(identity: CallIdentityTests.alice(), network: network)
    private lazy var bob = CallLoopDriver(identity: CallIdentityTests.bob(), network: network)
    private let call = Fixture.callID

    private func secured() throws {
        alice.peer = bob
        bob.peer = alice
        for driver in [alice, bob] { driver.handle(.registered(iceExpiresAt: 1_700_003_600)) }
        alice.handle(.dial(peer: Fixture.bob, call: call))
        XCTAssertTrue(bob.waitFor { $0.contains(.incoming(from: Fixture.alice, call: self.call)) })
        bob.handle(.accept(call: call))
        for driver in [alice, bob] {
            XCTAssertTrue(driver.waitFor { $0.contains { if case .secured = $0 { true } else { false } } })
        }
    }

    func testTwoMachinesChatAndHangUpOverTheInMemoryMediaTransport() throws {
        try secured()
        let id = MessageID.random()
        alice.handle(.sendText(call: call, text: "over memory", id: id, sentAt: 1_700_000_000_000))
        XCTAssertTrue(bob.waitFor { $0.contains { if case .message(_, .text(_, "over memory", _)) = $0 { true } else { false } } })
        XCTAssertTrue(alice.waitFor { $0.contains(.message(call: self.call, .receipt(id: id))) })
        bob.handle(.hangUp(call: call))
        // Whichever of Bob's close and his channel's close comes first, Alice hears he hung up.
        XCTAssertTrue(alice.waitFor { $0.last == .ended(call: self.call, .peerHungUp) })
        XCTAssertEqual(bob.notices.last, .ended(call: call, .hungUp))
        XCTAssertNil(alice.transport(call), "the media was closed and dropped")
    }

    func testATamperedMessageOnTheWireEndsTheCallOnBothSides() throws {
        try secured()
        try XCTUnwrap(alice.transport(call)).tamperNextMessage()
        alice.handle(.sendText(call: call, text: "tampered", id: .random(), sentAt: 1_700_000_000_000))
        XCTAssertTrue(bob.waitFor { $0.last == .ended(call: self.call, .channelFailed(.authenticationFailure)) })
        XCTAssertTrue(alice.waitFor { $0.last == .ended(call: self.call, .peerFailed) })
    }
}
