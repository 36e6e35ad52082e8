import Foundation

/// Named locks across every instance using the store. Part of `GatehouseStorage`.
public protocol LockStore: Sendable {
    /// Runs `body` holding the lock `name`, exclusive among every gateway instance using this
    /// store (one provider-token refresh at a time per linked identity; one answer at a time
    /// to a held link). A crashed holder does not keep it: SQLite's lock lives in the process,
    /// PostgreSQL's lease ends at most one lease (120 s) after its holder's last renewal. A
    /// waiter gives up after the store's lock wait (60 s by default) with
    /// `StorageError.unavailable`, `body` not run, and sooner when its task is cancelled.
    func withLock<T: Sendable>(_ name: String, _ body: @Sendable () async throws -> T) async throws -> T
}
