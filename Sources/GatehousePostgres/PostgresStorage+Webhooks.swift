import Foundation
import GatehouseCore
import Logging
import PostgresNIO

/// PostgresStorage's `WebhookStore` part: due entries are claimed with `FOR UPDATE SKIP
/// LOCKED` and a lease, so instances never take the same entry while its lease runs, and the
/// entries of an instance that died are taken over once their lease has passed. Leases run on
/// the server's clock (`now()`), as the named locks' do: whether a lease holds does not depend
/// on the instances' clocks (when an entry is due still does: it is written with theirs).
extension PostgresStorage {
    /// The statement that inserts an outbox entry.
    static func insertOutboxQuery(_ entry: OutboxEntry) throws -> PostgresQuery {
        try """
        INSERT INTO webhook_outbox (id, event_id, endpoint, type, payload, created_at, next_attempt_at, attempts, status)
        VALUES (\(entry.id), \(entry.eventId), \(entry.endpoint), \(entry.type), \(entry.payload), \(entry.createdAt),
          \(entry.nextAttemptAt), \(entry.attempts), \(entry.status.rawValue))
        """
    }

    /// The columns an entry is read from, in `outbox(_:)`'s order.
    static let outboxColumns = "event_id, endpoint, type, payload, created_at, next_attempt_at, attempts, status, last_status, last_error"

    /// The entries of a query's rows.
    static func outbox(_ rows: [PostgresRow]) throws -> [OutboxEntry] {
        var entries: [OutboxEntry] = []
        for (event, endpoint, type, payload, created, next, attempts, status, lastStatus, lastError) in try rows.decode(
            (String, String, String, Data, Date, Date, Int, String, Int?, String?).self)
        {
            entries.append(
                OutboxEntry(
                    eventId: event, endpoint: endpoint, type: type, payload: payload, createdAt: created, nextAttemptAt: next, attempts: attempts,
                    status: OutboxEntry.Status(rawValue: status) ?? .pending, lastStatus: lastStatus, lastError: lastError))
        }
        return entries
    }

    /// Leases up to `limit` due entries (due by the caller's `now`, leased on the server's clock:
    /// free by the transaction's start, held from the statement's time, so a slow `BEGIN` does
    /// not shorten the lease).
    public func claimOutbox(endpoint: String, now: Date, lease: OutboxLease, limit: Int) async throws -> [OutboxEntry] {
        let milliseconds = Int((lease.duration * 1000).rounded())
        return try await transaction { connection, logger in
            try Self.outbox(
                try await connection.query(
                    """
                    UPDATE webhook_outbox SET lease_until = clock_timestamp() + \(milliseconds) * interval '1 millisecond', lease_id = \(lease.id)
                    WHERE id IN (
                      SELECT id FROM webhook_outbox
                      WHERE endpoint = \(endpoint) AND status = 'pending' AND next_attempt_at <= \(now)
                        AND (lease_until IS NULL OR lease_until <= now())
                      ORDER BY next_attempt_at LIMIT \(limit) FOR UPDATE SKIP LOCKED)
                    RETURNING \(unescaped: Self.outboxColumns)
                    """, logger: logger
                ).collect())
        }
    }

    /// Records an attempt by the holder of `lease`; a delivery by anyone.
    public func completeOutbox(id: String, lease: OutboxLease, outcome: DeliveryOutcome) async throws {
        switch outcome {
        case .delivered:
            try await execute("DELETE FROM webhook_outbox WHERE id = \(id)")
        case .retry(let at, let status, let error):
            try await execute(
                """
                UPDATE webhook_outbox SET attempts = attempts + 1, next_attempt_at = \(at), lease_until = NULL, lease_id = NULL,
                  last_status = \(status), last_error = \(error) WHERE id = \(id) AND lease_id = \(lease.id)
                """)
        case .failed(let status, let error):
            try await execute(
                """
                UPDATE webhook_outbox SET attempts = attempts + 1, status = 'failed', lease_until = NULL, lease_id = NULL,
                  last_status = \(status), last_error = \(error) WHERE id = \(id) AND lease_id = \(lease.id)
                """)
        case .postponed(let until, let error):
            try await execute(
                """
                UPDATE webhook_outbox SET next_attempt_at = \(until), lease_until = NULL, lease_id = NULL, last_error = \(error)
                WHERE id = \(id) AND lease_id = \(lease.id)
                """)
        }
    }

    /// Entries with `status`, by id, after the cursor.
    public func outboxEntries(status: OutboxEntry.Status, after: String?, limit: Int) async throws -> [OutboxEntry] {
        try Self.outbox(
            try await query(
                """
                SELECT \(unescaped: Self.outboxColumns) FROM webhook_outbox WHERE status = \(status.rawValue) AND id COLLATE "C" > \(after ?? "")
                ORDER BY id COLLATE "C" LIMIT \(limit)
                """, logger: logger))
    }

    /// Makes an entry due now, unless a lease runs on it (the server's clock).
    public func redeliverOutbox(id: String, now: Date) async throws -> Bool {
        try await changed(
            """
            UPDATE webhook_outbox SET attempts = CASE WHEN status = 'failed' THEN 0 ELSE attempts END,
              status = 'pending', next_attempt_at = \(now), lease_until = NULL, lease_id = NULL
            WHERE id = \(id) AND (lease_until IS NULL OR lease_until <= now()) RETURNING id
            """)
    }

    /// Drops entries written before `cutoff` that no lease holds (the server's clock; `now` is
    /// not needed).
    public func dropOutbox(writtenBefore cutoff: Date, now: Date) async throws -> [String: Int] {
        var counts: [String: Int] = [:]
        // Oldest first in batches (`inBatches`): a backlog of any size is worked through within
        // the operation timeout of each. A failure after some batches is logged, and what they
        // dropped answered, so that it is reported (the next round goes on).
        do {
            _ = try await inBatches { size in
                """
                DELETE FROM webhook_outbox WHERE id IN (
                  SELECT id FROM webhook_outbox WHERE created_at < \(cutoff) AND (lease_until IS NULL OR lease_until <= now())
                  ORDER BY created_at LIMIT \(size))
                  AND created_at < \(cutoff) AND (lease_until IS NULL OR lease_until <= now())
                RETURNING endpoint
                """
            } each: { rows in
                for endpoint in try rows.decode(String.self) { counts[endpoint, default: 0] += 1 }
            }
        } catch let error where !counts.isEmpty {
            logger.warning("webhook entry retention stopped part-way", metadata: ["error": "\(Self.summary(of: error))"])
        }
        return counts
    }

    /// Pending entries and the oldest one's creation.
    public func outboxBacklog() async throws -> (count: Int, oldest: Date?) {
        for (count, oldest) in try await query(
            "SELECT count(*)::int, min(created_at) FROM webhook_outbox WHERE status = 'pending'", logger: logger
        ).decode((Int, Date?).self) {
            return (count, oldest)
        }
        return (0, nil)
    }
}
