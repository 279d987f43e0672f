// The HTTP/1.1 response parser of the client side (HTTPClient, WebSocketClient): status line,
// headers, and a body framed by Content-Length, chunked coding or the connection closing.
//
// Input: 2 settings bytes, then the bytes a server sends.
//   [0] bit 0: no body expected (a HEAD request or an upgrade); bit 1: small limits from [2...3];
//       bit 2: a WebSocket client reading the 101 (the head, then whatever follows it)
//   [1] the split seed (pieces(of:seed:))
//
// Parsed all at once and in pieces, with the peer closing after the last byte: both must reach
// the same response, or both fail.
import TetherNet

enum HTTPResponseFuzz {
    enum Outcome: Equatable {
        case incomplete
        case response(HTTPResponseParser.Head, [UInt8])
        case failed
    }

    static let key = "dGhlIHNhbXBsZSBub25jZQ=="

    static func run(_ data: [UInt8]) {
        var input = FuzzInput(data)
        let settings = input.byte()
        let seed = input.byte()
        var maxHead = 16 * 1024, maxBody = 16 * 1024 * 1024
        if settings & 2 != 0 {
            maxHead = 16 + Int(input.byte()) * 8
            maxBody = Int(input.byte()) * 16
        }
        let stream = input.rest()
        let make = {
            var parser = HTTPResponseParser(maxHeadBytes: maxHead, maxBodyBytes: maxBody)
            parser.expectsBody = settings & 1 == 0
            return parser
        }
        if settings & 4 != 0 {
            expect(upgrade(make(), [stream[...]]) == upgrade(make(), pieces(of: stream, seed: seed)), "the split changed the upgrade")
            return
        }
        let whole = exchange(make(), [stream[...]], maxHead: maxHead, maxBody: maxBody)
        let split = exchange(make(), pieces(of: stream, seed: seed), maxHead: maxHead, maxBody: maxBody)
        expect(whole == split, "the split changed the response")
    }

    /// As HTTPClient reads: after every read, and once more when the peer has closed. A response
    /// still incomplete must not hold more than its limits allow: the head, and a body of
    /// `maxBody` bytes in one-byte chunks with the longest size lines, and the trailers.
    static func exchange(_ start: HTTPResponseParser, _ reads: [ArraySlice<UInt8>], maxHead: Int, maxBody: Int) -> Outcome {
        var parser = start
        let bound = 2 * (maxHead + 4) + (maxBody + 1) * (1026 + 1 + 2)
        var held = 0
        do throws(HTTPParseError) {
            for index in 0...reads.count {
                let closed = index == reads.count
                if !closed {
                    parser.feed(reads[index])
                    held += reads[index].count
                }
                guard let head = try parser.parseHead() else {
                    if closed { return .incomplete }
                    expect(held <= bound, "more bytes held for a head than its limit")
                    continue
                }
                expect((0...999).contains(head.status), "a status of more than three digits")
                // A chunked body the close cut short is still incomplete (the client then fails
                // with the close itself).
                guard let body = try parser.body(closed: closed) else {
                    expect(held <= bound, "more bytes held for a body than its limits allow")
                    continue
                }
                expect(body.count <= maxBody, "a body beyond the limit")
                touch(head.headers.count)
                return .response(head, body)
            }
        } catch {
            expect([400, 413, 431].contains(error.status), "an unexpected status \(error.status)")
            return .failed
        }
        return .incomplete
    }

    /// As WebSocketClient reads the 101: the head, its check, and every byte behind it.
    static func upgrade(_ start: HTTPResponseParser, _ reads: [ArraySlice<UInt8>]) -> Outcome {
        var parser = start
        do throws(HTTPParseError) {
            for (index, read) in reads.enumerated() {
                parser.feed(read)
                guard let head = try parser.parseHead() else { continue }
                touch(WebSocketHandshake.validateServerResponse(status: head.status, headers: head.headers, key: key))
                return .response(head, parser.takeRemaining() + reads[(index + 1)...].joined())
            }
        } catch {
            return .failed
        }
        return .incomplete
    }
}

extension HTTPResponseFuzz {
    /// Answers Tether's clients read: the resolver's shard map, APNs-style errors, the relay's
    /// JSON, a 101 (RFC 6455 §1.3), chunked and close-delimited bodies.
    static var seeds: [String: [UInt8]] {
        let responses = [
            "length": "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}",
            "chunked": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\n{\"a\"\r\n3\r\n:1}\r\n0\r\n\r\n",
            "chunked-trailers": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1;x=y\r\na\r\n0\r\nT: 1\r\n\r\n",
            "close-delimited": "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end",
            "no-content": "HTTP/1.1 204 No Content\r\n\r\n",
            "not-found": "HTTP/1.1 404 Not Found\r\nContent-Length: 9\r\nConnection: close\r\n\r\nnot found",
            "shardmap": "HTTP/1.1 200 OK\r\nContent-Length: 61\r\n\r\n{\"version\":1,\"ranges\":[{\"low\":0,\"high\":65535,\"host\":\"r.ex\"}]}",
        ]
        var seeds: [String: [UInt8]] = [:]
        for (name, text) in responses {
            seeds[name] = [0, 0] + Array(text.utf8)
            seeds[name + "-split"] = [0, 0x2B] + Array(text.utf8)
        }
        seeds["head"] = [0x01, 0] + Array(responses["length"]!.utf8)
        seeds["small-limits"] = [0x02, 0x05, 4, 1] + Array(responses["chunked"]!.utf8)
        let upgrade = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n"
        let frame: [UInt8] = [0x81, 0x05] + Array("Hello".utf8)
        seeds["upgrade"] = [0x04, 0] + Array(upgrade.utf8) + frame
        seeds["upgrade-split"] = [0x04, 0x11] + Array(upgrade.utf8) + frame
        return seeds
    }
}
