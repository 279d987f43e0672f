// The WebSocket frame parser, message assembler and UTF-8 validator together (RFC 6455 §5),
// driven as WebSocketConnection drives them: frames parsed straight out of each read (the
// streaming path for large frames included), each handed to the assembler, reading stopped at
// the peer's close or the first violation.
//
// Input: 2 settings bytes, then the bytes the peer sends.
//   [0] bit 0: the role (0 a server reading masked client frames, 1 a client); bits 1-3 and
//       4-6: the frame and message caps (a table); bit 7: stop at every ping too
//   [1] the split seed (pieces(of:seed:))
//
// The same stream also goes whole through feed/nextFrame, the parser's other entry point; both
// must give the same messages and the same close code. Every text the validator passes must be
// UTF-8 to Swift's own decoder too, and the stream itself is checked against it in pieces.
import TetherNet

enum WebSocketFuzz {
    enum Step: Equatable {
        case event(WebSocketMessageAssembler.Event)
        case failed(UInt16)
    }

    static let caps = [0, 1, 125, 126, 4096, 65_536, 1 << 20, 16 << 20]

    static func run(_ data: [UInt8]) {
        var input = FuzzInput(data)
        let settings = input.byte()
        let seed = input.byte()
        let role: WebSocketFrameParser.Role = settings & 1 == 0 ? .server : .client
        let maxFrame = caps[Int(settings >> 1) & 7]
        let maxMessage = caps[Int(settings >> 4) & 7]
        let stopAtPing = settings & 0x80 != 0
        let stream = input.rest()
        let reads = pieces(of: stream, seed: seed)

        let streamed = consume(reads, role: role, maxFrame: maxFrame, maxMessage: maxMessage, stopAtPing: stopAtPing)
        let pulled = pull(stream, role: role, maxFrame: maxFrame, maxMessage: maxMessage, stopAtPing: stopAtPing)
        expect(streamed == pulled, "consume and nextFrame disagree")

        var validator = UTF8Validator()
        var valid = true
        for read in reads where valid { valid = read.withUnsafeBytes { validator.feed($0) } }
        expect((valid && validator.isComplete) == (String(validating: stream, as: UTF8.self) != nil), "UTF8Validator disagrees with Swift")
    }

    /// WebSocketConnection's path: `consume` on each read, the assembler inside its callback.
    static func consume(_ reads: [ArraySlice<UInt8>], role: WebSocketFrameParser.Role, maxFrame: Int, maxMessage: Int, stopAtPing: Bool) -> [Step] {
        var parser = WebSocketFrameParser(role: role, maxFramePayload: maxFrame)
        var assembler = WebSocketMessageAssembler(maxMessageSize: maxMessage)
        var steps: [Step] = []
        var done = false
        for read in reads where !done {
            let result: Result<Void, WebSocketProtocolError> = read.withUnsafeBytes { bytes in
                do throws(WebSocketProtocolError) {
                    try parser.consume(bytes) { frame in
                        guard !done else { return false }
                        check(frame, role: role, maxFrame: maxFrame)
                        done = deliver(frame, to: &assembler, &steps, maxMessage: maxMessage, stopAtPing: stopAtPing)
                        return !done
                    }
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }
            if case let .failure(error) = result {
                steps.append(.failed(error.closeCode))
                done = true
            }
        }
        return steps
    }

    /// The other entry point: everything fed at once, frames pulled one by one.
    static func pull(_ stream: [UInt8], role: WebSocketFrameParser.Role, maxFrame: Int, maxMessage: Int, stopAtPing: Bool) -> [Step] {
        var parser = WebSocketFrameParser(role: role, maxFramePayload: maxFrame)
        var assembler = WebSocketMessageAssembler(maxMessageSize: maxMessage)
        var steps: [Step] = []
        parser.feed(stream)
        do throws(WebSocketProtocolError) {
            while let frame = try parser.nextFrame() {
                check(frame, role: role, maxFrame: maxFrame)
                if deliver(frame, to: &assembler, &steps, maxMessage: maxMessage, stopAtPing: stopAtPing) { break }
            }
        } catch {
            steps.append(.failed(error.closeCode))
            // A failed parser stays failed.
            let first = error
            do throws(WebSocketProtocolError) { _ = try parser.nextFrame(); finding("a failed frame parser recovered") } catch {
                expect(error == first, "a failed frame parser changed its error")
            }
        }
        return steps
    }

    /// Hands a frame to the assembler; true when reading stops (a close, a violation).
    static func deliver(_ frame: WebSocketFrame, to assembler: inout WebSocketMessageAssembler, _ steps: inout [Step], maxMessage: Int,
                        stopAtPing: Bool) -> Bool {
        do throws(WebSocketProtocolError) {
            guard let event = try assembler.consume(frame) else { return false }
            steps.append(.event(event))
            switch event {
            case let .text(text):
                expect(text.count <= maxMessage, "a text message beyond the cap")
                expect(String(validating: text, as: UTF8.self) != nil, "a text message that is not UTF-8")
            case let .binary(binary):
                expect(binary.count <= maxMessage, "a binary message beyond the cap")
            case let .close(code, reason):
                if let code { expect(WebSocketCloseCode.isValidOnWire(code), "a close code not allowed on the wire") }
                touch(WebSocketFrameEncoder.closePayload(code: code ?? WebSocketCloseCode.normal, reason: reason))
                return true
            case .ping:
                return stopAtPing
            case .pong:
                break
            }
            return false
        } catch {
            steps.append(.failed(error.closeCode))
            return true
        }
    }

    /// A frame as parsed: within the caps, control frames whole and short, and encoded again
    /// (masked when a client would send it) it parses back to itself.
    static func check(_ frame: WebSocketFrame, role: WebSocketFrameParser.Role, maxFrame: Int) {
        expect(frame.payload.count <= maxFrame, "a frame beyond the cap")
        if frame.opcode.isControl { expect(frame.fin && frame.payload.count <= 125, "a fragmented or long control frame") }
        let key: (UInt8, UInt8, UInt8, UInt8)? = role == .server ? (0x37, 0xFA, 0x21, UInt8(truncatingIfNeeded: frame.payload.count)) : nil
        var again = WebSocketFrameParser(role: role, maxFramePayload: maxFrame)
        again.feed(WebSocketFrameEncoder.encode(frame, maskingKey: key))
        expect((try? again.nextFrame()) == frame, "a frame did not survive encoding")
    }
}

extension WebSocketFuzz {
    /// RFC 6455 §5.7's frames (Tests/Vectors/websocket) and the shapes Autobahn's sections 1-7
    /// exercise: fragments with control frames between, a frame large enough to stream, closes,
    /// UTF-8 split across fragments, and violations. Caps 1 MiB unless named.
    static var seeds: [String: [UInt8]] {
        let server: UInt8 = 6 << 1 | 6 << 4, client = server | 1
        let key: (UInt8, UInt8, UInt8, UInt8) = (0x37, 0xFA, 0x21, 0x3D)
        func masked(_ frame: WebSocketFrame) -> [UInt8] { WebSocketFrameEncoder.encode(frame, maskingKey: key) }
        func text(_ s: String, fin: Bool = true) -> WebSocketFrame { WebSocketFrame(fin: fin, opcode: .text, payload: Array(s.utf8)) }
        let euro: [UInt8] = [0xE2, 0x82, 0xAC]
        return [
            "rfc-unmasked-text": [client, 0] + [0x81, 0x05, 0x48, 0x65, 0x6C, 0x6C, 0x6F],
            "rfc-masked-text": [server, 0] + [0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58],
            "rfc-fragments": [client, 0x0A] + [0x01, 0x03, 0x48, 0x65, 0x6C, 0x89, 0x00, 0x80, 0x02, 0x6C, 0x6F],
            "rfc-masked-pong": [server, 0x03] + [0x8A, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58],
            "fragments-ping-between": [server, 0x2C] + masked(text("fra", fin: false)) + masked(WebSocketFrame(opcode: .ping, payload: [1, 2]))
                + masked(WebSocketFrame(fin: false, opcode: .continuation, payload: Array("gm".utf8)))
                + masked(WebSocketFrame(opcode: .continuation, payload: Array("ents".utf8))),
            "utf8-across-fragments": [server, 0x05] + masked(WebSocketFrame(fin: false, opcode: .text, payload: [0x41] + euro.prefix(2)))
                + masked(WebSocketFrame(opcode: .continuation, payload: Array(euro.suffix(1)))),
            "binary-large": [server, 0x77] + masked(WebSocketFrame(opcode: .binary, payload: (0..<5000).map { UInt8(truncatingIfNeeded: $0) })),
            "binary-16bit-length": [client, 0x16] + WebSocketFrameEncoder.encode(WebSocketFrame(opcode: .binary, payload: [UInt8](repeating: 0x42, count: 300))),
            "close": [server, 0] + masked(WebSocketFrame(opcode: .close, payload: WebSocketFrameEncoder.closePayload(code: 1000, reason: "bye"))),
            "close-then-more": [client, 0] + WebSocketFrameEncoder.encode(WebSocketFrame(opcode: .close, payload: [0x0F, 0xA0]))
                + WebSocketFrameEncoder.encode(text("after")),
            "close-bad-code": [server, 0] + masked(WebSocketFrame(opcode: .close, payload: [0x03, 0xED])),
            "invalid-utf8": [server, 0] + masked(WebSocketFrame(opcode: .text, payload: [0xCE, 0xBA, 0xE1, 0xBD, 0xB9, 0xCF, 0x83, 0xED, 0xA0, 0x80])),
            "reserved-bits": [server, 0] + [0xC1, 0x80, 0, 0, 0, 0],
            "unmasked-to-server": [server, 0] + WebSocketFrameEncoder.encode(text("hi")),
            "64bit-length": [client, 0] + [0x82, 0x7F, 0, 0, 0, 0, 0, 0, 0x10, 0x00] + [UInt8](repeating: 0x61, count: 100),
            "too-big-for-125": [2 << 1 | 2 << 4, 0] + masked(WebSocketFrame(opcode: .binary, payload: [UInt8](repeating: 0, count: 200))),
            "stop-at-ping": [server | 0x80, 0] + masked(WebSocketFrame(opcode: .ping)) + masked(text("unread")),
        ]
    }
}
