import Foundation

/// The webhook outbox (events are inserted by the other parts' writes, see `Outbox`): due
/// entries are claimed under a lease by one instance, completed, listed and redelivered.
/// Part of `GatehouseStorage`.
///
/// Leases run on the store's clock: a database that several hosts share (PostgreSQL) uses its
/// own, so that an instance whose clock runs ahead does not take, redeliver or drop an entry
/// another instance is delivering, and one whose clock runs behind does not wait longer for a
/// dead holder's entries; SQLite, on one host, uses the caller's `now`. When an entry is due
/// (`nextAttemptAt`) is the callers' time.
public protocol WebhookStore: Sendable {
    /// Up to `limit` due pending entries of `endpoint` (`nextAttemptAt <= now`, no lease
    /// running), held under `lease` for its duration: no other claim gets them meanwhile.
    func claimOutbox(endpoint: String, now: Date, lease: OutboxLease, limit: Int) async throws -> [OutboxEntry]
    /// Records an attempt's outcome by the claim that held `lease`: delivered entries are
    /// removed whoever delivered them, since the receiver has the event; any other outcome is
    /// recorded only while the entry is still held under that lease, so an instance whose lease
    /// ran out before its outcome arrived does not release or reschedule an entry another
    /// instance claimed since (or count its attempt twice).
    func completeOutbox(id: String, lease: OutboxLease, outcome: DeliveryOutcome) async throws
    /// Entries with `status` in the order of their ids, after the entry `after` (a cursor), at
    /// most `limit`. Ids begin with the event's random id: the order is stable for paging, not
    /// the entries' age.
    func outboxEntries(status: OutboxEntry.Status, after: String?, limit: Int) async throws -> [OutboxEntry]
    /// Makes an entry due again now: pending, a pending one's attempts kept, a failed one's
    /// started anew (an operator sends it again once its receiver is mended: one failure more
    /// must not fail it again at once); `false` when there is none, or when it is being
    /// delivered (its lease runs on the store's clock).
    func redeliverOutbox(id: String, now: Date) async throws -> Bool
    /// Deletes entries written before `cutoff` (pending or failed) that no delivery holds (no
    /// lease running on the store's clock): their count by endpoint. A store that deletes in batches may
    /// stop part-way on a failure: it then answers what it deleted (and logs the failure), so
    /// that what was dropped is reported, and the next call goes on.
    func dropOutbox(writtenBefore cutoff: Date, now: Date) async throws -> [String: Int]
    /// Pending entries and the creation time of the oldest one.
    func outboxBacklog() async throws -> (count: Int, oldest: Date?)
}
