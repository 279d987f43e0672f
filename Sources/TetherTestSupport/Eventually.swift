import Foundation
import XCTest

// Tests that know instead of wait: poll a condition (a log line, a metric, a port answering, a
// process exiting) until it holds, and fail naming what was awaited and for how long. The one
// polling loop of the test targets; the only sleeps are the poll interval here.

/// Polls `condition` every `poll` seconds until it holds; fails the test (naming `what` and the
/// time waited) once `seconds` have passed. Returns whether it held, for callers that go on.
@discardableResult
public func eventually(_ what: @autoclosure () -> String, within seconds: Double = 10, poll: Double = 0.01,
                       file: StaticString = #filePath, line: UInt = #line, _ condition: () throws -> Bool) rethrows -> Bool {
    let (held, waited) = try Eventually.poll(within: seconds, every: poll) { try condition() ? true : nil }
    if held == nil { XCTFail("timed out after \(Eventually.format(waited)) waiting for \(what())", file: file, line: line) }
    return held != nil
}

/// The async variant: polls with `Task.sleep`, so no thread of the cooperative pool is blocked.
@discardableResult
public func eventually(_ what: @autoclosure () -> String, within seconds: Double = 10, poll: Double = 0.01,
                       file: StaticString = #filePath, line: UInt = #line, _ condition: () async throws -> Bool) async rethrows -> Bool {
    let (held, waited) = try await Eventually.poll(within: seconds, every: poll) { try await condition() ? true : nil }
    if held == nil { XCTFail("timed out after \(Eventually.format(waited)) waiting for \(what())", file: file, line: line) }
    return held != nil
}

/// The first non-nil value of `value` within `seconds`; nil (and a test failure naming `what`) if
/// none came.
public func eventuallyValue<T>(_ what: @autoclosure () -> String, within seconds: Double = 10, poll: Double = 0.01,
                               file: StaticString = #filePath, line: UInt = #line, _ value: () throws -> T?) rethrows -> T? {
    let (found, waited) = try Eventually.poll(within: seconds, every: poll, value)
    if found == nil { XCTFail("timed out after \(Eventually.format(waited)) waiting for \(what())", file: file, line: line) }
    return found
}

/// The async value-returning variant.
public func eventuallyValue<T>(_ what: @autoclosure () -> String, within seconds: Double = 10, poll: Double = 0.01,
                               file: StaticString = #filePath, line: UInt = #line, _ value: () async throws -> T?) async rethrows -> T? {
    let (found, waited) = try await Eventually.poll(within: seconds, every: poll, value)
    if found == nil { XCTFail("timed out after \(Eventually.format(waited)) waiting for \(what())", file: file, line: line) }
    return found
}

/// The polling loop without the test failure, for helpers that report a miss their own way
/// (a Bool the caller asserts, a thrown error) or that measure how long a condition took.
public enum Eventually {
    /// The first non-nil `value` within `seconds`, polled every `poll` seconds (checked once more at
    /// the deadline), and the seconds waited.
    public static func poll<T>(within seconds: Double, every poll: Double = 0.01, _ value: () throws -> T?) rethrows -> (T?, Double) {
        let start = DispatchTime.now().uptimeNanoseconds
        func elapsed() -> Double { Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 }
        while true {
            let expired = elapsed() >= seconds
            if let found = try value() { return (found, elapsed()) }
            if expired { return (nil, elapsed()) }
            Thread.sleep(forTimeInterval: min(poll, max(0, seconds - elapsed())))
        }
    }

    public static func poll<T>(within seconds: Double, every poll: Double = 0.01, _ value: () async throws -> T?) async rethrows -> (T?, Double) {
        let start = DispatchTime.now().uptimeNanoseconds
        func elapsed() -> Double { Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 }
        while true {
            let expired = elapsed() >= seconds
            if let found = try await value() { return (found, elapsed()) }
            if expired { return (nil, elapsed()) }
            try? await Task.sleep(nanoseconds: UInt64(min(poll, max(0, seconds - elapsed())) * 1e9))
        }
    }

    /// True once `condition` holds within `seconds`; no test failure.
    public static func holds(within seconds: Double, every poll: Double = 0.01, _ condition: () throws -> Bool) rethrows -> Bool {
        try Self.poll(within: seconds, every: poll) { try condition() ? true : nil }.0 != nil
    }

    public static func holds(within seconds: Double, every poll: Double = 0.01, _ condition: () async throws -> Bool) async rethrows -> Bool {
        try await Self.poll(within: seconds, every: poll) { try await condition() ? true : nil }.0 != nil
    }

    static func format(_ seconds: Double) -> String { String(format: "%.2f s", seconds) }
}
