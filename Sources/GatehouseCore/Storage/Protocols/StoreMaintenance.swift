import Foundation

/// The store itself: schema, reachability and housekeeping. Part of `GatehouseStorage`.
public protocol StoreMaintenance: Sendable {
    /// Creates or upgrades the schema (versioned, forward-only).
    func migrate() async throws
    /// Answers when the store is reachable, within `limit` if given (readiness asks for a
    /// short one) or the store's own operation timeout.
    func ping(within limit: Duration?) async throws
    /// Deletes expired transactions, results (redeemed ones once their retry window ended),
    /// sessions (with their refresh tokens) and pending credentials, and wipes the sealed
    /// successors of spent refresh tokens whose retry window ended.
    func purgeExpired(now: Date) async throws
}

extension StoreMaintenance {
    /// Answers when the store is reachable, within the store's own operation timeout.
    public func ping() async throws {
        try await ping(within: nil)
    }
}
