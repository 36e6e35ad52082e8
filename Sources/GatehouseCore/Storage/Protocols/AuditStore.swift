import Foundation

/// The stored audit trail the operators' activity listing reads. Part of `GatehouseStorage`.
public protocol AuditStore: Sendable {
    /// Stores events (in one transaction), each given the next id.
    func appendAudit(_ records: [AuditRecord]) async throws
    /// Events newest first, of one account and one event type when given, with ids below
    /// `before` (a cursor), at most `limit`.
    func auditRecords(uid: String?, event: String?, before: Int64?, limit: Int) async throws -> [AuditRecord]
    /// Deletes events older than `cutoff`; answers how many. A store that deletes in batches
    /// may stop part-way on a failure: it then answers what it deleted (and logs the failure),
    /// and the next call goes on.
    func dropAudit(before cutoff: Date) async throws -> Int
}
