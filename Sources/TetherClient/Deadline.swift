import TetherDevice

/// Runs `body` with a time limit on `clock`: past `limit` the body's task is cancelled (which
/// ends any frame wait in it, closing its socket) and `onTimeout` is thrown.
func racingDeadline<T: Sendable>(clock: any DeviceClock, after limit: Duration, onTimeout: CompanionError,
                              _ body: @escaping @Sendable () async throws(CompanionError) -> T) async throws(CompanionError) -> T {
    let outcome: Result<T, CompanionError> = await withTaskGroup(of: Result<T, CompanionError>?.self) { group in
        group.addTask {
            do throws(CompanionError) { return .success(try await body()) } catch { return .failure(error) }
        }
        group.addTask {
            await clock.sleep(for: limit)
            return Task.isCancelled ? nil : .failure(onTimeout)
        }
        var first: Result<T, CompanionError>?
        while first == nil, let next = await group.next() {
            first = next
        }
        group.cancelAll()
        return first ?? .failure(onTimeout)
    }
    return try outcome.get()
}
