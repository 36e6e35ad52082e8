import Foundation
import GRDB
import GatehouseCore

/// SQLiteStorage's `WebhookStore` part (one writer: a claim is one write transaction).
extension SQLiteStorage {
    /// Inserts an outbox entry in the caller's transaction.
    static func insertOutbox(_ entry: OutboxEntry, _ db: Database) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO webhook_outbox (id, event_id, endpoint, type, payload, created_at, next_attempt_at, attempts, status)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(
            arguments: [
                entry.id, entry.eventId, entry.endpoint, entry.type, entry.payload, entry.createdAt, entry.nextAttemptAt, entry.attempts,
                entry.status.rawValue,
            ])
    }

    /// An entry from its row.
    static func outbox(_ row: Row) -> OutboxEntry {
        OutboxEntry(
            eventId: row["event_id"], endpoint: row["endpoint"], type: row["type"], payload: row["payload"], createdAt: row["created_at"],
            nextAttemptAt: row["next_attempt_at"], attempts: row["attempts"],
            status: OutboxEntry.Status(rawValue: row["status"]) ?? .pending, lastStatus: row["last_status"], lastError: row["last_error"])
    }

    /// Leases up to `limit` due entries (the lease on the caller's clock: the file is on one host).
    public func claimOutbox(endpoint: String, now: Date, lease: OutboxLease, limit: Int) async throws -> [OutboxEntry] {
        let leaseUntil = now.addingTimeInterval(lease.duration)
        return try await write { db in
            let rows = try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT * FROM webhook_outbox
                        WHERE endpoint = ? AND status = 'pending' AND next_attempt_at <= ? AND (lease_until IS NULL OR lease_until <= ?)
                        ORDER BY next_attempt_at LIMIT ?
                        """), arguments: [endpoint, now, now, limit])
            let entries = rows.map(Self.outbox)
            for entry in entries {
                try db.cachedStatement(sql: "UPDATE webhook_outbox SET lease_until = ?, lease_id = ? WHERE id = ?").execute(
                    arguments: [leaseUntil, lease.id, entry.id])
            }
            return entries
        }
    }

    /// Records an attempt by the holder of `lease`; a delivery by anyone.
    public func completeOutbox(id: String, lease: OutboxLease, outcome: DeliveryOutcome) async throws {
        try await write { db in
            switch outcome {
            case .delivered:
                try db.cachedStatement(sql: "DELETE FROM webhook_outbox WHERE id = ?").execute(arguments: [id])
            case .retry(let at, let status, let error):
                try db.cachedStatement(
                    sql: """
                        UPDATE webhook_outbox SET attempts = attempts + 1, next_attempt_at = ?, lease_until = NULL, lease_id = NULL,
                          last_status = ?, last_error = ? WHERE id = ? AND lease_id = ?
                        """
                ).execute(arguments: [at, status, error, id, lease.id])
            case .failed(let status, let error):
                try db.cachedStatement(
                    sql: """
                        UPDATE webhook_outbox SET attempts = attempts + 1, status = 'failed', lease_until = NULL, lease_id = NULL,
                          last_status = ?, last_error = ? WHERE id = ? AND lease_id = ?
                        """
                ).execute(arguments: [status, error, id, lease.id])
            case .postponed(let until, let error):
                try db.cachedStatement(
                    sql: """
                        UPDATE webhook_outbox SET next_attempt_at = ?, lease_until = NULL, lease_id = NULL, last_error = ?
                        WHERE id = ? AND lease_id = ?
                        """
                ).execute(arguments: [until, error, id, lease.id])
            }
        }
    }

    /// Entries with `status`, by creation then id, after the cursor.
    public func outboxEntries(status: OutboxEntry.Status, after: String?, limit: Int) async throws -> [OutboxEntry] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM webhook_outbox WHERE status = ? AND id > ? ORDER BY id LIMIT ?
                    """, arguments: [status.rawValue, after ?? "", limit]
            ).map(Self.outbox)
        }
    }

    /// Makes an entry due now.
    public func redeliverOutbox(id: String, now: Date) async throws -> Bool {
        try await write { db in
            try db.cachedStatement(
                sql: """
                    UPDATE webhook_outbox SET attempts = CASE WHEN status = 'failed' THEN 0 ELSE attempts END,
                      status = 'pending', next_attempt_at = ?, lease_until = NULL, lease_id = NULL
                    WHERE id = ? AND (lease_until IS NULL OR lease_until <= ?)
                    """
            ).execute(arguments: [now, id, now])
            return db.changesCount > 0
        }
    }

    /// Drops entries written before `cutoff`.
    public func dropOutbox(writtenBefore cutoff: Date, now: Date) async throws -> [String: Int] {
        try await write { db in
            let free = "created_at < ? AND (lease_until IS NULL OR lease_until <= ?)"
            var counts: [String: Int] = [:]
            for row in try Row.fetchAll(
                db, sql: "SELECT endpoint, COUNT(*) AS n FROM webhook_outbox WHERE \(free) GROUP BY endpoint", arguments: [cutoff, now])
            {
                counts[row["endpoint"]] = row["n"]
            }
            try db.execute(sql: "DELETE FROM webhook_outbox WHERE \(free)", arguments: [cutoff, now])
            return counts
        }
    }

    /// Pending entries and the oldest one's creation.
    public func outboxBacklog() async throws -> (count: Int, oldest: Date?) {
        try await read { db in
            let row = try Row.fetchOne(db, sql: "SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM webhook_outbox WHERE status = 'pending'")
            return (row?["n"] ?? 0, row?["oldest"])
        }
    }
}
