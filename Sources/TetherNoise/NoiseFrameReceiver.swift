/// Reassembles application frames from Noise transport messages (client.md §9.5).
///
/// A frame larger than `maxFrameLength` is refused as soon as its chunks pass the cap, so a
/// peer cannot make the receiver buffer more than the cap. Any failure (authentication, an
/// over-long frame, a malformed message) poisons the receiver.
public struct NoiseFrameReceiver: Sendable {
    public let maxFrameLength: Int
    private var cipher: CipherState
    private var pending: [UInt8] = []
    private var scratch: [UInt8]
    private var failed = false

    public init(_ cipher: CipherState, maxFrameLength: Int) {
        self.cipher = cipher
        self.maxFrameLength = maxFrameLength
        scratch = [UInt8](repeating: 0, count: NoiseFraming.maxChunkLength + 1)
    }

    /// Bytes held for a frame still being reassembled.
    public var bufferedByteCount: Int { pending.count }

    /// Decrypts one transport message; returns the frame it completes, or nil if more chunks
    /// are expected.
    public mutating func receive(_ message: UnsafeRawBufferPointer) throws(NoiseError) -> [UInt8]? {
        guard !failed else { throw .poisoned }
        do throws(NoiseError) {
            guard message.count <= NoiseFraming.maxMessageLength else { throw .messageTooLarge(message.count) }
            guard message.count > CipherState.tagByteCount else { throw .authenticationFailure }
            let plaintextLength = message.count - CipherState.tagByteCount
            let more: Bool = try scratch.withUnsafeMutableBytes { scratch -> Result<Bool, NoiseError> in
                let plaintext = UnsafeMutableRawBufferPointer(rebasing: scratch[..<plaintextLength])
                do throws(NoiseError) {
                    try cipher.decrypt(message, ad: UnsafeRawBufferPointer(start: nil, count: 0), into: plaintext)
                } catch { return .failure(error) }
                let chunk = plaintextLength - 1
                guard pending.count + chunk <= maxFrameLength else { return .failure(.frameTooLarge(limit: maxFrameLength)) }
                pending.append(contentsOf: UnsafeRawBufferPointer(rebasing: plaintext[1...]))
                return .success(plaintext[0] != NoiseFraming.lastChunk)
            }.get()
            if more { return nil }
            defer { pending = [] }
            return pending
        } catch {
            failed = true
            pending = []
            throw error
        }
    }

    public mutating func receive(_ message: [UInt8]) throws(NoiseError) -> [UInt8]? {
        try message.withUnsafeBytes { (raw: UnsafeRawBufferPointer) -> Result<[UInt8]?, NoiseError> in
            do throws(NoiseError) { return .success(try receive(raw)) } catch { return .failure(error) }
        }.get()
    }

    /// Re-keys the receiving direction (Noise §11.3), in step with the peer's sender.
    public mutating func rekey() throws(NoiseError) { try cipher.rekey() }
}
