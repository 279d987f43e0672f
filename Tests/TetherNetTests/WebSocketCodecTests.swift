import TetherCrypto
import TetherNet
import TetherTestSupport
import XCTest

final class WebSocketCodecTests: XCTestCase {
    private func frames(_ bytes: [UInt8], role: WebSocketFrameParser.Role, max: Int = 1 << 20) throws -> [WebSocketFrame] {
        var parser = WebSocketFrameParser(role: role, maxFramePayload: max)
        parser.feed(bytes)
        var out: [WebSocketFrame] = []
        while let frame = try parser.nextFrame() { out.append(frame) }
        return out
    }

    private func assertClose(_ code: UInt16, role: WebSocketFrameParser.Role = .server, max: Int = 1 << 20, _ bytes: [UInt8],
                             file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try frames(bytes, role: role, max: max), file: file, line: line) {
            XCTAssertEqual(($0 as? WebSocketProtocolError)?.closeCode, code, "\($0)", file: file, line: line)
        }
    }

    func testRFC6455ExampleFramesAndAcceptValue() throws {
        let file = try Vectors.json("websocket/rfc6455-examples.json")
        let handshake = file["handshake"] as? [String: Any] ?? [:]
        XCTAssertEqual(WebSocketHandshake.accept(forKey: handshake["sec_websocket_key"] as? String ?? ""), handshake["sec_websocket_accept"] as? String)
        var checked = 0
        for f in file["frames"] as? [[String: Any]] ?? [] {
            guard let hex = f["frame_hex"] as? String else { continue }
            let bytes = try hexBytes(hex)
            let role: WebSocketFrameParser.Role = (f["masked"] as? Bool ?? false) ? .server : .client
            let parsed = try frames(bytes, role: role)
            XCTAssertEqual(parsed.count, 1)
            XCTAssertEqual(parsed[0].fin, f["fin"] as? Bool)
            XCTAssertEqual(Int(parsed[0].opcode.rawValue), f["opcode"] as? Int)
            if let text = f["payload_utf8"] as? String { XCTAssertEqual(parsed[0].payload, Array(text.utf8)) }
            let key = try (f["masking_key"] as? String).map { k -> (UInt8, UInt8, UInt8, UInt8) in
                let b = try hexBytes(k)
                return (b[0], b[1], b[2], b[3])
            }
            XCTAssertEqual(WebSocketFrameEncoder.encode(parsed[0], maskingKey: key), bytes, "re-encoding \(f["name"] ?? "")")
            checked += 1
        }
        XCTAssertGreaterThanOrEqual(checked, 6)
        XCTAssertEqual(WebSocketFrameEncoder.header(opcode: .binary, length: 256), [0x82, 0x7e, 0x01, 0x00])
        XCTAssertEqual(WebSocketFrameEncoder.header(opcode: .binary, length: 65536), [0x82, 0x7f, 0, 0, 0, 0, 0, 1, 0, 0])
    }

    func testFramesSplitAtEveryByteReassemble() throws {
        let payload = (0..<300).map { UInt8(truncatingIfNeeded: $0) }
        let bytes = WebSocketFrameEncoder.encode(WebSocketFrame(opcode: .binary, payload: payload), maskingKey: (1, 2, 3, 4))
        var parser = WebSocketFrameParser(role: .server, maxFramePayload: 1000)
        var got: [WebSocketFrame] = []
        for byte in bytes {
            parser.feed([byte])
            if let frame = try parser.nextFrame() { got.append(frame) }
        }
        XCTAssertEqual(got, [WebSocketFrame(opcode: .binary, payload: payload)])
        XCTAssertEqual(parser.bufferedByteCount, 0)
    }

    // MARK: Rules, each with its close code

    func testUnmaskedClientFrameIs1002() { assertClose(1002, role: .server, [0x81, 0x01, 0x41]) }
    func testMaskedServerFrameIs1002() { assertClose(1002, role: .client, [0x81, 0x81, 1, 2, 3, 4, 0x41]) }
    func testReservedBitsAre1002() {
        for rsv: UInt8 in [0x40, 0x20, 0x10] { assertClose(1002, role: .client, [0x81 | rsv, 0x00]) }
    }
    func testReservedOpcodesAre1002() {
        for opcode: UInt8 in [3, 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF] { assertClose(1002, role: .client, [0x80 | opcode, 0x00]) }
    }
    func testFragmentedControlFrameIs1002() { assertClose(1002, role: .client, [0x09, 0x00]) }
    func testControlFrameOver125BytesIs1002() { assertClose(1002, role: .client, [0x89, 0x7e, 0x00, 0x7e] + [UInt8](repeating: 0, count: 126)) }
    func testSixtyFourBitLengthWithTopBitIs1002() { assertClose(1002, role: .client, [0x82, 0x7f, 0x80, 0, 0, 0, 0, 0, 0, 1]) }
    func testFrameAboveTheCapIs1009FromTheHeaderAlone() {
        // Only the header is sent: the parser refuses before any payload is buffered.
        assertClose(1009, role: .client, max: 8192, [0x82, 0x7e, 0x20, 0x01])
    }

    func testMessageAssemblyAcrossFragmentsWithInterleavedControlFrames() throws {
        var assembler = WebSocketMessageAssembler(maxMessageSize: 100)
        XCTAssertNil(try assembler.consume(WebSocketFrame(fin: false, opcode: .text, payload: Array("Hel".utf8))))
        XCTAssertEqual(try assembler.consume(WebSocketFrame(opcode: .ping, payload: [1])), .ping([1]))
        XCTAssertEqual(try assembler.consume(WebSocketFrame(fin: true, opcode: .continuation, payload: Array("lo".utf8))), .text(Array("Hello".utf8)))
        XCTAssertEqual(try assembler.consume(WebSocketFrame(opcode: .binary, payload: [9])), .binary([9]))
    }

    func testFragmentationRulesAre1002() {
        var a = WebSocketMessageAssembler(maxMessageSize: 100)
        XCTAssertThrowsError(try a.consume(WebSocketFrame(opcode: .continuation, payload: []))) {
            XCTAssertEqual(($0 as? WebSocketProtocolError)?.closeCode, 1002)
        }
        var b = WebSocketMessageAssembler(maxMessageSize: 100)
        XCTAssertNoThrow(try b.consume(WebSocketFrame(fin: false, opcode: .binary, payload: [1])))
        XCTAssertThrowsError(try b.consume(WebSocketFrame(opcode: .text, payload: []))) {
            XCTAssertEqual(($0 as? WebSocketProtocolError)?.closeCode, 1002)
        }
    }

    func testMessageAboveTheCapIs1009() {
        var a = WebSocketMessageAssembler(maxMessageSize: 10)
        XCTAssertNoThrow(try a.consume(WebSocketFrame(fin: false, opcode: .binary, payload: [UInt8](repeating: 0, count: 6))))
        XCTAssertThrowsError(try a.consume(WebSocketFrame(fin: false, opcode: .continuation, payload: [UInt8](repeating: 0, count: 6)))) {
            XCTAssertEqual(($0 as? WebSocketProtocolError)?.closeCode, 1009)
        }
    }

    func testInvalidUTF8Is1007IncludingAcrossFragmentsAndInCloseReasons() {
        var a = WebSocketMessageAssembler(maxMessageSize: 100)
        XCTAssertThrowsError(try a.consume(WebSocketFrame(opcode: .text, payload: [0xC0, 0x80]))) {
            XCTAssertEqual(($0 as? WebSocketProtocolError)?.closeCode, 1007)
        }
        // A valid prefix then an invalid continuation fails on the fragment that breaks it.
        var b = WebSocketMessageAssembler(maxMessageSize: 100)
        XCTAssertNoThrow(try b.consume(WebSocketFrame(fin: false, opcode: .text, payload: [0xCE])))
        XCTAssertThrowsError(try b.consume(WebSocketFrame(fin: false, opcode: .continuation, payload: [0x41]))) {
            XCTAssertEqual(($0 as? WebSocketProtocolError)?.closeCode, 1007)
        }
        // A sequence split across fragments is fine; one left incomplete at FIN is not.
        var c = WebSocketMessageAssembler(maxMessageSize: 100)
        XCTAssertNoThrow(try c.consume(WebSocketFrame(fin: false, opcode: .text, payload: [0xCE])))
        XCTAssertEqual(try c.consume(WebSocketFrame(fin: true, opcode: .continuation, payload: [0xBA])), .text([0xCE, 0xBA]))
        var d = WebSocketMessageAssembler(maxMessageSize: 100)
        XCTAssertNoThrow(try d.consume(WebSocketFrame(fin: false, opcode: .text, payload: [0xF0, 0x90])))
        XCTAssertThrowsError(try d.consume(WebSocketFrame(fin: true, opcode: .continuation, payload: [0x80]))) {
            XCTAssertEqual(($0 as? WebSocketProtocolError)?.closeCode, 1007)
        }
        var e = WebSocketMessageAssembler(maxMessageSize: 100)
        XCTAssertThrowsError(try e.consume(WebSocketFrame(opcode: .close, payload: [0x03, 0xE8, 0xFF]))) {
            XCTAssertEqual(($0 as? WebSocketProtocolError)?.closeCode, 1007)
        }
    }

    func testUTF8ValidatorBoundaries() {
        let valid: [[UInt8]] = [[0x7F], [0xC2, 0x80], [0xE0, 0xA0, 0x80], [0xED, 0x9F, 0xBF], [0xEF, 0xBF, 0xBF], [0xF0, 0x90, 0x80, 0x80],
                                [0xF4, 0x8F, 0xBF, 0xBF], Array("κόσμε".utf8)]
        let invalid: [[UInt8]] = [[0x80], [0xC0, 0x80], [0xC1, 0xBF], [0xE0, 0x80, 0x80], [0xED, 0xA0, 0x80], [0xF0, 0x80, 0x80, 0x80],
                                  [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80], [0xFF], [0xC2], [0xE0, 0xA0]]
        for bytes in valid { XCTAssertTrue(UTF8Validator.isValid(bytes), "\(bytes)") }
        for bytes in invalid { XCTAssertFalse(UTF8Validator.isValid(bytes), "\(bytes)") }
        // Against the standard library's decoder on every 2-byte sequence.
        for a in 0...255 {
            for b in 0...255 {
                let bytes = [UInt8(a), UInt8(b)]
                XCTAssertEqual(UTF8Validator.isValid(bytes), String(validating: bytes, as: UTF8.self) != nil, "\(bytes)")
            }
        }
    }

    func testCloseCodesMatchAutobahnSevenSevenAndSevenNine() throws {
        let file = try Vectors.json("websocket/autobahn-cases.json")
        let cases = file["cases"] as? [[String: Any]] ?? []
        var valid = 0, invalid = 0
        for c in cases {
            guard let id = c["id"] as? String, let description = c["description"] as? String else { continue }
            // "Send close with (in)valid close code N"
            guard id.hasPrefix("7.7.") || id.hasPrefix("7.9."), let number = description.split(separator: " ").last.flatMap({ Int($0) }) else { continue }
            let code = UInt16(clamping: number)
            let payload = [UInt8(code >> 8), UInt8(code & 0xFF)]
            var assembler = WebSocketMessageAssembler(maxMessageSize: 100)
            let accepted = (try? assembler.consume(WebSocketFrame(opcode: .close, payload: payload))) != nil
            if id.hasPrefix("7.7.") {
                XCTAssertTrue(accepted, "\(id): \(description)")
                valid += 1
            } else {
                XCTAssertFalse(accepted, "\(id): \(description)")
                invalid += 1
            }
        }
        XCTAssertEqual(valid, 13)
        XCTAssertGreaterThanOrEqual(invalid, 9)
        var a = WebSocketMessageAssembler(maxMessageSize: 100)
        XCTAssertThrowsError(try a.consume(WebSocketFrame(opcode: .close, payload: [0x03])), "one-byte close payload") {
            XCTAssertEqual(($0 as? WebSocketProtocolError)?.closeCode, 1002)
        }
        XCTAssertEqual(try a.consume(WebSocketFrame(opcode: .close, payload: [])), .close(code: nil, reason: ""))
        XCTAssertEqual(try a.consume(WebSocketFrame(opcode: .close, payload: WebSocketFrameEncoder.closePayload(code: 4421, reason: "reshard x")) ),
                       .close(code: 4421, reason: "reshard x"))
    }

    func testClosePayloadIsCutOnACharacterBoundary() {
        let payload = WebSocketFrameEncoder.closePayload(code: 1000, reason: String(repeating: "é", count: 100))
        XCTAssertLessThanOrEqual(payload.count, 125)
        XCTAssertTrue(UTF8Validator.isValid(Array(payload[2...])))
    }

    func testServerHandshakeDecisions() {
        func request(_ headers: [(String, String)], method: String = "GET") -> HTTPRequestHead {
            HTTPRequestHead(method: method, target: "/", headers: HTTPHeaders([("Host", "h")] + headers))
        }
        let good: [(String, String)] = [("Upgrade", "websocket"), ("Connection", "keep-alive, Upgrade"),
                                        ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), ("Sec-WebSocket-Version", "13")]
        guard case let .upgrade(response) = WebSocketHandshake.serverResponse(to: request(good)) else { return XCTFail("not upgraded") }
        XCTAssertEqual(response.status, 101)
        XCTAssertEqual(response.headers["Sec-WebSocket-Accept"], "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
        XCTAssertNil(response.headers["Sec-WebSocket-Extensions"])

        var version8 = good
        version8[3] = ("Sec-WebSocket-Version", "8")
        guard case .upgrade = WebSocketHandshake.serverResponse(to: request(version8)) else { return XCTFail("refused hybi-08") }
        var version7 = good
        version7[3] = ("Sec-WebSocket-Version", "7")
        guard case let .refuse(refusal) = WebSocketHandshake.serverResponse(to: request(version7)) else { return XCTFail("accepted v7") }
        XCTAssertEqual(refusal.status, 400)
        XCTAssertEqual(refusal.headers["Sec-WebSocket-Version"], "13, 8")
        guard case .refuse = WebSocketHandshake.serverResponse(to: request(Array(good.dropLast()))) else { return XCTFail("accepted without a version") }

        var badKey = good
        badKey[2] = ("Sec-WebSocket-Key", "short")
        XCTAssertEqual(WebSocketHandshake.serverResponse(to: request(badKey)), .refuse(.text(400, "bad Sec-WebSocket-Key")))
        XCTAssertEqual(WebSocketHandshake.serverResponse(to: request(good, method: "POST")), .refuse(.text(400, "bad upgrade method or version")))
        XCTAssertEqual(WebSocketHandshake.serverResponse(to: request(Array(good.dropFirst()))), .refuse(.text(400, "missing Upgrade: websocket")))
    }

    func testClientHandshakeValidation() {
        let (bytes, key) = WebSocketHandshake.clientRequest(host: "relay.example:8443", extraHeaders: HTTPHeaders([("x-relay-room", "r")]))
        let text = String(decoding: bytes, as: UTF8.self)
        XCTAssertTrue(text.hasPrefix("GET / HTTP/1.1\r\nHost: relay.example:8443\r\n"))
        XCTAssertTrue(text.contains("x-relay-room: r\r\n"))
        XCTAssertFalse(text.lowercased().contains("origin:"))
        let accept = WebSocketHandshake.accept(forKey: key)
        let good = HTTPHeaders([("Upgrade", "websocket"), ("Connection", "Upgrade"), ("Sec-WebSocket-Accept", accept)])
        XCTAssertTrue(WebSocketHandshake.validateServerResponse(status: 101, headers: good, key: key))
        XCTAssertFalse(WebSocketHandshake.validateServerResponse(status: 200, headers: good, key: key))
        XCTAssertFalse(WebSocketHandshake.validateServerResponse(status: 101, headers: HTTPHeaders([("Upgrade", "websocket"), ("Connection", "Upgrade"),
                                                                                                  ("Sec-WebSocket-Accept", "wrong")]), key: key))
        var withExtension = good
        withExtension.add("Sec-WebSocket-Extensions", "permessage-deflate")
        XCTAssertFalse(WebSocketHandshake.validateServerResponse(status: 101, headers: withExtension, key: key))
    }
}

final class WebSocketStreamingParseTests: XCTestCase {
    /// Frames of every size class, masked with varied keys, delivered in random splits through
    /// `consume` (the server's path), come out identical to what was sent.
    func testConsumeReassemblesFramesAcrossAnySplit() throws {
        var generator = SystemRandomNumberGenerator()
        let sizes = [0, 1, 125, 126, 4095, 4096, 4097, 16_384, 65_535, 65_536, 70_001]
        var sent: [WebSocketFrame] = []
        var stream: [UInt8] = []
        for (i, size) in sizes.enumerated() {
            let frame = WebSocketFrame(fin: i % 3 != 1, opcode: i % 3 == 1 ? .binary : (i % 3 == 2 ? .continuation : .binary),
                                       payload: (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ i) })
            sent.append(frame)
            stream += WebSocketFrameEncoder.encode(frame, maskingKey: (UInt8(i), 0xA5, UInt8(size & 0xFF), 0x3C))
        }
        for round in 0..<20 {
            var parser = WebSocketFrameParser(role: .server, maxFramePayload: 1 << 20)
            var received: [WebSocketFrame] = []
            var offset = 0
            while offset < stream.count {
                let step = round == 0 ? 1 : Int.random(in: 1...9000, using: &generator)
                let end = min(stream.count, offset + step)
                try stream[offset..<end].withUnsafeBytes { chunk in
                    try parser.consume(chunk) { received.append($0); return true }
                }
                offset = end
            }
            XCTAssertEqual(received.count, sent.count, "round \(round)")
            XCTAssertTrue(received == sent, "round \(round): frames differ")
            XCTAssertEqual(parser.bufferedByteCount, 0)
        }
    }
}
