import Foundation
import Glibc
import TetherRTC
import XCTest

/// Every SSL, SSL_CTX, BIO, X509 and EVP_PKEY a transport makes is freed with it.
final class DTLSTransportLifetimeTests: XCTestCase {
    func testTwoHundredTransportsComeAndGoWithoutGrowingResidentMemory() throws {
        // The first rounds fill OpenSSL's one-time caches (providers, error strings, methods).
        for _ in 0..<20 { try connectAndClose() }
        let before = residentBytes()
        var survivors: [() -> DTLSTransport?] = []
        for round in 0..<100 {   // two transports a round
            let (client, server) = try connectAndClose()
            if round % 10 == 0 { survivors += [{ [weak client] in client }, { [weak server] in server }] }
        }
        let grown = residentBytes() - before
        XCTAssertTrue(survivors.allSatisfy { $0() == nil }, "every transport is released")
        // One leaked SSL object with its buffers and certificates is tens of KiB; 200 of them
        // would be several MiB. Freed memory goes back to malloc, not the kernel, so a leak-free
        // loop reuses it and the resident size stays flat.
        XCTAssertLessThan(grown, 1024 * 1024, "resident memory grew by \(grown) bytes over 200 transports")
    }

    /// A full session: handshake, a message each way, close_notify.
    @discardableResult
    private func connectAndClose() throws -> (DTLSTransport, DTLSTransport) {
        let pipe = try DatagramPipe()
        pipe.handshake()
        XCTAssertTrue(pipe.bothConnected)
        try pipe.client.send([1])
        try pipe.server.send([2])
        pipe.client.close()
        pipe.pump()
        XCTAssertEqual(pipe.server.state, .closed)
        return (pipe.client, pipe.server)
    }

    /// Resident set size (/proc/self/statm, in pages). The Glibc module lacks malloc.h, so
    /// mallinfo2 is out of reach from Swift.
    private func residentBytes() -> Int {
        guard let statm = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = statm.split(separator: " ")
        guard fields.count > 1, let pages = Int(fields[1]) else { return 0 }
        return pages * sysconf(Int32(_SC_PAGESIZE))
    }
}
