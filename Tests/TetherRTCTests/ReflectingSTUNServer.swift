import Foundation
import Glibc

/// A STUN Binding responder (RFC 5389) on 127.0.0.1 that reports a fixed mapped address, as a
/// server behind a NAT would see the client: on one machine that is the only way to get a
/// server-reflexive address that differs from the host one.
final class ReflectingSTUNServer: @unchecked Sendable {
    let port: UInt16
    private let fd: Int32
    private let mapped: (address: [UInt8], port: UInt16)
    private let done = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var answered = 0

    init(mappedAddress: [UInt8], mappedPort: UInt16) throws {
        precondition(mappedAddress.count == 4)
        mapped = (mappedAddress, mappedPort)
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        var timeout = timeval(tv_sec: 0, tv_usec: 100_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0 else { throw POSIXError(.EADDRINUSE) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        self.port = UInt16(bigEndian: address.sin_port)
        let thread = Thread { [self] in serve() }
        thread.start()
    }

    var bindingsAnswered: Int { lock.withLock { answered } }

    func stop() {
        shutdown(fd, Int32(SHUT_RDWR))
        done.wait()
        close(fd)
    }

    private func serve() {
        var buffer = [UInt8](repeating: 0, count: 1500)
        while true {
            var peer = sockaddr_in()
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let count = withUnsafeMutablePointer(to: &peer) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, &buffer, buffer.count, 0, $0, &length) }
            }
            if count < 0, errno == EAGAIN || errno == EWOULDBLOCK { continue }
            if count <= 0 { break }
            // A Binding request. libnice discovers server-reflexive addresses in RFC 3489
            // style (no magic cookie, a 16-byte transaction ID), which servers still answer.
            guard count >= 20, buffer[0] == 0, buffer[1] == 1 else { continue }
            let response = Array(buffer[4..<8]) == Self.cookie
                ? Self.bindingSuccess(transaction: Array(buffer[8..<20]), address: mapped.address, port: mapped.port)
                : Self.classicBindingSuccess(transaction: Array(buffer[4..<20]), address: mapped.address, port: mapped.port)
            _ = withUnsafePointer(to: &peer) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sendto(fd, response, response.count, 0, $0, length) }
            }
            lock.withLock { answered += 1 }
        }
        done.signal()
    }

    static let cookie: [UInt8] = [0x21, 0x12, 0xA4, 0x42]

    /// RFC 3489 Binding success: the request's 16-byte transaction ID and MAPPED-ADDRESS.
    static func classicBindingSuccess(transaction: [UInt8], address: [UInt8], port: UInt16) -> [UInt8] {
        [0x01, 0x01, 0x00, 0x0C] + transaction + [0x00, 0x01, 0x00, 0x08, 0x00, 0x01, UInt8(port >> 8), UInt8(port & 0xff)] + address
    }

    /// RFC 5389 Binding success with XOR-MAPPED-ADDRESS and FINGERPRINT.
    static func bindingSuccess(transaction: [UInt8], address: [UInt8], port: UInt16) -> [UInt8] {
        let xport = port ^ 0x2112
        var xor: [UInt8] = [0x00, 0x20, 0x00, 0x08, 0x00, 0x01, UInt8(xport >> 8), UInt8(xport & 0xff)]
        xor += zip(address, cookie).map { $0 ^ $1 }
        func header(_ length: Int) -> [UInt8] { [0x01, 0x01, UInt8(length >> 8), UInt8(length & 0xff)] + cookie + transaction }
        // FINGERPRINT covers the message with a length that already counts it (RFC 5389 §15.5).
        let crc = crc32(header(xor.count + 8) + xor) ^ 0x5354_554E
        let fingerprint: [UInt8] = [0x80, 0x28, 0x00, 0x04, UInt8(crc >> 24), UInt8(crc >> 16 & 0xff), UInt8(crc >> 8 & 0xff), UInt8(crc & 0xff)]
        return header(xor.count + 8) + xor + fingerprint
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for byte in bytes {
            crc ^= UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 1 ? (crc >> 1) ^ 0xEDB8_8320 : crc >> 1 }
        }
        return ~crc
    }
}
