import Foundation
import GRDB
import GatehouseCore

/// SQLiteStorage's `LockStore` part.
extension SQLiteStorage {
    /// An in-process lock: a SQLite file serves one gateway process (several instances use
    /// PostgreSQL), so exclusion within this process is exclusion among all its users. A
    /// waiter gives up after `lockWait` with `StorageError.unavailable`, as PostgreSQL's does,
    /// and at once when its task is cancelled.
    public func withLock<T: Sendable>(_ name: String, _ body: @Sendable () async throws -> T) async throws -> T {
        do {
            return try await locks.run(name, waitingAtMost: lockWait, body)
        } catch is KeyedLock.WaitTimedOut {
            throw StorageError.unavailable
        }
    }
}
