import Dispatch
import Foundation
@testable import TetherRTC
import TetherSync
import TetherTestSupport
import XCTest

/// Two associations' packets, delivered both ways asynchronously on a queue of the pipe's own
/// (in place of DTLS), with a rule that may drop any of them.
final class PacketPipe: Sendable {
    enum Side: Sendable { case a, b }

    private struct Ends {
        weak var a: DataChannelAssociation?
        weak var b: DataChannelAssociation?
        var connected = false
        /// What was sent before both ends existed, carried on `connect`.
        var early: [([UInt8], Side)] = []
        var sent: [Side: Int] = [:]
        var dropped = 0
    }

    private let ends = Locked(Ends())
    private let queue = DispatchQueue(label: "test.packet-pipe")
    /// Given the side that sent it and how many that side sent before it: whether to lose it.
    private let drop: @Sendable (Side, Int) -> Bool

    init(drop: @escaping @Sendable (Side, Int) -> Bool = { _, _ in false }) {
        self.drop = drop
    }

    func connect(a: DataChannelAssociation, b: DataChannelAssociation) {
        let early = ends.withLock { ends in
            ends.a = a
            ends.b = b
            ends.connected = true
            defer { ends.early = [] }
            return ends.early
        }
        for (packet, side) in early { carry(packet, from: side) }
    }

    var dropped: Int { ends.withLock { $0.dropped } }

    func carry(_ packet: [UInt8], from side: Side) {
        queue.async { [self] in
            let target = ends.withLock { ends -> DataChannelAssociation? in
                guard ends.connected else {
                    ends.early.append((packet, side))
                    return nil
                }
                let index = ends.sent[side, default: 0]
                ends.sent[side] = index + 1
                if drop(side, index) {
                    ends.dropped += 1
                    return nil
                }
                return side == .a ? ends.b : ends.a
            }
            target?.receivePacket(packet)
        }
    }
}

/// One side's events as they arrive.
final class EventLog: Sendable {
    private let events = Locked<[DataChannelEvent]>([])

    func append(_ event: DataChannelEvent) { events.withLock { $0.append(event) } }

    var all: [DataChannelEvent] { events.withLock { $0 } }

    var messages: [[UInt8]] {
        all.compactMap { if case let .message(bytes) = $0 { bytes } else { nil } }
    }

    var refusals: [DataChannelRefusal] {
        all.compactMap { if case let .peerChannelRefused(refusal) = $0 { refusal } else { nil } }
    }

    var failure: DataChannelFailure? {
        all.lazy.compactMap { if case let .failed(failure) = $0 { failure } else { nil } }.first
    }

    func contains(_ event: DataChannelEvent) -> Bool { all.contains(event) }
}

/// The RTC tests' patience: associations on a loaded machine (loss, retransmission timers) take
/// longer than the shared default of `eventually`.
let rtcPatience: Double = 15

/// Two associations joined by a `PacketPipe`.
struct AssociationPair {
    let a: DataChannelAssociation
    let b: DataChannelAssociation
    let logA = EventLog()
    let logB = EventLog()
    let pipe: PacketPipe

    init(a configurationA: DataChannelConfiguration = DataChannelConfiguration(role: .client, opensChannel: true),
         b configurationB: DataChannelConfiguration = DataChannelConfiguration(role: .server, opensChannel: false),
         pipe: PacketPipe = PacketPipe()) throws {
        self.pipe = pipe
        let logA = logA, logB = logB
        a = try DataChannelAssociation(configuration: configurationA, sendPacket: { pipe.carry($0, from: .a) },
                                       onEvent: { logA.append($0) })
        b = try DataChannelAssociation(configuration: configurationB, sendPacket: { pipe.carry($0, from: .b) },
                                       onEvent: { logB.append($0) })
        pipe.connect(a: a, b: b)
    }

    func waitUntilOpen(file: StaticString = #filePath, line: UInt = #line) {
        eventually("both ends open", within: rtcPatience, poll: 0.002, file: file, line: line) {
            logA.contains(.channelOpen) && logB.contains(.channelOpen)
        }
    }

    func assertNeitherFailed(file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertNil(logA.failure, file: file, line: line)
        XCTAssertNil(logB.failure, file: file, line: line)
    }

    func close() {
        a.close()
        b.close()
    }
}
