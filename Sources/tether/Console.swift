import Foundation
import Glibc
import TetherSync

/// The terminal or pipes a peer command talks through. Interactive (both standard input and
/// output are terminals): narration, the QR code and the chat share the screen. Scriptable
/// (either is not a terminal): standard output carries only the pairing link, the code and the
/// received chat lines, each on a line of its own; narration goes to standard error.
final class Console: Sendable {
    let interactive: Bool
    /// One line at a time, so lines from different threads never interleave.
    private let writing = Locked(())

    init() {
        interactive = isatty(STDIN_FILENO) == 1 && isatty(STDOUT_FILENO) == 1
    }

    /// A line that is part of the command's output (link, code, chat).
    func output(_ line: String) { write(STDOUT_FILENO, line) }

    /// Narration: on the screen when interactive, on standard error when scripted.
    func say(_ line: String) { write(interactive ? STDOUT_FILENO : STDERR_FILENO, line) }

    /// Narration that is always on standard error (diagnostics).
    func note(_ line: String) { write(STDERR_FILENO, line) }

    private func write(_ fd: Int32, _ line: String) {
        let bytes = Array((line + "\n").utf8)
        writing.withLock { _ in
            var offset = 0
            while offset < bytes.count {
                let written = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, bytes.count - offset) }
                if written <= 0 { break }
                offset += written
            }
        }
    }

    /// A received frame as one printable line: invalid UTF-8 becomes U+FFFD and control
    /// characters are replaced too, so a peer cannot drive the terminal with escape sequences
    /// or split one frame into several lines.
    static func printable(_ frame: [UInt8]) -> String {
        String(String(decoding: frame, as: UTF8.self).unicodeScalars.map { scalar -> Character in
            let value = scalar.value
            if value == 0x09 { return " " }
            if value < 0x20 || (0x7F...0x9F).contains(value) || value == 0x2028 || value == 0x2029 { return "\u{FFFD}" }
            return Character(scalar)
        })
    }
}

/// Lines from standard input, read on a thread of their own, for whichever part of the command
/// asks next (the Mac's code entry, then the chat). Waiting is cancellation-aware. At most
/// `capacity` lines wait here: past that the reading thread stops reading, so a pasted burst
/// stays in the pipe (the kernel's bound, and the writer's) until the command takes it.
final class LineQueue: Sendable {
    static let capacity = 64
    /// One permit per line that may wait; the reading thread takes one before each line.
    private let slots = DispatchSemaphore(value: LineQueue.capacity)

    private struct Queue {
        var lines: [String] = []
        var finished = false
        var waiters: [Int: CheckedContinuation<String?, Never>] = [:]
        var nextID = 0
    }

    private let queue = Locked(Queue())

    /// Starts reading standard input; `atEnd` runs once it ends (after the last line is queued).
    func startReadingStandardInput(atEnd: @escaping @Sendable () -> Void = {}) {
        DedicatedThread.start(name: "tether-stdin", joinable: false) { [self] in
            while let line = readLine(strippingNewline: true) {
                push(line.hasSuffix("\r") ? String(line.dropLast()) : line)
            }
            finish()
            atEnd()
        }
    }

    func push(_ line: String) {
        slots.wait()
        let waiter: CheckedContinuation<String?, Never>? = queue.withLock { queue in
            if let (id, waiter) = queue.waiters.min(by: { $0.key < $1.key }) {
                queue.waiters[id] = nil
                return waiter
            }
            queue.lines.append(line)
            return nil
        }
        if let waiter {
            slots.signal()
            waiter.resume(returning: line)
        }
    }

    func finish() {
        let all: [CheckedContinuation<String?, Never>] = queue.withLock { queue in
            queue.finished = true
            defer { queue.waiters = [:] }
            return Array(queue.waiters.values)
        }
        for waiter in all { waiter.resume(returning: nil) }
    }

    /// The next line; nil at the end of input or when the waiting task is cancelled.
    func next() async -> String? {
        let id = queue.withLock { queue in
            queue.nextID += 1
            return queue.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let ready: String?? = queue.withLock { queue in
                    if !queue.lines.isEmpty {
                        slots.signal()
                        return .some(queue.lines.removeFirst())
                    }
                    if queue.finished || Task.isCancelled { return .some(nil) }
                    queue.waiters[id] = continuation
                    return .none
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            let waiter = queue.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.resume(returning: nil)
        }
    }
}
