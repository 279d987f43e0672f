import CTetherSystem
import Glibc
import XCTest

final class SystemShimTests: XCTestCase {
    func testEventfdSignalWakesEpollWithItsToken() throws {
        let ep = tether_epoll_create()
        let ev = tether_eventfd_create()
        XCTAssertGreaterThanOrEqual(ep, 0)
        XCTAssertGreaterThanOrEqual(ev, 0)
        defer { close(ep); close(ev) }
        XCTAssertEqual(tether_epoll_add(ep, ev, UInt32(TETHER_EPOLLIN), 0xdead_beef_cafe), 0)

        var events = [tether_epoll_event](repeating: tether_epoll_event(), count: 4)
        XCTAssertEqual(tether_epoll_wait(ep, &events, 4, 0), 0, "nothing is ready before the signal")

        XCTAssertEqual(tether_eventfd_signal(ev), 0)
        XCTAssertEqual(tether_eventfd_signal(ev), 0)
        XCTAssertEqual(tether_epoll_wait(ep, &events, 4, 1000), 1)
        XCTAssertEqual(events[0].data, 0xdead_beef_cafe)

        var value: UInt64 = 0
        XCTAssertEqual(tether_eventfd_drain(ev, &value), 1)
        XCTAssertEqual(value, 2, "two signals accumulate into one wake-up")
        XCTAssertEqual(tether_eventfd_drain(ev, &value), 0, "a drained eventfd reads as clear")
    }

    func testTimerfdFiresOnceAfterItsDelay() throws {
        let tfd = tether_timerfd_create()
        XCTAssertGreaterThanOrEqual(tfd, 0)
        defer { close(tfd) }
        var count: UInt64 = 0
        XCTAssertEqual(tether_timerfd_drain(tfd, &count), 0)
        XCTAssertEqual(tether_timerfd_arm(tfd, 2_000_000), 0)
        let ep = tether_epoll_create()
        defer { close(ep) }
        XCTAssertEqual(tether_epoll_add(ep, tfd, UInt32(TETHER_EPOLLIN), 7), 0)
        var events = [tether_epoll_event](repeating: tether_epoll_event(), count: 1)
        XCTAssertEqual(tether_epoll_wait(ep, &events, 1, 1000), 1)
        XCTAssertEqual(tether_timerfd_drain(tfd, &count), 1)
        XCTAssertEqual(count, 1)
    }

    func testNonBlockingAcceptReturnsEAGAINWithNoPendingConnection() throws {
        let fd = tether_socket(AF_INET, Int32(SOCK_STREAM.rawValue))
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        XCTAssertEqual(tether_set_reuse_port(fd), 0)
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        let bound = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        XCTAssertEqual(bound, 0)
        XCTAssertEqual(listen(fd, 16), 0)
        XCTAssertEqual(tether_accept(fd, nil, nil), -1)
        XCTAssertEqual(errno, EAGAIN)
        XCTAssertEqual(tether_socket_error(fd), 0)
    }
}
