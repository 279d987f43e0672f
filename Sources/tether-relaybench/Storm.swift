import Foundation
import TetherClient
import TetherNet
import TetherWire

/// The reconnect storm: every established room's mac rejoins at once with a signed join (relay.md
/// §3.4, §3.6), as after a relay restart or a network outage. Records when each is admitted and
/// why any is not, and holds the admitted sockets so the rooms stay back until the run ends.
final class Storm: @unchecked Sendable {
    private let rooms: [(room: RelayRoom, secret: RoomSecret)]
    private let loops: [EventLoop]
    private let lock = NSLock()
    private(set) var startedAt: UInt64 = 0
    private var admittedAt: [UInt64] = []
    private var errors: [String: Int] = [:]
    private var sockets: [AdmittedSocket] = []
    private var finished = 0

    /// Derives every room and secret up front, so the storm itself pays only for the joins.
    init(origin: String, count: Int, loops: [EventLoop]) {
        rooms = (0..<count).map { (RelayRoom(origin: origin, name: BenchRooms.name($0)), BenchRooms.secret($0)) }
        self.loops = loops
        admittedAt.reserveCapacity(count)
        sockets.reserveCapacity(count)
    }

    /// Starts every join at once and returns when all have ended, admitted or not.
    func run() async {
        startedAt = ProcessStats.now()
        await withTaskGroup(of: Void.self) { group in
            for (index, entry) in rooms.enumerated() {
                let loop = loops[index % loops.count]
                group.addTask { [self] in
                    do throws(AdmissionError) {
                        let socket = try await RelayAdmission.join(entry.room, role: .mac, proof: .signed(entry.secret), on: loop)
                        record { admittedAt.append(ProcessStats.now()); sockets.append(socket) }
                    } catch {
                        record { errors[Self.kind(of: error), default: 0] += 1 }
                    }
                }
            }
        }
    }

    private func record(_ body: () -> Void) {
        lock.withLock {
            body()
            finished += 1
        }
    }

    /// Joins ended so far (for progress while the storm runs).
    var progress: (finished: Int, admitted: Int) { lock.withLock { (finished, admittedAt.count) } }

    /// Admission times after the start (ns), sorted.
    var admissionLatencies: [UInt64] { lock.withLock { admittedAt.map { $0 - startedAt }.sorted() } }

    /// When the last room was admitted (monotonic ns), if any was.
    var lastAdmittedAt: UInt64? { lock.withLock { admittedAt.max() } }

    var errorKinds: [String: Int] { lock.withLock { errors } }

    /// Admitted sockets that the relay has closed since (a room that came back and went again).
    var closedSince: Int { lock.withLock { sockets.filter { $0.closeReceived != nil }.count } }

    /// A refusal's reason or the failure's kind, without per-connection detail, so errors group.
    static func kind(of error: AdmissionError) -> String {
        switch error {
        case let .refused(reason): "refused: \(reason)"
        case let .closed(code, reason): "closed \(code) \(reason)"
        case let .upgradeRefused(status, _, _): "upgrade \(status)"
        case let .unreachable(why): "unreachable: \(why)"
        case let .protocolViolation(what): "protocol: \(what)"
        }
    }
}
