import Glibc

/// A UDP socket on 127.0.0.1 that remembers the last sender, for running a `DTLSTransport`
/// against a real DTLS implementation (`openssl s_client`) in another process.
final class LoopbackUDPSocket {
    let fd: Int32
    let port: UInt16
    private var peer: sockaddr_in?

    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
        guard fd >= 0 else { throw Failure.socket(errno) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound else {
            Glibc.close(fd)
            throw Failure.socket(errno)
        }
        self.fd = fd
        port = UInt16(bigEndian: address.sin_port)
    }

    deinit { Glibc.close(fd) }

    enum Failure: Error { case socket(Int32) }

    /// One datagram, waiting at most `timeout`; nil if none came.
    func receive(timeout: Duration) -> [UInt8]? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let (seconds, attoseconds) = timeout.components
        guard poll(&poller, 1, Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000)) == 1 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 65536)
        var from = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let count = withUnsafeMutablePointer(to: &from) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { recvfrom(fd, &buffer, buffer.count, 0, $0, &length) }
        }
        guard count >= 0 else { return nil }
        peer = from
        return Array(buffer[..<count])
    }

    /// Sends to whoever sent last (nothing before anyone has).
    func send(_ datagram: [UInt8]) {
        guard var peer else { return }
        _ = withUnsafePointer(to: &peer) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                sendto(fd, datagram, datagram.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
    }
}
