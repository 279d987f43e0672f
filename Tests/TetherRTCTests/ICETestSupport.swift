import Foundation
import TetherRTC
import TetherWire
import XCTest

/// Everything one agent reported, in order, with a way to wait for a condition on it. The
/// handler runs on the agent's ICE thread, so all access is under the condition's lock.
final class ICEEventLog: @unchecked Sendable {
    private let condition = NSCondition()
    private var events: [ICEEvent] = []

    func record(_ event: ICEEvent) {
        condition.lock()
        events.append(event)
        condition.broadcast()
        condition.unlock()
    }

    var all: [ICEEvent] {
        condition.lock()
        defer { condition.unlock() }
        return events
    }

    /// True once `predicate` holds over the events (false after `timeout` seconds).
    @discardableResult
    func wait(_ timeout: TimeInterval = 10, until predicate: ([ICEEvent]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while !predicate(events) {
            guard condition.wait(until: deadline) else { return predicate(events) }
        }
        return true
    }

    var localCandidates: [String] { all.compactMap { if case let .localCandidate(value) = $0 { value } else { nil } } }
    var states: [ICEState] { all.compactMap { if case let .stateChanged(state) = $0 { state } else { nil } } }
    var datagrams: [[UInt8]] { all.compactMap { if case let .datagram(bytes) = $0 { bytes } else { nil } } }
    var gatheringComplete: Bool { all.contains { if case .gatheringComplete = $0 { true } else { false } } }
    var selectedPair: (local: ICECandidate, remote: ICECandidate)? {
        all.reversed().lazy.compactMap { if case let .selectedPair(local, remote) = $0 { (local, remote) } else { nil } }.first
    }
    var failure: ICEFailure? {
        states.lazy.compactMap { if case let .failed(failure) = $0 { failure } else { nil } }.first
    }

    func waitForGathering(_ timeout: TimeInterval = 10) -> Bool { wait(timeout) { _ in self.unlockedGatheringComplete } }
    private var unlockedGatheringComplete: Bool { events.contains { if case .gatheringComplete = $0 { true } else { false } } }

    func waitForState(_ state: ICEState, _ timeout: TimeInterval = 15) -> Bool {
        wait(timeout) { events in events.contains { if case .stateChanged(state) = $0 { true } else { false } } }
    }

    func waitForDatagram(_ bytes: [UInt8], _ timeout: TimeInterval = 10) -> Bool {
        wait(timeout) { events in events.contains { if case .datagram(bytes) = $0 { true } else { false } } }
    }

    func waitForFailure(_ timeout: TimeInterval = 20) -> Bool {
        wait(timeout) { events in events.contains { if case .stateChanged(.failed) = $0 { true } else { false } } }
    }
}

/// Two agents of one test trickling to each other as the signaling server would carry it:
/// each local candidate becomes the other's remote candidate, the end of gathering the other's
/// end of candidates. The wiring is a box filled once both agents exist, so the handlers never
/// hold the agents (which would keep them alive past `close`).
final class ICEPair: @unchecked Sendable {
    let controllingLog = ICEEventLog()
    let controlledLog = ICEEventLog()
    private(set) var controlling: ICEAgent!
    private(set) var controlled: ICEAgent!
    private let lock = NSLock()
    private var peers: (ICEAgent?, ICEAgent?) = (nil, nil)
    private(set) var forwardingErrors: [any Error] = []

    init(servers: [ICEServer] = [], relayOnly: Bool = false, localAddresses: [String] = ["127.0.0.1"]) throws {
        controlling = try ICEAgent(ICEConfiguration(role: .controlling, servers: servers, relayOnly: relayOnly, localAddresses: localAddresses)) { [weak self] event in
            self?.controllingLog.record(event)
            self?.forward(event, to: \.1)
        }
        controlled = try ICEAgent(ICEConfiguration(role: .controlled, servers: servers, relayOnly: relayOnly, localAddresses: localAddresses)) { [weak self] event in
            self?.controlledLog.record(event)
            self?.forward(event, to: \.0)
        }
        lock.withLock { peers = (controlling, controlled) }
        try controlling.setRemoteCredentials(controlled.localCredentials)
        try controlled.setRemoteCredentials(controlling.localCredentials)
    }

    private func forward(_ event: ICEEvent, to peer: KeyPath<(ICEAgent?, ICEAgent?), ICEAgent?>) {
        guard let target = lock.withLock({ peers[keyPath: peer] }) else { return }
        do {
            switch event {
            case let .localCandidate(value): try target.addRemoteCandidate(value)
            case .gatheringComplete: try target.endOfRemoteCandidates()
            default: break
            }
        } catch {
            lock.withLock { forwardingErrors.append(error) }
        }
    }

    func start() throws {
        try controlling.startGathering()
        try controlled.startGathering()
    }

    /// Both sides see a selected pair and `ready`.
    func waitUntilConnected(_ timeout: TimeInterval = 20) -> Bool {
        controllingLog.waitForState(.ready, timeout) && controlledLog.waitForState(.ready, timeout)
            && controllingLog.wait(timeout) { $0.contains { if case .selectedPair = $0 { true } else { false } } }
            && controlledLog.wait(timeout) { $0.contains { if case .selectedPair = $0 { true } else { false } } }
    }

    func close() {
        lock.withLock { peers = (nil, nil) }
        controlling.close()
        controlled.close()
    }

    /// Sends `count` datagrams each way and checks every one arrives intact (retrying a send
    /// the first few times: a datagram sent just as the pair is selected may be lost).
    func exchange(_ test: XCTestCase, count: Int = 5, file: StaticString = #filePath, line: UInt = #line) throws {
        for index in 0..<count {
            let forward: [UInt8] = Array("from controlling \(index)".utf8), backward: [UInt8] = Array("from controlled \(index)".utf8)
            var delivered = (false, false)
            for _ in 0..<5 where !(delivered.0 && delivered.1) {
                if !delivered.0 { try controlling.send(forward) }
                if !delivered.1 { try controlled.send(backward) }
                delivered = (controlledLog.waitForDatagram(forward, 1), controllingLog.waitForDatagram(backward, 1))
            }
            XCTAssertTrue(delivered.0, "datagram \(index) controlling -> controlled", file: file, line: line)
            XCTAssertTrue(delivered.1, "datagram \(index) controlled -> controlling", file: file, line: line)
        }
    }
}
