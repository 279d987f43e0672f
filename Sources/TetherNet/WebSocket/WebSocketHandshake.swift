import TetherCrypto
import TetherEncoding

/// The opening handshake (RFC 6455 §4).
public enum WebSocketHandshake {
    static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
    static let supportedVersions: Set<String> = ["13", "8"]

    /// `Sec-WebSocket-Accept` for a client key: base64(SHA-1(key ‖ GUID)).
    public static func accept(forKey key: String) -> String {
        var input: [UInt8] = []
        input.reserveCapacity(key.utf8.count + guid.utf8.count)
        input.append(contentsOf: key.utf8)
        input.append(contentsOf: guid.utf8)
        return Base64.encode(HashFunction.sha1.hash(input))
    }

    public enum ServerDecision: Sendable, Equatable {
        /// The 101 response to send; the connection then speaks WebSocket.
        case upgrade(HTTPResponse)
        /// The refusal to send before closing.
        case refuse(HTTPResponse)
    }

    /// Validates an upgrade request: GET over HTTP/1.1, `Upgrade: websocket`,
    /// `Connection: upgrade`, one `Sec-WebSocket-Key` decoding to 16 bytes, and version 13 or 8.
    /// Version 8 (hybi-08) frames exactly like 13, and the companion relay's reference accepts
    /// both; anything else is refused 400 with `Sec-WebSocket-Version: 13, 8` (relay.md §2.6)
    /// rather than RFC 6455's suggested 426, because real clients were written against that.
    /// No extension or subprotocol is ever accepted, so the 101 carries neither.
    public static func serverResponse(to request: HTTPRequestHead) -> ServerDecision {
        guard request.method == "GET", request.version == .http11 else { return .refuse(.text(400, "bad upgrade method or version")) }
        guard request.headers.containsToken("websocket", in: "Upgrade") else { return .refuse(.text(400, "missing Upgrade: websocket")) }
        guard request.headers.containsToken("upgrade", in: "Connection") else { return .refuse(.text(400, "missing Connection: upgrade")) }
        guard let version = request.headers.only("Sec-WebSocket-Version"), supportedVersions.contains(String(version.trimmingASCIIWhitespace())) else {
            var refusal = HTTPResponse.text(400, "missing or invalid Sec-WebSocket-Version")
            refusal.headers.add("Sec-WebSocket-Version", "13, 8")
            return .refuse(refusal)
        }
        guard let field = request.headers.only("Sec-WebSocket-Key") else { return .refuse(.text(400, "bad Sec-WebSocket-Key")) }
        let key = String(field.trimmingASCIIWhitespace())
        guard let decoded = try? Base64.decode(key), decoded.count == 16 else { return .refuse(.text(400, "bad Sec-WebSocket-Key")) }
        var headers = HTTPHeaders()
        headers.reserveCapacity(3)
        headers.add("Upgrade", "websocket")
        headers.add("Connection", "Upgrade")
        headers.add("Sec-WebSocket-Accept", accept(forKey: key))
        return .upgrade(HTTPResponse(status: 101, headers: headers))
    }

    /// A client's upgrade request with a fresh random key; returns the request bytes and the key.
    public static func clientRequest(host: String, path: String = "/", extraHeaders: HTTPHeaders = HTTPHeaders()) -> (bytes: [UInt8], key: String) {
        let key = Base64.encode(SecureRandom.bytes(16))
        var text = "GET \(path) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        text += "Sec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"
        for field in extraHeaders { text += "\(field.name): \(field.value)\r\n" }
        text += "\r\n"
        return (Array(text.utf8), key)
    }

    /// Checks the server's answer: 101, `Upgrade: websocket`, `Connection: upgrade`, the
    /// matching accept value, and no extension or subprotocol the client did not ask for.
    public static func validateServerResponse(status: Int, headers: HTTPHeaders, key: String) -> Bool {
        status == 101
            && headers.containsToken("websocket", in: "Upgrade")
            && headers.containsToken("upgrade", in: "Connection")
            && headers.only("Sec-WebSocket-Accept") == accept(forKey: key)
            && !headers.contains("Sec-WebSocket-Extensions")
            && !headers.contains("Sec-WebSocket-Protocol")
    }
}
