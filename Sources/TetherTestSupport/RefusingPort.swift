public import Foundation
import Glibc

/// A loopback TCP port that refuses every connection for as long as this value lives: a socket
/// bound there that never listens. Unlike a `freePort()` nobody listens on, no other test can
/// take it meanwhile (under `swift test --parallel` a free port may be bound by a neighbour).
/// `datagram`: a UDP port instead, where datagrams are queued and never answered.
public final class RefusingPort: @unchecked Sendable {  // the descriptor is set once in init
    public let port: UInt16
    private let fd: Int32

    public init(datagram: Bool = false) {
        (fd, port) = Self.bindLoopback(datagram: datagram)
    }

    /// A socket bound to 127.0.0.1 on a port the kernel picks, and that port.
    static func bindLoopback(datagram: Bool = false) -> (fd: Int32, port: UInt16) {
        let fd = socket(AF_INET, Int32((datagram ? SOCK_DGRAM : SOCK_STREAM).rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        return (fd, UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }
}
