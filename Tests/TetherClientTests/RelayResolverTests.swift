import Foundation
import TetherClient
import TetherNet
import TetherTestSupport
import TetherWire
import XCTest

/// v2 resolution (client.md §5) against a real relay serving `/shardmap.json`.
final class RelayResolverTests: XCTestCase {
    private final class Floors: @unchecked Sendable {
        private let lock = NSLock()
        var values: [String: Int] = [:]
        var floor: RelayResolver.VersionFloor {
            RelayResolver.VersionFloor(load: { url in self.lock.withLock { self.values[url] } },
                                       store: { url, version in self.lock.withLock { self.values[url] = version } })
        }
    }

    func testTheOwnerOfTheBucketIsTheOriginAndTheVersionFloorRefusesARollback() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-resolver-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let mapFile = directory.appendingPathComponent("map.json")
        // Buckets 0…49999 on another host, the rest on this relay.
        let port = RelayProcess.freePort()
        try Data(#"{"version":5,"ranges":[{"low":0,"high":49999,"host":"relay-a.example"},{"low":50000,"high":65535,"host":"127.0.0.1:\#(port)"}]}"#.utf8)
            .write(to: mapFile)
        let relay = try RelayProcess(port: port, ["--relay-shard-map", mapFile.path])
        defer { relay.stop() }
        let group = try EventLoopGroup(count: 1)
        defer { group.shutdown() }
        let resolverURL = "http://127.0.0.1:\(port)/shardmap.json"
        let floors = Floors()
        let resolver = RelayResolver(transport: .resolved(resolverURL: resolverURL), loop: group.loops[0], versionFloor: floors.floor)

        // client.md §4 vectors: bucket 57888 and 48136.
        let high = RoomName(responderStaticKey: [UInt8](repeating: 0xAB, count: 32), pairingID: "0123456789abcdef")
        let low = RoomName(responderStaticKey: [UInt8](repeating: 0xFF, count: 32), pairingID: "z")
        XCTAssertEqual(high.bucket, 57888)
        XCTAssertEqual(low.bucket, 48136)
        let origin = try await resolver.origin(for: high)
        XCTAssertEqual(origin, "http://127.0.0.1:\(port)", "a loopback owner of a loopback http resolver is reached over http")
        let other = try await resolver.origin(for: low)
        XCTAssertEqual(other, "https://relay-a.example")
        XCTAssertEqual(floors.values, [resolverURL: 5], "the adopted version is the new floor")

        // A cold start that has seen version 7 refuses the version 5 map.
        floors.values[resolverURL] = 7
        let cold = RelayResolver(transport: .resolved(resolverURL: resolverURL), loop: group.loops[0], versionFloor: floors.floor)
        do {
            _ = try await cold.origin(for: high)
            XCTFail("a rolled-back map was adopted")
        } catch {
            XCTAssertEqual(error, .staleMap(version: 5, floor: 7))
        }
        // v1 needs no map; a v1 link without relay= has no transport.
        let direct = try await RelayResolver(transport: .direct(relayOrigin: "https://r.example"), loop: group.loops[0]).origin(for: high)
        XCTAssertEqual(direct, "https://r.example")
        do {
            _ = try await RelayResolver(transport: .direct(relayOrigin: nil), loop: group.loops[0]).origin(for: high)
            XCTFail("no transport")
        } catch {
            XCTAssertEqual(error, .noTransport)
            XCTAssertEqual(error.description, "No transport configured (no relay origin)")
        }
    }
}
