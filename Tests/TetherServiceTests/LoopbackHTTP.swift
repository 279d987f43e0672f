import Glibc
import TetherNet

/// One HTTP exchange over a fresh loopback connection, with exact bytes: what a scraper or a
/// curl on the host would send. `from` binds the client to another loopback address first.
struct LoopbackHTTP {
    struct Reply: Equatable {
        var status: Int
        var headers: [String: String]
        var body: String
    }

    static func send(_ request: String, port: UInt16, from source: String? = nil) throws -> Reply {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            inet_pton(AF_INET, source, &local.sin_addr)
            let bound = withUnsafePointer(to: &local) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            guard bound == 0 else { throw NetError.system("bind", errno) }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard connected == 0 else { throw NetError.system("connect", errno) }
        let bytes = Array(request.utf8)
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count <= 0 { break }
            received += buffer[0..<count]
        }
        return parse(String(decoding: received, as: UTF8.self))
    }

    /// `GET path` with `Connection: close` and any extra header lines.
    static func get(_ path: String, method: String = "GET", port: UInt16, headers: [String] = [], from source: String? = nil) throws -> Reply {
        let extra = headers.map { $0 + "\r\n" }.joined()
        return try send("\(method) \(path) HTTP/1.1\r\nHost: localhost\r\n\(extra)Connection: close\r\n\r\n", port: port, from: source)
    }

    private static func parse(_ text: String) -> Reply {
        guard let split = text.range(of: "\r\n\r\n") else { return Reply(status: 0, headers: [:], body: text) }
        let lines = text[..<split.lowerBound].components(separatedBy: "\r\n")
        let status = Int(lines[0].split(separator: " ")[1]) ?? 0
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = String(line[line.index(after: colon)...].drop { $0 == " " })
        }
        return Reply(status: status, headers: headers, body: String(text[split.upperBound...]))
    }
}
