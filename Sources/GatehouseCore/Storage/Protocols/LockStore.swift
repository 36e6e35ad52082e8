import Foundation

/// Named locks across every instance using the store. Part of `GatehouseStorage`.
public protocol LockStore: Sendable {
    /// Runs `body` holding the lock `name`, exclusive among every gateway instance using this
    /// store (one provider-token refresh at a time per linked identity, across instances).
    /// A lock dies with its holder: a crashed instance never leaves it taken.
    func withLock<T: Sendable>(_ name: String, _ body: @Sendable () async throws -> T) async throws -> T
}
