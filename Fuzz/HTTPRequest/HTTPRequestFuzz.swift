// The HTTP/1.1 request parser (RFC 9112: request head, Content-Length and chunked body framing)
// driven as HTTPServer drives it, with the WebSocket upgrade check on every head.
//
// Input: 3 settings bytes, then the byte stream a client sends.
//   [0] bit 0: small limits from [3...5] instead of the defaults; bits 1-7: the per-request body
//       limits a route would set (a table, so a head can be answered 413 before its body)
//   [1] the split seed (pieces(of:seed:)): the stream arrives in reads of those sizes
//   [2] which reads are parsed at once (the server stops parsing while a reply is pending)
//
// The stream is parsed twice, all at once and in pieces; both must see the same requests and
// both succeed or both fail (which error is found first may differ: a head too long is
// noticed before a bare LF beyond the limit when bytes arrive slowly).
import TetherNet

enum HTTPRequestFuzz {
    struct Outcome: Equatable {
        var events: [HTTPRequestParser.Event] = []
        var failed = false
        /// After a WebSocket upgrade: every byte behind the head, parsed or not.
        var leftover: [UInt8]?
    }

    static let routeLimits = [0, 1, 7, 100, 4096, 64 * 1024, 1 << 20]

    static func run(_ data: [UInt8]) {
        var input = FuzzInput(data)
        let settings = input.byte()
        let seed = input.byte()
        let holds = input.byte()
        var limits = HTTPRequestParser.Limits()
        if settings & 1 == 1 {
            limits.maxHeadBytes = 16 + Int(input.byte()) * 8
            limits.maxHeaderCount = Int(input.byte() % 12)
            limits.defaultMaxBodyBytes = Int(input.byte()) * 16
        }
        let stream = input.rest()
        let whole = parse([stream[...]], limits: limits, settings: settings, holds: 0)
        let split = parse(pieces(of: stream, seed: seed), limits: limits, settings: settings, holds: holds)
        expect(whole == split, "the split changed what was parsed")
    }

    static func parse(_ reads: [ArraySlice<UInt8>], limits: HTTPRequestParser.Limits, settings: UInt8, holds: UInt8) -> Outcome {
        var parser = HTTPRequestParser(limits: limits)
        var outcome = Outcome()
        var fed = 0
        var bodyLimit = limits.defaultMaxBodyBytes
        for (index, read) in reads.enumerated() {
            parser.feed(read)
            fed += read.count
            expect(parser.bufferedByteCount <= fed, "more bytes buffered than received")
            // A pending reply holds the parser: some reads are only buffered until a later one.
            let last = index == reads.count - 1
            if !last, holds & (1 << (index & 7)) != 0 { continue }
            do throws(HTTPParseError) {
                while let event = try parser.next() {
                    outcome.events.append(event)
                    switch event {
                    case let .head(head):
                        check(head, limits: limits)
                        if head.isWebSocketUpgrade {
                            touch(WebSocketHandshake.serverResponse(to: head))
                            outcome.leftover = parser.takeUnparsed() + reads[(index + 1)...].joined()
                            return outcome
                        }
                        // The route's cap for this request, chosen per request.
                        let choice = Int(settings >> 1) >> (outcome.events.count % 3)
                        bodyLimit = choice == 0 ? limits.defaultMaxBodyBytes : routeLimits[choice % routeLimits.count]
                        parser.bodyLimit = bodyLimit
                    case let .body(body):
                        expect(body.count <= bodyLimit, "a body beyond the route's limit")
                        expect(parser.isIdle == (parser.bufferedByteCount == 0), "idle with bytes buffered")
                    }
                }
            } catch {
                expect([400, 413, 431, 501, 505].contains(error.status), "an unexpected status \(error.status)")
                // Failed stays failed, with the same answer.
                let first = error
                do throws(HTTPParseError) { _ = try parser.next(); finding("a failed parser recovered") } catch {
                    expect(error == first, "a failed parser changed its answer")
                }
                touch(HTTPResponse.text(error.status, error.reason).serialized(closing: true))
                outcome.failed = true
                return outcome
            }
        }
        return outcome
    }

    /// What a parsed head may be, whatever the input.
    static func check(_ head: HTTPRequestHead, limits: HTTPRequestParser.Limits) {
        expect(!head.method.isEmpty && !head.target.isEmpty, "an empty method or target")
        expect(head.target.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, "a target with spaces, controls or non-ASCII")
        expect(head.version == .http11 || head.version == .http10, "an unsupported version parsed")
        expect(head.headers.count <= limits.maxHeaderCount, "more header fields than the limit")
        if head.version == .http11 { expect(head.headers.values("Host").count == 1, "HTTP/1.1 without exactly one Host") }
        for field in head.headers {
            expect(!field.name.isEmpty && !field.name.utf8.contains(where: { $0 <= 0x20 || $0 == UInt8(ascii: ":") || $0 >= 0x7F }), "a bad header name")
            expect(!field.value.utf8.contains(where: { ($0 < 0x20 && $0 != 0x09) || $0 == 0x7F }), "a control character in a header value")
            expect(![0x20, 0x09].contains(field.value.utf8.first) && ![0x20, 0x09].contains(field.value.utf8.last), "an untrimmed header value")
        }
        touch(head.keepAlive)
        touch(head.path)
    }
}

extension HTTPRequestFuzz {
    /// Requests as Tether's servers meet them (HTTPRequestParserTests, the relay's, push relay's
    /// and signaling server's routes, RFC 6455's upgrade), each whole and split.
    static var seeds: [String: [UInt8]] {
        let requests = [
            "get": "GET /healthz HTTP/1.1\r\nHost: relay.example\r\n\r\n",
            "http10": "GET /metrics HTTP/1.0\r\n\r\n",
            "register": "POST /register HTTP/1.1\r\nHost: relay.example\r\nx-relay-room: \(String(repeating: "c", count: 64))\r\n"
                + "Content-Type: application/json\r\nContent-Length: 29\r\n\r\n{\"verifier\":\"AAAA\",\"x\":[1,2]}",
            "chunked": "POST /v1/push HTTP/1.1\r\nHost: push.example\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n",
            "pipelined": "GET /a HTTP/1.1\r\nHost: h\r\n\r\nPOST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc\r\nGET /c HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n",
            "upgrade": "GET /chat HTTP/1.1\r\nHost: server.example.com\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nOrigin: http://example.com\r\nSec-WebSocket-Version: 13\r\n\r\n",
            "mytty-push": "POST /v1/push HTTP/1.1\r\nHost: push.example\r\nx-mytty-push-id: 0f5c\r\nx-mytty-timestamp: 1700000000\r\n"
                + "x-mytty-signature: ab12\r\nContent-Length: 2\r\n\r\n{}",
            "signal": "GET /signal HTTP/1.1\r\nHost: signal.example\r\nConnection: keep-alive, Upgrade\r\nUpgrade: WebSocket\r\n"
                + "Sec-WebSocket-Version: 8\r\nSec-WebSocket-Key: AQIDBAUGBwgJCgsMDQ4PEA==\r\n\r\n",
            "bare-lf": "GET / HTTP/1.1\nHost: h\n\n",
            "folded": "GET / HTTP/1.1\r\nHost: h\r\nX: a\r\n b\r\n\r\n",
            "length-and-chunked": "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            "http2": "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        ]
        var seeds: [String: [UInt8]] = [:]
        for (name, text) in requests {
            seeds[name] = [0, 0, 0] + Array(text.utf8)
            seeds[name + "-split"] = [0, 0x5D, 0x24] + Array(text.utf8)
        }
        // Small limits: a head of at most 256 bytes, 4 fields, bodies of 32.
        seeds["small-limits"] = [0x01, 0x03, 0, 30, 4, 2] + Array(requests["pipelined"]!.utf8)
        // An upgrade with the client's first frame right behind its head.
        seeds["upgrade-frame"] = [0, 0x13, 0] + Array(requests["upgrade"]!.utf8) + [0x81, 0x85, 1, 2, 3, 4, 0x49, 0x67, 0x6F, 0x68, 0x6E]
        seeds["route-limit"] = [0x06, 0x07, 0] + Array(requests["register"]!.utf8)
        return seeds
    }
}
