import Foundation
import GatehouseCore
import Logging
import PostgresNIO
import _ConnectionPoolModule

/// PostgresStorage's `LockStore` part.
extension PostgresStorage {
    /// A named lock across instances, held as a lease in `gatehouse_locks`: taken and
    /// released by one short statement each, so no pooled connection is held while `body`
    /// runs. (A session-level advisory lock kept one connection for the whole body — a
    /// provider's token call included — and every waiter blocked in PostgreSQL on another:
    /// a few slow refreshes starved the pool for every request.) Waiters retry with a growing
    /// pause for up to `lockWait`, then answer `StorageError.unavailable`. A holder that died
    /// frees the lock when its lease ends (`lockLease`); the lease is longer than any body
    /// (a provider call ends at its upstream timeout).
    public func withLock<T: Sendable>(_ name: String, _ body: @Sendable () async throws -> T) async throws -> T {
        let holder = UUID().uuidString
        let deadline = ContinuousClock.now + lockWait
        var pause = Duration.milliseconds(5)
        while try await !lease(name, holder: holder) {
            guard ContinuousClock.now < deadline else {
                logger.warning("lock wait timed out", metadata: ["lock": "\(name.prefix(80))"])
                throw StorageError.unavailable
            }
            try await Task.sleep(for: pause)
            pause = min(pause * 2, .milliseconds(100))
        }
        let result: Result<T, any Error>
        do {
            result = .success(try await body())
        } catch {
            result = .failure(error)
        }
        // A release that fails (the database went away) leaves the lease to expire.
        try? await execute("DELETE FROM gatehouse_locks WHERE name = \(name) AND holder = \(holder)")
        return try result.get()
    }
}
