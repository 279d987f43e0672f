import Foundation
import TetherClient
import TetherNet
import TetherTestSupport
import TetherWire
import XCTest

/// The SDK's relay layer against the real `tether relay` binary over loopback.
final class RelayClientEndToEndTests: XCTestCase {
    private var group: EventLoopGroup!

    override func setUpWithError() throws { group = try EventLoopGroup(count: 1) }
    override func tearDown() { group.shutdown() }

    private func room(_ relay: RelayProcess) -> RelayRoom {
        RelayRoom(origin: relay.origin, name: RoomName(responderStaticKey: [UInt8](repeating: UInt8.random(in: 0...255), count: 32), pairingID: UUID().uuidString))
    }

    private func next(_ socket: AdmittedSocket) async -> [UInt8]? {
        var iterator = socket.frames.makeAsyncIterator()
        return await iterator.next()
    }

    func testPairRegisterSignedRejoinAndDeleteThroughTheSDK() async throws {
        let relay = try RelayProcess()
        let room = room(relay)
        let loop = group.loops[0]
        let calls = RelayCalls(room: room, loop: loop)

        let mac = try await RelayAdmission.join(room, role: .mac, proof: .park, on: loop)
        XCTAssertNil(mac.registrationToken)
        let phone = try await RelayAdmission.join(room, role: .phone, proof: .park, on: loop)
        let token = try XCTUnwrap(phone.registrationToken)
        XCTAssertEqual(token.count, 32)
        phone.send([1, 2, 3])
        let atMac = await next(mac)
        XCTAssertEqual(atMac, [1, 2, 3])
        mac.send(Array(repeating: 9, count: 100_000))
        let atPhone = await next(phone)
        XCTAssertEqual(atPhone?.count, 100_000)

        let secret = RoomSecret.generate()
        try await calls.register(registrationToken: token, verifier: secret.verifier)
        try await calls.register(registrationToken: token, verifier: secret.verifier)   // `already registered` is success
        phone.close()
        mac.close()

        do {
            _ = try await RelayAdmission.join(room, role: .mac, proof: .park, on: loop)
            XCTFail("an established room needs a signature")
        } catch {
            XCTAssertEqual(error, .refused("signature required"))
            XCTAssertEqual(error.description, "Relay refused admission: signature required")
        }
        let signedMac = try await RelayAdmission.join(room, role: .mac, proof: .signed(secret), on: loop)
        let signedPhone = try await RelayAdmission.join(room, role: .phone, proof: .signed(secret), on: loop)
        do {
            _ = try await RelayAdmission.join(room, role: .phone, proof: .signed(RoomSecret.generate()), on: loop)
            XCTFail("another secret")
        } catch {
            XCTAssertEqual(error, .refused("bad signature"))
        }

        try await calls.delete(roomSecret: secret)
        for socket in [signedMac, signedPhone] {
            for await _ in socket.frames {}
            XCTAssertEqual(socket.closeReceived?.code, 1000)
            XCTAssertEqual(socket.closeReceived?.reason, "room deleted")
        }
        try await calls.delete(roomSecret: secret)   // `not established` is success
    }

    func testRefusalsAreTypedAndClassified() async throws {
        let relay = try RelayProcess()
        let room = room(relay)
        let loop = group.loops[0]
        do {
            _ = try await RelayAdmission.join(room, role: .phone, proof: .park, on: loop)
            XCTFail("no mac parked")
        } catch {
            XCTAssertEqual(error, .refused("mac offline"))
            XCTAssertEqual(error.signal, .transient)
        }
        do {
            _ = try await RelayCalls(room: room, loop: loop).attest(challenge: "x", attestationObject: [1])
            XCTFail("open mode")
        } catch {
            XCTAssertEqual(error, .refused(status: 400, error: "attestation disabled"))
            XCTAssertEqual(error.signal, .fatal)
        }
        relay.stop()
        do {
            _ = try await RelayCalls(room: room, loop: loop).challenge()
            XCTFail("relay stopped")
        } catch {
            guard case .unreachable = error else { return XCTFail("\(error)") }
            XCTAssertEqual(error.signal, .transient)
        }
    }

    func testAMisdirectedRoomSignalsReResolve() async throws {
        let port = 1   // only named in an origin that is not this relay's own; nothing binds it
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("tether-client-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let map = directory.appendingPathComponent("map.json")
        // This node owns no bucket: every room is elsewhere.
        try Data(#"{"version":1,"ranges":[{"low":0,"high":65535,"host":"relay2.example"}]}"#.utf8).write(to: map)
        let relay = try RelayProcess(database: ":memory:", ["--relay-shard-map", map.path, "--relay-origin", "http://127.0.0.1:\(port)"])
        let room = room(relay)
        let loop = group.loops[0]
        do {
            _ = try await RelayCalls(room: room, loop: loop).challenge()
            XCTFail("misdirected")
        } catch {
            XCTAssertEqual(error, .misdirected(owner: "relay2.example"))
            XCTAssertEqual(error.signal, .reResolve(owner: "relay2.example"))
        }
        do {
            _ = try await RelayAdmission.join(room, role: .mac, proof: .park, on: loop)
            XCTFail("misdirected")
        } catch {
            XCTAssertEqual(error.signal, .reResolve(owner: nil))
        }
    }
}
