import TetherNet
import TetherSync
import TetherWire

/// Who is online (signaling.md §6.1, §6.3): each ID reserved by at most one socket, routable
/// once its credentials were issued; in RAM only, shared by every loop. A reservation is never
/// replaced — a second socket with the same ID is refused — and only its owner removes it.
final class SignalDirectory: Sendable {
    private struct Entry {
        let socket: UncheckedTransfer<SignalSocket>
        var routable: Bool
    }

    private let entries = Locked<[SignalingID: Entry]>([:])

    /// Reserves `id` for `socket`; false when another socket holds it.
    func reserve(_ id: SignalingID, for socket: SignalSocket) -> Bool {
        entries.withLock { entries in
            guard entries[id] == nil else { return false }
            entries[id] = Entry(socket: UncheckedTransfer(socket), routable: false)
            return true
        }
    }

    /// Makes `socket`'s reservation of `id` routable; false if it no longer holds it.
    func markRoutable(_ id: SignalingID, for socket: SignalSocket) -> Bool {
        entries.withLock { entries in
            guard let entry = entries[id], entry.socket.value === socket else { return false }
            entries[id]!.routable = true
            return true
        }
    }

    /// Drops `socket`'s reservation of `id` (never another socket's).
    func release(_ id: SignalingID, for socket: SignalSocket) {
        entries.withLock { entries in
            if let entry = entries[id], entry.socket.value === socket { entries[id] = nil }
        }
    }

    /// The routable socket of `id`, to be touched only on its own loop.
    func routableSocket(_ id: SignalingID) -> UncheckedTransfer<SignalSocket>? {
        entries.withLock { entries in
            guard let entry = entries[id], entry.routable else { return nil }
            return entry.socket
        }
    }

    func isOnline(_ ids: [SignalingID]) -> [Bool] {
        entries.withLock { entries in ids.map { entries[$0]?.routable == true } }
    }

    var routableCount: Int { entries.withLock { $0.values.count { $0.routable } } }

    /// Every socket holding a reservation, each to be touched only on its own loop.
    var everySocket: [UncheckedTransfer<SignalSocket>] { entries.withLock { $0.values.map(\.socket) } }
}
