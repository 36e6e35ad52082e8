import Foundation

/// A claim's hold on the outbox entries it took (`WebhookStore.claimOutbox`): a random id, which
/// the claim's outcomes carry back (`completeOutbox`) so that only its holder records them, and
/// how long it lasts. The store measures that time on its own clock: several instances sharing
/// one database (PostgreSQL) use the database's, so whether one of them tells a running
/// delivery from one whose holder died does not depend on their clocks agreeing.
public struct OutboxLease: Sendable, Equatable {
    /// Names the claim: random, one per claim.
    public let id: String
    /// How long the claim holds its entries: on PostgreSQL from the claim's statement, on
    /// SQLite from the caller's `now`.
    public let duration: TimeInterval

    /// A new lease of `duration` seconds with a random id (`id` for tests that name it).
    public init(duration: TimeInterval, id: String = SecureRandom.token(byteCount: 16)) {
        self.id = id
        self.duration = duration
    }
}
