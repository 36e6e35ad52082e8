import Foundation
import GatehouseCore
import Logging
import PostgresNIO
import Synchronization

/// How PostgresStorage runs its statements: reads and writes within the operation timeout,
/// whole-table reads, transactions, and deletes in batches.
extension PostgresStorage {
    /// One statement that only reads, through the pool with `retrying`'s error handling, its
    /// rows read in full within the operation timeout (a read past it is `unavailable`; the
    /// server's `statement_timeout` ends it too). Reads that scan whole tables use `scan`.
    func query(_ statement: PostgresQuery, logger: Logger) async throws -> [PostgresRow] {
        let client = self.client
        let usage = self.usage
        return try await retrying {
            try await withinTimeout { try await usage.counting { try await client.query(statement, logger: logger).collect() } }
        }
    }

    /// A read that may scan whole tables (an operator's search, a search by a snapshot's
    /// address, the census of sealed values), its rows read in full: it may take `scanTimeout`
    /// (on the server too), since a large store takes longer than a request's read may. With
    /// `limited`, at most `scanLimit` such reads run at once on this instance (another is
    /// `unavailable` at once), so that reads a caller can ask for again and again never hold
    /// more of the pool; the census is not limited, since the first data key's bootstrap, on
    /// the way of every seal, waits for it.
    func scan(_ statement: PostgresQuery, limited: Bool = true) async throws -> [PostgresRow] {
        let admitted = scans.withLock { running in
            guard !limited || running < Self.scanLimit else { return false }
            running += 1
            return true
        }
        guard admitted else { throw StorageError.unavailable }
        defer { scans.withLock { $0 -= 1 } }
        let client = self.client
        let logger = self.logger
        let usage = self.usage
        let limit = scanTimeout
        return try await retrying {
            try await withinTimeout(limit) {
                try await usage.counting {
                    try await client.withTransaction(logger: logger) { connection in
                        try await connection.query("SET LOCAL statement_timeout = \(unescaped: "\(Self.milliseconds(limit))")", logger: logger)
                        return try await connection.query(statement, logger: logger).collect()
                    }
                }
            }
        }
    }

    /// How long a whole-table read may take: six operation timeouts.
    var scanTimeout: Duration { operationTimeout * 6 }

    /// How many whole-table reads may run at once (`scan`).
    static let scanLimit = 2

    /// One statement that writes, its rows collected: like a transaction, one still waiting at
    /// the operation timeout is answered `StorageError.unavailable` and never completes
    /// afterwards. One not sent yet at the limit is not sent; one under way is ended by the
    /// server's `statement_timeout` (the operation timeout, set on every pooled connection), and
    /// its answer waits for it (`withinTimeout`'s gate).
    func write(_ statement: PostgresQuery) async throws -> [PostgresRow] {
        try await gated { client, gate, logger in
            try await client.withConnection { connection in
                guard gate.mayCommit() else { throw StorageError.unavailable }
                return try await connection.query(statement, logger: logger).collect()
            }
        }
    }

    /// One statement whose rows are not needed (in a transaction with the webhook events
    /// recorded with it, if any).
    func execute(_ statement: PostgresQuery) async throws {
        guard Outbox.entries.isEmpty else {
            return try await transaction { connection, logger in _ = try await connection.query(statement, logger: logger) }
        }
        _ = try await write(statement)
    }

    /// Whether an `UPDATE … RETURNING` touched a row (in a transaction with the webhook events
    /// recorded with it, if any: inserted only when it did).
    func changed(_ statement: PostgresQuery) async throws -> Bool {
        guard Outbox.entries.isEmpty else {
            return try await transaction { connection, logger in
                for try await _ in try await connection.query(statement, logger: logger) { return true }
                return false
            }
        }
        return try await !write(statement).isEmpty
    }

    /// A transaction, retried whole on a serialization failure or deadlock. The webhook events
    /// recorded with the write (`Outbox.entries`) are inserted in it, unless the write reports
    /// it changed nothing. A transaction still running at the operation timeout is answered
    /// `StorageError.unavailable` and never commits afterwards (`CommitGate`), so a `503`
    /// means nothing was written.
    func transaction<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection, Logger) async throws -> T) async throws -> T {
        let recorded = Outbox.entries
        return try await gated { client, gate, logger in
            try await client.withTransaction(logger: logger) { connection in
                let result = try await body(connection, logger)
                for entry in Outbox.keep(recorded, after: result) {
                    try await connection.query(try Self.insertOutboxQuery(entry), logger: logger)
                }
                // Rolled back instead when the caller was answered meanwhile.
                guard gate.mayCommit() else { throw StorageError.unavailable }
                return result
            }
        }
    }

    /// What writes share: `body` given the pool, a fresh `CommitGate` for each attempt and the
    /// store's logger, retried by `retrying`, within the operation timeout behind that gate,
    /// counted in the pool's gauges.
    private func gated<T: Sendable>(
        _ body: @escaping @Sendable (PostgresClient, CommitGate, Logger) async throws -> T
    ) async throws -> T {
        let logger = self.logger
        let client = self.client
        let usage = self.usage
        return try await retrying {
            let gate = CommitGate()
            return try await withinTimeout(gate: gate) { try await usage.counting { try await body(client, gate, logger) } }
        }
    }

    /// `operation`, or `StorageError.unavailable` once `limit` (default the operation timeout)
    /// has passed. The operation is then cancelled but not waited for: a connection broken
    /// mid-query may not notice cancellation for a long time, and neither the request nor a
    /// shutdown may hang on it. postgres-nio does not stop a statement under way when its
    /// task is cancelled: a write's `gate` keeps a transaction from committing, and a single
    /// statement from being sent, after the answer. When the commit or the statement is
    /// already under way at the limit, the answer waits for it one limit and a quarter more:
    /// the server's `statement_timeout` ends it within one limit of its start. Only a commit
    /// whose answer is lost or late past that wait (a broken connection, a server stalled at
    /// commit) may still have completed, as with any connection lost at commit.
    func withinTimeout<T: Sendable>(
        _ limit: Duration? = nil, gate: CommitGate? = nil, _ operation: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        let timeout = limit ?? operationTimeout
        let outcome = Eventual<T>()
        let work = Task {
            do { outcome.set(try await operation()) } catch { outcome.fail(error) }
        }
        let timer = Task {
            try? await Task.sleep(for: timeout)
            if let gate, !gate.expire() {
                try? await Task.sleep(for: timeout + timeout / 4)
            }
            outcome.fail(StorageError.unavailable)
        }
        defer { timer.cancel() }
        do {
            return try await withTaskCancellationHandler {
                try await outcome.value()
            } onCancel: {
                work.cancel()
            }
        } catch {
            work.cancel()
            throw error
        }
    }

    /// Runs `batch` (a statement answering a row for each row it deleted or changed, at most
    /// the size it is given) until it answers fewer rows than its size, hands each batch's
    /// rows to `each`, and answers how many rows it did. Each batch is one statement within
    /// the operation timeout; one slower than that is tried again a quarter the size, and the
    /// size grows back by half again after each batch that succeeded, never again to one that
    /// failed.
    func inBatches(_ batch: (Int) -> PostgresQuery, each: ([PostgresRow]) throws -> Void = { _ in }) async throws -> Int {
        var size = purgeBatch
        // Below the smallest size that failed in this run: growing back stops short of it.
        var ceiling = purgeBatch
        var total = 0
        while true {
            do {
                let rows = try await write(batch(size))
                try each(rows)
                total += rows.count
                if rows.count < size { return total }
                size = min(ceiling, size + max(1, size / 2))
            } catch StorageError.unavailable where size > 1 && !Task.isCancelled {
                ceiling = size - 1
                size = max(1, size / 4)
            }
        }
    }
}

extension [PostgresRow] {
    /// Each row decoded, as `PostgresRowSequence.decode(_:)` decodes a sequence's.
    func decode<each Column: PostgresDecodable>(_ columns: (repeat each Column).Type) throws -> [(repeat each Column)] {
        try map { try $0.decode(columns) }
    }
}
