import Foundation
import TetherCrypto
import TetherNoise
import XCTest

final class NoiseFramingTests: XCTestCase {
    private func channel(cap: Int = 1 << 20) throws -> (NoiseFrameSender, NoiseFrameReceiver) {
        var pair = try Pair("Noise_XK_25519_ChaChaPoly_BLAKE2s")
        let (initiator, responder) = try pair.complete()
        return (NoiseFrameSender(initiator.sending!), NoiseFrameReceiver(responder.receiving!, maxFrameLength: cap))
    }

    func testA200000ByteFrameTakesFourMessagesAndRoundTrips() throws {
        let (sender, receiver) = try channel()
        var receiverCopy = receiver
        let frame = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let messages = try sender.seal(frame)
        XCTAssertEqual(messages.map(\.count), [65_535, 65_535, 65_535, 3_446 + 1 + 16])
        XCTAssertEqual(NoiseFraming.maxChunkLength, 65_518)
        XCTAssertEqual(NoiseFraming.messageCount(forFrameLength: 200_000), 4)
        var delivered: [[UInt8]] = []
        for message in messages { if let frame = try receiverCopy.receive(message) { delivered.append(frame) } }
        XCTAssertEqual(delivered, [frame])
        XCTAssertEqual(receiverCopy.bufferedByteCount, 0)
    }

    func testContinuationBytesAndEmptyFrame() throws {
        // Decrypt each message by hand to see the continuation bytes.
        var pair = try Pair("Noise_NN_25519_ChaChaPoly_SHA256")
        let (initiator, responder) = try pair.complete()
        let sender = NoiseFrameSender(initiator.sending!)
        var raw = responder.receiving!
        let messages = try sender.seal([UInt8](repeating: 7, count: 200_000))
        XCTAssertEqual(try messages.map { try raw.decrypt($0)[0] }, [0x01, 0x01, 0x01, 0x00])
        let empty = try sender.seal([])
        XCTAssertEqual(empty.count, 1)
        XCTAssertEqual(try raw.decrypt(empty[0]), [0x00], "an empty frame is a single 0x00 chunk")
        let exact = try sender.seal([UInt8](repeating: 1, count: NoiseFraming.maxChunkLength))
        XCTAssertEqual(exact.count, 1)
        XCTAssertEqual(exact[0].count, NoiseFraming.maxMessageLength)
    }

    func testEmptyFramesAndBackToBackFramesAreDeliveredSeparately() throws {
        let (sender, receiver) = try channel()
        var r = receiver
        XCTAssertEqual(try r.receive(try sender.seal([])[0]), [])
        XCTAssertEqual(try r.receive(try sender.seal([1, 2])[0]), [1, 2])
        XCTAssertEqual(try r.receive(try sender.seal([3])[0]), [3])
    }

    func testAFrameAboveTheCapIsRefusedBeforeItIsBuffered() throws {
        let (sender, receiver) = try channel(cap: 100_000)
        var r = receiver
        let messages = try sender.seal([UInt8](repeating: 1, count: 200_000))
        XCTAssertNil(try r.receive(messages[0]))
        XCTAssertEqual(r.bufferedByteCount, 65_518)
        XCTAssertThrowsError(try r.receive(messages[1])) { XCTAssertEqual($0 as? NoiseError, .frameTooLarge(limit: 100_000)) }
        XCTAssertEqual(r.bufferedByteCount, 0, "the partial frame is dropped, never grown past the cap")
        XCTAssertThrowsError(try r.receive(messages[2])) { XCTAssertEqual($0 as? NoiseError, .poisoned) }
    }

    func testTamperedChunkPoisonsTheReceiver() throws {
        let (sender, receiver) = try channel()
        var r = receiver
        var messages = try sender.seal([UInt8](repeating: 2, count: 70_000))
        messages[1][100] ^= 0x20
        XCTAssertNil(try r.receive(messages[0]))
        XCTAssertThrowsError(try r.receive(messages[1])) { XCTAssertEqual($0 as? NoiseError, .authenticationFailure) }
        XCTAssertThrowsError(try r.receive(try sender.seal([1])[0])) { XCTAssertEqual($0 as? NoiseError, .poisoned) }
        XCTAssertThrowsError(try r.receive([UInt8](repeating: 0, count: 65_536)))
    }

    func testConcurrentSendersKeepWireOrderEqualToNonceOrder() throws {
        let (sender, receiver) = try channel()
        let wire = Wire()
        let threads = 8, framesPerThread = 200
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for i in 0..<framesPerThread {
                let frame = [UInt8(thread), UInt8(i & 0xff)] + [UInt8](repeating: UInt8(thread), count: (i * 97) % 3000)
                try! frame.withUnsafeBytes { bytes in try sender.send(bytes) { wire.append(Array($0)) } }
            }
        }
        var r = receiver
        var delivered = 0
        var perThread = [Int](repeating: 0, count: threads)
        for message in wire.messages {
            if let frame = try r.receive(message) {
                delivered += 1
                let thread = Int(frame[0])
                XCTAssertEqual(Int(frame[1]), perThread[thread] & 0xff, "each sender's frames arrive in its order")
                perThread[thread] += 1
            }
        }
        XCTAssertEqual(delivered, threads * framesPerThread)
    }
}

/// The "network": messages in the order the senders' writes happened.
final class Wire: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [[UInt8]] = []
    func append(_ message: [UInt8]) { lock.withLock { stored.append(message) } }
    var messages: [[UInt8]] { lock.withLock { stored } }
}
