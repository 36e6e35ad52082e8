import Foundation
import GRDB
import GatehouseCore

/// SQLiteStorage's `AuditStore` part: the stored audit trail, newest first by id.
extension SQLiteStorage {
    /// Stores events in one write transaction.
    public func appendAudit(_ records: [AuditRecord]) async throws {
        guard !records.isEmpty else { return }
        try await write { db in
            let statement = try db.cachedStatement(
                sql: "INSERT INTO audit_events (at, event, actor, uid, provider, key_id) VALUES (?, ?, ?, ?, ?, ?)")
            for record in records {
                try statement.execute(arguments: [record.at, record.event, record.actor, record.uid, record.provider, record.keyId])
            }
        }
    }

    /// Events newest first, filtered by account and event type.
    public func auditRecords(uid: String?, event: String?, before: Int64?, limit: Int) async throws -> [AuditRecord] {
        try await read { db in
            var conditions = ["id < ?"]
            var arguments: StatementArguments = [before ?? Int64.max]
            if let uid {
                conditions.append("uid = ?")
                arguments += [uid]
            }
            if let event {
                conditions.append("event = ?")
                arguments += [event]
            }
            arguments += [limit]
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT id, at, event, actor, uid, provider, key_id FROM audit_events
                    WHERE \(conditions.joined(separator: " AND ")) ORDER BY id DESC LIMIT ?
                    """, arguments: arguments)
            return rows.map {
                AuditRecord(
                    id: $0["id"], at: $0["at"], event: $0["event"], actor: $0["actor"], uid: $0["uid"], provider: $0["provider"], keyId: $0["key_id"])
            }
        }
    }

    /// Deletes events older than `cutoff`.
    public func dropAudit(before cutoff: Date) async throws -> Int {
        try await write { db in
            try db.execute(sql: "DELETE FROM audit_events WHERE at < ?", arguments: [cutoff])
            return db.changesCount
        }
    }
}
