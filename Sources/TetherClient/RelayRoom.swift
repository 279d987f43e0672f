public import TetherWire

/// A room on a relay, as a client addresses it (client.md §6.1, §8): the canonical origin (bound
/// into every transcript and clientDataHash) and the room's name (sent only in `x-relay-room`).
public struct RelayRoom: Sendable, Equatable {
    /// The relay's canonical origin (`https://host`), bound into every signature.
    public let origin: String
    /// The room's name: SHA-256 over the Mac's static key and the pairing id.
    public let name: RoomName

    /// The room `name` on the relay at `origin`.
    public init(origin: String, name: RoomName) {
        self.origin = origin
        self.name = name
    }

    /// `https://host` → `wss://host/`; `http://` (loopback tests only) → `ws://…/`.
    public var webSocketURL: String {
        if origin.hasPrefix("https://") { return "wss://" + origin.dropFirst("https://".count) + "/" }
        if origin.hasPrefix("http://") { return "ws://" + origin.dropFirst("http://".count) + "/" }
        return origin + "/"
    }

    /// The headers of every room-scoped request and upgrade: the room and the fixed User-Agent
    /// (which keeps platform details out of relay and proxy logs). Never an `Origin`.
    var headers: [(String, String)] { [("x-relay-room", name.hex), ("User-Agent", "iTerm2Companion")] }
}
