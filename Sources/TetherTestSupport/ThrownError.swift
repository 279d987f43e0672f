/// The error `body` throws, or nil when it returns: typed throws asserted on without a cast.
/// Closures need their error type spelled (`{ () throws(E) in … }`) for `E` to be inferred.
public func thrownError<E: Error>(_ body: () throws(E) -> Void) -> E? {
    do {
        try body()
        return nil
    } catch {
        return error
    }
}
