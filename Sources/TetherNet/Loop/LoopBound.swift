/// State confined to one event loop, checked on every access (debug builds), as swift-nio's
/// `NIOLoopBound` checks it.
///
/// A class whose mutable state lives in a `LoopBound` and whose other stored properties are
/// `let`s of Sendable types is Sendable by the compiler's own check: the box may cross threads,
/// the value inside is only ever touched on its loop. That turns "every mutable member is
/// touched only on `loop`", once a comment beside `@unchecked Sendable`, into an assertion.
///
/// Created anywhere (set-up code runs before the loop owns the object); read and written only
/// where `loop.assertInEventLoop()` holds.
public final class LoopBound<Value>: @unchecked Sendable { // the value is touched only on `loop`, asserted
    public let loop: EventLoop
    // One thread touches it (asserted), so exclusivity is not checked at run time as well.
    @exclusivity(unchecked) @usableFromInline var stored: Value

    public init(_ value: Value, loop: EventLoop) {
        self.loop = loop
        stored = value
    }

    /// The value, on the loop.
    @inlinable
    public var value: Value {
        get {
            loop.assertInEventLoop()
            return stored
        }
        _modify {
            loop.assertInEventLoop()
            yield &stored
        }
    }

    /// Runs `body` with the value, on the loop.
    @inlinable
    public func withValue<Result, E: Error>(_ body: (inout Value) throws(E) -> Result) throws(E) -> Result {
        loop.assertInEventLoop()
        return try body(&stored)
    }
}
