import Glibc

/// An IPv4 or IPv6 socket address.
public struct SocketAddress: Sendable, Hashable, CustomStringConvertible {
    public enum Family: Sendable, Hashable { case ipv4, ipv6 }

    /// The numeric host (IPv4-mapped IPv6 addresses are shown as IPv4).
    public let host: String
    public let port: UInt16
    public let family: Family

    /// Parses a numeric IPv4 or IPv6 host (no DNS).
    public init(host: String, port: UInt16) throws(NetError) {
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            family = .ipv4
        } else if inet_pton(AF_INET6, host, &v6) == 1 {
            family = .ipv6
        } else {
            throw .invalidAddress(host)
        }
        self.host = host
        self.port = port
    }

    init(storage: sockaddr_storage) {
        var storage = storage
        if Int32(storage.ss_family) == AF_INET6 {
            let (text, port) = Self.numeric(&storage, as: sockaddr_in6.self, family: AF_INET6, length: INET6_ADDRSTRLEN) {
                ($0.sin6_addr, $0.sin6_port)
            }
            // ::ffff:a.b.c.d is an IPv4 client on a dual-stack socket.
            if text.hasPrefix("::ffff:"), text.contains(".") {
                host = String(text.dropFirst(7))
                family = .ipv4
            } else {
                host = text
                family = .ipv6
            }
            self.port = port
        } else {
            (host, port) = Self.numeric(&storage, as: sockaddr_in.self, family: AF_INET, length: INET_ADDRSTRLEN) { ($0.sin_addr, $0.sin_port) }
            family = .ipv4
        }
    }

    /// The numeric host and port of a `sockaddr_in` or `sockaddr_in6` held in `storage`.
    private static func numeric<Address, Raw>(_ storage: inout sockaddr_storage, as type: Address.Type, family: Int32, length: Int32,
                                              _ parts: (Address) -> (Raw, in_port_t)) -> (String, UInt16) {
        withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: type, capacity: 1) { pointer -> (String, UInt16) in
                let (address, port) = parts(pointer.pointee)
                var buffer = [CChar](repeating: 0, count: Int(length))
                // `Raw` is in_addr or in6_addr: plain bytes, read as such.
                withUnsafeBytes(of: address) { _ = inet_ntop(family, $0.baseAddress, &buffer, socklen_t(buffer.count)) }
                return (cText(buffer), UInt16(bigEndian: port))
            }
        }
    }

    public var description: String { family == .ipv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// True for 127.0.0.0/8 and ::1.
    public var isLoopback: Bool { host == "::1" || (family == .ipv4 && host.hasPrefix("127.")) }

    /// Calls `body` with this address as a `sockaddr`.
    func withSockAddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        switch family {
        case .ipv4:
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            inet_pton(AF_INET, host, &address.sin_addr)
            return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        case .ipv6:
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = port.bigEndian
            inet_pton(AF_INET6, host, &address.sin6_addr)
            return withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
        }
    }

    var domain: Int32 { family == .ipv4 ? AF_INET : AF_INET6 }

    /// The local address of a socket.
    static func local(of fd: Int32) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return ok == 0 ? SocketAddress(storage: storage) : nil
    }
}

/// A NUL-terminated C buffer as a Swift string.
func cText(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}
