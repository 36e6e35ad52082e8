import Foundation

/// What a shared store says about writes (its own and other instances').
public enum StoreChange: Sendable, Equatable {
    /// Following (again): changes committed from now on will be told. Whatever was learnt
    /// before may have missed some.
    case following
    /// A committed transaction touched this account, one of its provider links or one of its
    /// sessions.
    case account(uid: String)
    /// A committed transaction revoked or removed this service key.
    case serviceKey(id: String)
}

/// A store that several gateway instances write to (PostgreSQL): it tells each of them what
/// the others changed, so that what an instance keeps in memory can follow.
public protocol SharedStore: Sendable {
    /// Calls `body` with `.following` once the store is listening, then with each change
    /// committed after that, until the task is cancelled (returns) or the connection is lost
    /// (throws). A store that cannot tell (or knows no other writer) never calls `body`.
    func followChanges(_ body: @escaping @Sendable (StoreChange) async -> Void) async throws
}
