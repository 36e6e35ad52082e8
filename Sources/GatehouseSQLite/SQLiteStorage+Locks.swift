import Foundation
import GRDB
import GatehouseCore

/// SQLiteStorage's `LockStore` part.
extension SQLiteStorage {
    /// An in-process lock: a SQLite file serves one gateway process (several instances use
    /// PostgreSQL), so exclusion within this process is exclusion among all its users.
    public func withLock<T: Sendable>(_ name: String, _ body: @Sendable () async throws -> T) async throws -> T {
        try await locks.run(name, body)
    }
}
