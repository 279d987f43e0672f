/// Contiguous bytes that can be lent to OpenSSL without copying.
///
/// TetherCrypto does not import Foundation; `Data` gains this conformance in the
/// modules above that do.
public protocol BytesView {
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
}

extension Array: BytesView where Element == UInt8 {}
extension ArraySlice: BytesView where Element == UInt8 {}
extension ContiguousArray: BytesView where Element == UInt8 {}

extension UnsafeRawBufferPointer: BytesView {
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(self)
    }
}

extension UnsafeMutableRawBufferPointer: BytesView {
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(self))
    }
}

extension BytesView {
    /// The number of bytes in the view.
    @inlinable public var byteCount: Int { withUnsafeBytes { $0.count } }

    /// A fresh array with these bytes.
    @inlinable public var byteArray: [UInt8] { withUnsafeBytes { [UInt8]($0) } }
}

extension UnsafeRawBufferPointer {
    /// A base pointer OpenSSL accepts even for an empty buffer (some calls reject NULL).
    var nonNullBase: UnsafePointer<UInt8> {
        if let base = baseAddress { return base.assumingMemoryBound(to: UInt8.self) }
        return UnsafePointer(OpenSSL.zeroByte)
    }
}
