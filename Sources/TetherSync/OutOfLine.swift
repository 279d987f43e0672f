/// An optional kept out of line: 8 bytes in its owner, an allocation only while it holds a value.
/// For state every connection may need but few hold at once (a large frame being received, a
/// close in progress), so an idle connection stays small.
///
/// Inlinable so each use is specialised for its `Value` in the module that uses it: generic
/// array code through the runtime's metadata lookups was a measurable share of an admission.
@frozen
public struct OutOfLine<Value> {
    @usableFromInline var storage: [Value] = []

    @inlinable public init() {}

    @inlinable public var value: Value? {
        get { storage.first }
        set {
            if let newValue {
                if storage.isEmpty { storage.append(newValue) } else { storage[0] = newValue }
            } else {
                storage = []
            }
        }
    }

    @inlinable public var isEmpty: Bool { storage.isEmpty }
}

extension OutOfLine: Sendable where Value: Sendable {}
