// Shared by every harness; scripts/fuzz compiles it into each module that hosts one.

/// The bytes libFuzzer hands a harness, read front to back: its settings first (modes, limits,
/// split points), then the bytes under test. Reading past the end gives zeros, so every input,
/// however short, is a valid run and a seed is simply settings followed by a real message.
struct FuzzInput {
    let bytes: [UInt8]
    private(set) var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var remainingCount: Int { bytes.count - offset }

    mutating func byte() -> UInt8 {
        guard offset < bytes.count else { return 0 }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func bool() -> Bool { byte() & 1 == 1 }

    /// Big-endian, like every length on the wire.
    mutating func uint16() -> Int { Int(byte()) << 8 | Int(byte()) }

    mutating func take(_ count: Int) -> [UInt8] {
        let end = min(bytes.count, offset + max(0, count))
        defer { offset = end }
        return Array(bytes[offset..<end])
    }

    /// A field whose length comes first (two bytes), so one input can carry several messages.
    mutating func field() -> [UInt8] { take(uint16()) }

    mutating func rest() -> [UInt8] { take(remainingCount) }
}

/// How an incremental parser is fed: `seed` (a byte of the input) picks the largest piece and the
/// sequence of piece sizes, so each input has its own split, reproduced exactly when replayed.
/// Seed 0 hands everything over at once.
func pieces(of bytes: [UInt8], seed: UInt8) -> [ArraySlice<UInt8>] {
    guard seed != 0, !bytes.isEmpty else { return [bytes[...]] }
    let largest = [1, 2, 3, 5, 8, 16, 100, 1500][Int(seed & 7)]
    var state = UInt32(seed) &* 2_654_435_761 &+ UInt32(truncatingIfNeeded: bytes.count)
    var result: [ArraySlice<UInt8>] = []
    var start = 0
    while start < bytes.count {
        state = state &* 1_103_515_245 &+ 12345
        let size = 1 + Int((state >> 16) % UInt32(largest))
        let end = min(bytes.count, start + size)
        result.append(bytes[start..<end])
        start = end
    }
    return result
}

/// Keeps a result alive and read, so the optimiser cannot drop the work that made it.
nonisolated(unsafe) private var sink: UInt8 = 0

@inline(never)
func touch<T>(_ value: T) {
    withUnsafeBytes(of: value) { raw in
        for byte in raw { sink &+= byte }
    }
}

/// A broken invariant is a finding like a crash: trap with the reason (no input bytes, which may
/// be anything), and libFuzzer keeps the input.
func finding(_ reason: String) -> Never {
    fatalError("fuzz finding: \(reason)")
}

func expect(_ condition: Bool, _ reason: @autoclosure () -> String) {
    if !condition { finding(reason()) }
}

// MARK: Seeds

/// A field as FuzzInput.field reads it, for seeds: the length in two bytes, then the bytes.
func field(_ bytes: [UInt8]) -> [UInt8] {
    precondition(bytes.count <= 0xFFFF, "a field holds at most 65,535 bytes")
    return [UInt8(bytes.count >> 8), UInt8(bytes.count & 0xFF)] + bytes
}

func field(_ text: String) -> [UInt8] { field(Array(text.utf8)) }
