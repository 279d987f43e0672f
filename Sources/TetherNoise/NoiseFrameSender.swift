import TetherSync

/// Sends application frames over a Noise transport's sending CipherState.
///
/// Sends are serialised: encryption and the caller's `write` happen under one lock, so the
/// order messages reach the wire is the order of their nonces, even with concurrent senders.
/// Scratch buffers are allocated once; a message costs no heap allocation of its own.
public final class NoiseFrameSender: Sendable {
    private struct State: ~Copyable {
        var cipher: CipherState
        var plaintext: [UInt8]
        var ciphertext: [UInt8]
    }

    private let state: Locked<State>

    public init(_ cipher: CipherState) {
        state = Locked(State(cipher: cipher,
                            plaintext: [UInt8](repeating: 0, count: NoiseFraming.maxChunkLength + 1),
                            ciphertext: [UInt8](repeating: 0, count: NoiseFraming.maxMessageLength)))
    }

    /// Encrypts `frame` into one or more transport messages and hands each to `write`, in order,
    /// while holding the send lock. `write` must not call back into this sender.
    public func send(_ frame: UnsafeRawBufferPointer, write: (UnsafeRawBufferPointer) throws -> Void) throws {
        try state.withLock { state in
            var offset = 0
            repeat {
                let chunk = min(NoiseFraming.maxChunkLength, frame.count - offset)
                let last = offset + chunk == frame.count
                let messageLength = chunk + 1 + CipherState.tagByteCount
                try state.plaintext.withUnsafeMutableBytes { plaintext in
                    try state.ciphertext.withUnsafeMutableBytes { ciphertext in
                        plaintext[0] = last ? NoiseFraming.lastChunk : NoiseFraming.moreChunks
                        if chunk > 0 {
                            UnsafeMutableRawBufferPointer(rebasing: plaintext[1...chunk])
                                .copyMemory(from: UnsafeRawBufferPointer(rebasing: frame[offset..<(offset + chunk)]))
                        }
                        let message = UnsafeMutableRawBufferPointer(rebasing: ciphertext[..<messageLength])
                        try state.cipher.encrypt(UnsafeRawBufferPointer(rebasing: plaintext[...chunk]), ad: UnsafeRawBufferPointer(start: nil, count: 0),
                                                 into: message)
                        try write(UnsafeRawBufferPointer(message))
                    }
                }
                offset += chunk
            } while offset < frame.count
        }
    }

    /// Array convenience: the frame's transport messages.
    public func seal(_ frame: [UInt8]) throws -> [[UInt8]] {
        var messages: [[UInt8]] = []
        try frame.withUnsafeBytes { bytes in try send(bytes) { messages.append(Array($0)) } }
        return messages
    }

    /// Re-keys the sending direction (Noise §11.3) under the send lock.
    public func rekey() throws {
        try state.withLock { state in try state.cipher.rekey() }
    }
}
