import Foundation
public import TetherNet
public import TetherWire
import TetherSync

/// Why no relay origin could be found for a room.
public enum ResolveError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A v1 link without `relay=` (client.md §2.2 rule 7).
    case noTransport
    /// The resolver could not be reached (connection, TLS, timeout).
    case resolverUnreachable(String)
    /// The resolver answered with an HTTP status other than success.
    case resolverRefused(status: Int)
    /// The resolver's answer is not a valid shard map.
    case invalidMap(String)
    /// The map names an owner that is not a valid origin.
    case invalidOwner(String)
    /// Only a map older than one already seen was served (a stale or rolled-back resolver).
    case staleMap(version: Int, floor: Int)

    public var description: String {
        switch self {
        case .noTransport: "the pairing link names no relay (neither a relay origin nor a resolver): make a new link with `tether mac --relay https://HOST`"
        case let .resolverUnreachable(why): "shard-map resolver unreachable: \(why)"
        case let .resolverRefused(status): "shard-map resolver answered \(status)"
        case let .invalidMap(why): "shard map rejected: \(why)"
        case let .invalidOwner(host): "shard map names an unusable host: \(host)"
        case let .staleMap(version, floor): "shard map version \(version) is older than version \(floor) seen before"
        }
    }
}

/// The relay origin of a pairing (client.md §5): the link's origin (v1), or the owner of the
/// room's bucket in the resolver's shard map (v2). A map is adopted only if its version is
/// higher than the one held; a cached map answers at once and is refreshed in the background,
/// a forced refresh refetches first (before every reconnect, and on a 421 or a 4421 close).
/// With a version floor, the highest version ever adopted survives restarts, and a lower map is
/// ignored even on a cold start.
public final class RelayResolver: Sendable {
    /// Where the floor lives between runs (the phone keeps one per resolver URL).
    public struct VersionFloor: Sendable {
        /// The highest version adopted so far for a resolver URL, if one was stored.
        public let load: @Sendable (_ resolverURL: String) -> Int?
        /// Records a newly adopted version for a resolver URL.
        public let store: @Sendable (_ resolverURL: String, _ version: Int) -> Void

        /// A floor kept wherever the app keeps small state (`StateDirectory.shardMapVersionFloor` is one).
        public init(load: @escaping @Sendable (String) -> Int?, store: @escaping @Sendable (String, Int) -> Void) {
            self.load = load
            self.store = store
        }
    }

    /// The link's transport: a relay origin (v1) or a resolver URL (v2).
    public let transport: PairingLink.Transport
    private let loop: EventLoop
    private let tls: TLSClientContext?
    private let versionFloor: VersionFloor?
    private struct Held {
        var map: ShardMap?
        /// One refresh behind a cached answer at a time, however many lookups it served.
        var refreshingBehind = false
    }

    private let held = Locked(Held())

    /// A resolver for `transport`. Pass a `versionFloor` to refuse maps older than one adopted in
    /// an earlier run.
    public init(transport: PairingLink.Transport, loop: EventLoop, tls: TLSClientContext? = nil, versionFloor: VersionFloor? = nil) {
        self.transport = transport
        self.loop = loop
        self.tls = tls
        self.versionFloor = versionFloor
    }

    /// The map currently held (v2 only).
    public var currentMap: ShardMap? { held.withLock { $0.map } }

    /// The origin of the relay that serves `room`. `forceFresh` refetches the map first (do it
    /// before every reconnect and after a 421 or a 4421 close); otherwise a cached map answers at
    /// once.
    public func origin(for room: RoomName, forceFresh: Bool = false) async throws(ResolveError) -> String {
        switch transport {
        case .direct(nil): throw .noTransport
        case let .direct(origin?): return origin
        case let .resolved(resolverURL):
            if forceFresh || currentMap == nil {
                try await refresh(resolverURL)
            } else {
                // A cached map answers at once; a newer one is fetched behind it (relay.md §8.2).
                let start = held.withLock { held -> Bool in
                    defer { held.refreshingBehind = true }
                    return !held.refreshingBehind
                }
                if start {
                    Task {
                        try? await self.refresh(resolverURL)
                        self.held.withLock { $0.refreshingBehind = false }
                    }
                }
            }
            guard let map = currentMap else { throw .invalidMap("none") }
            let owner = map.owner(of: room)
            guard let origin = RelayOrigin.origin(forShardHost: owner, resolverURL: resolverURL) else { throw .invalidOwner(owner) }
            return origin
        }
    }

    private func refresh(_ url: String) async throws(ResolveError) {
        // The shard-map GET carries no User-Agent (client.md §1).
        let result: Result<HTTPClient.Response, NetError> = await withCheckedContinuation { continuation in
            HTTPClient.request("GET", url, tls: url.hasPrefix("https://") ? tls : nil, on: loop) { continuation.resume(returning: $0) }
        }
        let response: HTTPClient.Response
        switch result {
        case let .failure(error): throw .resolverUnreachable("\(error)")
        case let .success(answer): response = answer
        }
        guard (200..<300).contains(response.status) else { throw .resolverRefused(status: response.status) }
        let fetched: ShardMap
        do { fetched = try ShardMap(json: response.body) } catch { throw .invalidMap("\(error)") }
        let floor = versionFloor?.load(url) ?? Int.min
        // The floor is stored under the lock too: two refreshes overlapping (one behind a cached
        // answer, one forced) must not store 7, then 6.
        let adopted: Bool = held.withLock { held in
            guard fetched.version > (held.map?.version ?? Int.min), fetched.version >= floor else { return false }
            held.map = fetched
            if fetched.version > floor { versionFloor?.store(url, fetched.version) }
            return true
        }
        if !adopted, currentMap == nil { throw .staleMap(version: fetched.version, floor: floor) }
    }
}
