import Foundation
import GatehouseCore
import PostgresNIO

/// PostgresStorage's `AuditStore` part: the stored audit trail, newest first by id.
extension PostgresStorage {
    /// Stores events in one transaction.
    public func appendAudit(_ records: [AuditRecord]) async throws {
        guard !records.isEmpty else { return }
        try await transaction { connection, logger in
            for record in records {
                try await connection.query(
                    """
                    INSERT INTO audit_events (at, event, actor, uid, provider, key_id)
                    VALUES (\(record.at), \(record.event), \(record.actor), \(record.uid), \(record.provider), \(record.keyId))
                    """, logger: logger)
            }
        }
    }

    /// Events newest first, filtered by account and event type.
    public func auditRecords(uid: String?, event: String?, before: Int64?, limit: Int) async throws -> [AuditRecord] {
        var records: [AuditRecord] = []
        let rows = try await query(
            """
            SELECT id, at, event, actor, uid, provider, key_id FROM audit_events
            WHERE (\(uid)::text IS NULL OR uid = \(uid)) AND (\(event)::text IS NULL OR event = \(event)) AND id < \(before ?? Int64.max)
            ORDER BY id DESC LIMIT \(limit)
            """, logger: logger)
        for (id, at, event, actor, uid, provider, keyId) in try rows.decode((Int64, Date, String, String, String?, String?, String?).self) {
            records.append(AuditRecord(id: id, at: at, event: event, actor: actor, uid: uid, provider: provider, keyId: keyId))
        }
        return records
    }

    /// Deletes events older than `cutoff`, oldest first in batches (`inBatches`): a backlog of
    /// any size is worked through within the operation timeout of each. A failure after some
    /// batches is logged, and what they deleted answered (the next round goes on).
    public func dropAudit(before cutoff: Date) async throws -> Int {
        var dropped = 0
        do {
            _ = try await inBatches { size in
                """
                DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events WHERE at < \(cutoff) ORDER BY at LIMIT \(size)) RETURNING 1
                """
            } each: {
                dropped += $0.count
            }
        } catch let error where dropped > 0 {
            logger.warning("audit retention stopped part-way", metadata: ["dropped": "\(dropped)", "error": "\(Self.summary(of: error))"])
        }
        return dropped
    }
}
