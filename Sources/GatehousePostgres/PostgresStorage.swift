import CoreMetrics
import Foundation
import GatehouseCore
import Logging
import PostgresNIO
import Synchronization
import _ConnectionPoolModule

/// The store for several gateway instances: PostgreSQL through postgres-nio's pooled client.
///
/// Every protocol method is one statement or one transaction, so nothing is half-written (the
/// retention jobs and the purge, which work in batches, each batch one statement, excepted);
/// "take" methods are `DELETE … RETURNING`, so exactly one instance wins a state or result.
/// Serialization failures and deadlocks (40001, 40P01) are retried a few times; a unique
/// violation is `StorageError.conflict`. The pool reconnects by itself after a restart.
public final class PostgresStorage: GatehouseStorage {
    /// The connection pool.
    let client: PostgresClient
    /// Runs the pool until `shutdown()`, for an owner that does not run it itself (tests and
    /// one-shot tools); `nil` when the owner runs ``runPool()`` (as a service).
    let runner: Task<Void, Never>?
    /// Where the driver and the store log (never values).
    let logger: Logger
    /// `host:port/database`, for error messages (never the password).
    let location: String
    /// How long one statement or transaction may wait (for a connection included) before the
    /// caller gets `StorageError.unavailable`: without it, requests would queue for as long as
    /// the pool keeps trying to reach a stopped server.
    let operationTimeout: Duration
    /// The pool's in-use and waiting gauges (counted inside the timeout: an operation given up
    /// on keeps its connection until the server ends it).
    let usage: PoolUsage
    /// How long a `withLock` lease lasts unless its holder renews it (it renews while alive).
    let lockLease: Duration
    /// `lockLease` in whole milliseconds, as the lease statements give it.
    var lockLeaseMilliseconds: Int { Self.milliseconds(lockLease) }

    /// `duration` in whole milliseconds (at least one).
    static func milliseconds(_ duration: Duration) -> Int {
        max(1, duration.wholeMilliseconds)
    }
    /// How long `withLock` waits for a lock another holder has.
    let lockWait: Duration
    /// The most rows one statement of the purge and the retention jobs deletes (`inBatches`).
    let purgeBatch: Int
    /// Whole-table reads under way (`scan`).
    let scans = Mutex(0)
    /// How often the change feed's connection is asked `SELECT 1`: a connection that does not
    /// answer within the operation timeout ends the feed (`followChanges`).
    let feedCheckInterval: Duration
    /// One connection's configuration for the same server, or why it cannot be made: what
    /// `awaitReachable` connects with to learn what the server says (`nil`: not known).
    let probe: Result<PostgresConnection.Configuration, any Error>?

    /// Connects lazily with `configuration` (see `DatabaseURL`). With `runsPool` the pool runs
    /// on its own until `shutdown()`; without it, nothing is answered until the owner runs
    /// ``runPool()`` (operations issued before wait for it).
    public init(
        configuration: PostgresClient.Configuration, operationTimeout: Duration = .seconds(5), lockLease: Duration = .seconds(120),
        lockWait: Duration = .seconds(60), feedCheckInterval: Duration = .seconds(10), runsPool: Bool = true,
        metricsFactory: any MetricsFactory = NOOPMetricsHandler.instance, logger: Logger,
        probe: Result<PostgresConnection.Configuration, any Error>? = nil, purgeBatch: Int = 1000
    ) {
        // The server ends a statement still running after the operation timeout: one the
        // caller was answered `unavailable` for cannot complete long after (`write`). The
        // probe asks with the same parameter, so a pooler that refuses it is named as such.
        let statementTimeout = ("statement_timeout", "\(Self.milliseconds(operationTimeout))")
        self.probe = probe?.map { probe in
            var probe = probe
            probe.options.additionalStartupParameters.append(statementTimeout)
            return probe
        }
        self.purgeBatch = max(1, purgeBatch)
        self.feedCheckInterval = feedCheckInterval
        var configuration = configuration
        configuration.options.additionalStartupParameters.append(statementTimeout)
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        self.logger = logger
        self.operationTimeout = operationTimeout
        self.lockLease = lockLease
        self.lockWait = lockWait
        usage = PoolUsage(maximumConnections: configuration.options.maximumConnections, factory: metricsFactory)
        location = "\(configuration.host ?? configuration.unixSocketPath ?? "?"):\(configuration.port ?? 5432)/\(configuration.database ?? "")"
        runner = runsPool ? Task { await client.run() } : nil
    }

    /// Runs the connection pool until the task is cancelled or, inside a service group, a
    /// graceful shutdown is triggered (postgres-nio's client is a `Service`).
    public func runPool() async {
        await client.run()
    }

    /// Connects with a `postgres://` URL.
    public convenience init(
        url: String, maximumConnections: Int = 20, operationTimeout: Duration = .seconds(5), lockLease: Duration = .seconds(120),
        lockWait: Duration = .seconds(60), feedCheckInterval: Duration = .seconds(10), runsPool: Bool = true,
        metricsFactory: any MetricsFactory = NOOPMetricsHandler.instance, logger: Logger
    ) throws {
        self.init(
            configuration: try DatabaseURL.configuration(url, maximumConnections: maximumConnections), operationTimeout: operationTimeout,
            lockLease: lockLease, lockWait: lockWait, feedCheckInterval: feedCheckInterval, runsPool: runsPool,
            metricsFactory: metricsFactory, logger: logger, probe: Result { try DatabaseURL.connectionConfiguration(url) })
    }

    deinit {
        runner?.cancel()
    }

    /// Applies the versioned, forward-only migrations under an advisory lock (waiting for the
    /// database as long as it takes: see `awaitReachable`).
    public func migrate() async throws {
        do {
            let lockWait = min(PostgresMigrations.lockWait, operationTimeout / 2)
            try await retrying { try await PostgresMigrations.migrate(client, lockWait: lockWait, logger: logger) }
        } catch let error as PostgresStorageError {
            throw error
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            // postgres-nio's descriptions are generic on purpose (no credentials); add where,
            // and what the server said.
            throw PostgresStorageError("could not migrate the PostgreSQL database at \(location): \(Self.summary(of: error))")
        }
    }

    /// What went wrong, without postgres-nio's transaction wrapper: the failed statement's
    /// error (else the commit's, else the begin's), a server error as its SQLSTATE and message.
    static func summary(of error: any Error) -> String {
        if let error = error as? PostgresTransactionError, let inner = error.closureError ?? error.commitError ?? error.beginError {
            return summary(of: inner)
        }
        return (error as? any StoreFailureSummary)?.storeFailureSummary ?? "\(error)"
    }

    /// Runs `SELECT 1`, within `limit` (at most the operation timeout).
    public func ping(within limit: Duration?) async throws {
        // A pool with no server queues the request until the limit: readiness passes a short
        // one so that it follows the database within a second.
        let client = self.client
        let logger = self.logger
        let usage = self.usage
        _ = try await retrying {
            try await withinTimeout(limit.map { min($0, operationTimeout) }) {
                try await usage.counting { try await client.query("SELECT 1", logger: logger) }
            }
        }
    }

    /// Replaces an account's claims inside a transaction; with a basis, only while the account
    /// holds exactly it (`IS NOT DISTINCT FROM`: none equals none), else
    /// `StorageError.changedMeanwhile`, which rolls the transaction back.
    static func replaceClaims(_ claims: ClaimsReplacement, uid: String, connection: PostgresConnection, logger: Logger) async throws {
        switch claims.basis {
        case .any:
            try await connection.query("UPDATE accounts SET custom_claims = \(claims.stored) WHERE uid = \(uid)", logger: logger)
        case .exactly(let basis):
            let rows = try await connection.query(
                "UPDATE accounts SET custom_claims = \(claims.stored) WHERE uid = \(uid) AND custom_claims IS NOT DISTINCT FROM \(basis) RETURNING 1",
                logger: logger)
            var changed = false
            for try await _ in rows { changed = true }
            guard changed else { throw StorageError.changedMeanwhile }
        }
    }

    /// `statement`, then (in the same transaction) the deletion of the pending credential a
    /// claim consumes; the statement alone when there is none. With `unlessNoRow`, a
    /// statement that answers no row commits nothing and throws that error. `first` runs in
    /// the same transaction before the statement (a check that may throw); under `rule`, the
    /// statement runs as `updating` runs it.
    func withPendingConsumed(
        _ tokenHash: String?, _ statement: PostgresQuery, replacingClaims: ClaimsReplacement?, uid: String, unlessNoRow: StorageError? = nil,
        first: (@Sendable (PostgresConnection, Logger) async throws -> Void)? = nil, rule: EmailRule? = nil
    ) async throws {
        guard tokenHash != nil || replacingClaims != nil || first != nil || rule != nil else {
            guard let unlessNoRow else { return try await execute(statement) }
            guard try await changed(statement) else { throw unlessNoRow }
            return
        }
        try await transaction { connection, logger in
            try await first?(connection, logger)
            let wrote = try await Self.updating(statement, under: rule, connection, logger)
            if let unlessNoRow, !wrote { throw unlessNoRow }
            if let tokenHash {
                // Taken by another claim since it was read: this one writes nothing.
                let taken = try await connection.query("DELETE FROM pending_credentials WHERE token_hash = \(tokenHash) RETURNING 1", logger: logger)
                guard try await Self.answersRow(taken) else { throw StorageError.pendingGone }
            }
            if let replacingClaims {
                try await Self.replaceClaims(replacingClaims, uid: uid, connection: connection, logger: logger)
            }
        }
    }

    /// Whether a statement answered at least one row.
    static func answersRow(_ rows: PostgresRowSequence) async throws -> Bool {
        for try await _ in rows { return true }
        return false
    }

    /// The columns a pending credential is read from, in `pending(_:)`'s order.
    static let pendingColumns = "token_hash, target_uid, provider_id, federated_id, profile_json, sealed_tokens, verified_email, expires_at"

    /// The first pending credential of a result, if any.
    static func pending(_ rows: [PostgresRow]) throws -> PendingCredentialRecord? {
        for (hash, target, provider, federated, profile, tokens, email, expires) in try rows.decode(
            (String, String, String, String, Data, String, String?, Date).self)
        {
            return PendingCredentialRecord(
                tokenHash: hash, targetUid: target, providerId: provider, federatedId: federated, profileJSON: profile, sealedTokens: tokens,
                verifiedEmail: email, expiresAt: expires)
        }
        return nil
    }

    /// Deletes expired transactions, results and sessions, in batches of at most `purgeBatch`
    /// rows, each its own short statement within the operation timeout: a backlog of any
    /// size is worked through, and no batch holds rows long enough to make a refresh wait past
    /// its retry window. A batch slower than the timeout (a busy database, a session batch
    /// with many cascades) is tried again a quarter the size; a table that still fails is left
    /// for the next purge, the others purged meanwhile, and the first failure thrown at the end.
    public func purgeExpired(now: Date) async throws {
        var failure: (any Error)?
        for statement in Self.purgeStatements {
            do {
                _ = try await inBatches { size in statement(now, size) }
            } catch {
                failure = failure ?? error
            }
        }
        if let failure { throw failure }
    }

    /// The purge's statements, each deleting (or clearing) at most `limit` rows expired at
    /// `now` and answering a row for each. The outer condition repeats the subquery's, so a
    /// row changed between the two is judged as it is now.
    static let purgeStatements: [@Sendable (Date, Int) -> PostgresQuery] = [
        { now, limit in
            """
            DELETE FROM signin_transactions
            WHERE ctid IN (SELECT ctid FROM signin_transactions WHERE expires_at <= \(now) LIMIT \(limit)) AND expires_at <= \(now)
            RETURNING 1
            """
        },
        { now, limit in
            """
            DELETE FROM signin_results
            WHERE ctid IN (SELECT ctid FROM signin_results WHERE expires_at <= \(now) OR retry_until <= \(now) LIMIT \(limit))
              AND (expires_at <= \(now) OR retry_until <= \(now))
            RETURNING 1
            """
        },
        { now, limit in
            """
            UPDATE refresh_tokens SET sealed_successor = NULL, retry_until = NULL
            WHERE ctid IN (SELECT ctid FROM refresh_tokens WHERE retry_until <= \(now) LIMIT \(limit) FOR UPDATE SKIP LOCKED)
              AND retry_until <= \(now)
            RETURNING 1
            """
        },
        { now, limit in
            """
            DELETE FROM sessions WHERE ctid IN (SELECT ctid FROM sessions WHERE expires_at <= \(now) LIMIT \(limit)) AND expires_at <= \(now)
            RETURNING 1
            """
        },
        { now, limit in
            """
            DELETE FROM pending_credentials
            WHERE ctid IN (SELECT ctid FROM pending_credentials WHERE expires_at <= \(now) LIMIT \(limit)) AND expires_at <= \(now)
            RETURNING 1
            """
        },
        { now, limit in
            """
            DELETE FROM spent_tokens WHERE ctid IN (SELECT ctid FROM spent_tokens WHERE expires_at <= \(now) LIMIT \(limit)) AND expires_at <= \(now)
            RETURNING 1
            """
        },
        // The uses of sessions that ended (expired, signed out, revoked).
        { _, limit in
            """
            DELETE FROM session_uses u WHERE u.family_id IN (
              SELECT v.family_id FROM session_uses v WHERE NOT EXISTS (SELECT 1 FROM sessions s WHERE s.family_id = v.family_id) LIMIT \(limit))
              AND NOT EXISTS (SELECT 1 FROM sessions s WHERE s.family_id = u.family_id)
            RETURNING 1
            """
        },
        // Leases whose holder died (the server's clock, like the leases themselves).
        { _, _ in "DELETE FROM gatehouse_locks WHERE expires_at < now() RETURNING 1" },
    ]

    /// Takes the lease when nobody holds it or its holder's lease has ended (the server's
    /// clock decides, so instances' clocks need not agree).
    func lease(_ name: String, holder: String) async throws -> Bool {
        let milliseconds = lockLeaseMilliseconds
        let rows = try await write(
            """
            INSERT INTO gatehouse_locks (name, holder, expires_at) VALUES (\(name), \(holder), now() + \(milliseconds) * interval '1 millisecond')
            ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
            WHERE gatehouse_locks.expires_at < now()
            RETURNING holder
            """)
        return !rows.isEmpty
    }

    // MARK: Helpers

    /// The columns a link is read from, in `decodeLinks(_:)`'s order.
    static let linkColumns = "uid, provider_id, federated_id, profile_json, sealed_tokens, linked_at, updated_at, verified_email"
    /// The columns a session is read from, in `firstSession(_:)`'s order.
    static let sessionColumns = "id_hash, uid, created_at, expires_at, family_id, sign_in_provider, claims, authenticated_at"
    /// The columns a service key is read from, in `serviceKeys(_:)`'s order.
    static let keyColumns = "id, name, secret_hash, scopes, created_at, revoked_at"

    /// The statement that replaces a link's snapshot and tokens (its snapshot only,
    /// `keepingTokens`), answering a row when it did; `holdingItsEmail`: only where the link
    /// holds `link.verifiedEmail` already.
    static func updateQuery(_ link: ProviderLinkRecord, keepingTokens: Bool, holdingItsEmail: Bool = false) throws -> PostgresQuery {
        let sealed = keepingTokens ? nil : link.sealedTokens
        return try """
        UPDATE provider_links SET profile_json = \(link.profileJSON), sealed_tokens = coalesce(\(sealed), sealed_tokens),
          updated_at = \(link.updatedAt), verified_email = \(link.verifiedEmail)
        WHERE provider_id = \(link.providerId) AND federated_id = \(link.federatedId) AND uid = \(link.uid)
          AND (\(!holdingItsEmail) OR verified_email = \(link.verifiedEmail))
        RETURNING 1
        """
    }

    /// The statement that inserts a link.
    static func insertQuery(_ link: ProviderLinkRecord) throws -> PostgresQuery {
        try """
        INSERT INTO provider_links (uid, provider_id, federated_id, profile_json, sealed_tokens, linked_at, updated_at, verified_email)
        VALUES (\(link.uid), \(link.providerId), \(link.federatedId), \(link.profileJSON), \(link.sealedTokens), \(link.linkedAt),
          \(link.updatedAt), \(link.verifiedEmail))
        """
    }

    /// The links a query returns.
    func links(_ statement: PostgresQuery) async throws -> [ProviderLinkRecord] {
        try Self.decodeLinks(try await query(statement, logger: logger))
    }

    /// The links a query returns, on a transaction's connection.
    static func links(_ statement: PostgresQuery, on connection: PostgresConnection, logger: Logger) async throws
        -> [ProviderLinkRecord]
    {
        try decodeLinks(try await connection.query(statement, logger: logger).collect())
    }

    /// Links from rows of `linkColumns`.
    static func decodeLinks(_ rows: [PostgresRow]) throws -> [ProviderLinkRecord] {
        var links: [ProviderLinkRecord] = []
        for (uid, provider, federated, profile, tokens, linked, updated, email) in try rows.decode(
            (String, String, String, Data, String, Date, Date, String?).self)
        {
            links.append(
                ProviderLinkRecord(
                    uid: uid, providerId: provider, federatedId: federated, profileJSON: profile, sealedTokens: tokens, linkedAt: linked,
                    updatedAt: updated, verifiedEmail: email))
        }
        return links
    }

    /// The first session of a query's rows.
    static func firstSession(_ rows: [PostgresRow]) throws -> SessionRecord? {
        for (id, uid, created, expires, family, provider, claims, authenticated) in try rows.decode(
            (String, String, Date, Date, String, String, Data?, Date?).self)
        {
            return SessionRecord(
                idHash: id, uid: uid, createdAt: created, expiresAt: expires, familyId: family, signInProvider: provider, claims: claims,
                authenticatedAt: authenticated)
        }
        return nil
    }

    /// The service keys a query returns.
    func serviceKeys(_ statement: PostgresQuery) async throws -> [ServiceKeyRecord] {
        var keys: [ServiceKeyRecord] = []
        for (id, name, hash, scopes, created, revoked) in try await query(statement, logger: logger).decode(
            (String, String, String, String, Date, Date?).self)
        {
            keys.append(
                ServiceKeyRecord(
                    id: id, name: name, secretHash: hash, scopes: scopes.split(separator: " ").map(String.init), createdAt: created,
                    revokedAt: revoked))
        }
        return keys
    }

    /// Runs `operation`, retrying 40001/40P01 up to four times with a short growing pause,
    /// turning a unique violation into `StorageError.conflict` and a database that cannot be
    /// reached into `StorageError.unavailable` (the API's `503`, not a `500`).
    func retrying<T>(_ operation: () async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            do {
                return try await operation()
            } catch {
                // A store rule a transaction's body broke (it was rolled back): said as it is.
                if let error = error as? PostgresTransactionError, let broken = error.closureError as? StorageError,
                    error.commitError == nil
                {
                    throw broken
                }
                if Self.isUnreachable(error) { throw StorageError.unavailable }
                switch Self.sqlState(of: error) {
                case PostgresError.Code.uniqueViolation.raw:
                    throw StorageError.conflict
                case let state? where Self.exhaustedStates[state] != nil:
                    throw StorageError.exhausted(condition: "\(Self.exhaustedStates[state] ?? "") (SQLSTATE \(state))")
                case let state? where attempt < 4 && Self.retryableStates.contains(state):
                    attempt += 1
                    // Worth seeing: frequent retries mean contention an operator may want to know about.
                    logger.notice("transaction retried", metadata: ["sqlstate": "\(state)", "attempt": "\(attempt)"])
                    try await Task.sleep(for: .milliseconds(5 << attempt))
                default:
                    throw error
                }
            }
        }
    }

    /// The server lacks a resource, or cannot write: nothing was committed, and the answer is
    /// 503. A read-only transaction is what a connection to a primary demoted by a failover
    /// (or a standby) meets; class 58 is the server's I/O failing.
    static let exhaustedStates: [String: String] = [
        "53100": "disk full", "53200": "out of memory", "53300": "too many connections", "53400": "configuration limit exceeded",
        "25006": "the database is read-only", "58000": "a system error", "58030": "an I/O error", "58P01": "a file is missing",
        "58P02": "a file exists already",
    ]

    /// Serialization failure and deadlock: the transaction lost a race and may simply run again.
    static let retryableStates: Set<String> = [PostgresError.Code.serializationFailure.raw, PostgresError.Code.deadlockDetected.raw]

    /// The pool cannot connect, the connection broke, or the server is shutting down
    /// (SQLSTATE classes 08 and 57).
    static func isUnreachable(_ error: any Error) -> Bool {
        if error is ConnectionPoolError { return true }
        if let error = error as? PostgresTransactionError {
            return [error.beginError, error.closureError, error.commitError].compactMap { $0 }.contains(where: isUnreachable)
        }
        if let state = sqlState(of: error) { return state.hasPrefix("08") || state.hasPrefix("57") }
        guard let error = error as? PSQLError else { return false }
        return [.connectionError, .serverClosedConnection, .uncleanShutdown, .clientClosedConnection, .poolClosed].contains(error.code)
    }

    /// The SQLSTATE of a server error, also when it is wrapped in a transaction error.
    static func sqlState(of error: any Error) -> String? {
        if let error = error as? PSQLError { return error.serverInfo?[.sqlState] }
        if let error = error as? PostgresTransactionError {
            for inner in [error.closureError, error.commitError, error.beginError].compactMap({ $0 }) {
                if let state = sqlState(of: inner) { return state }
            }
        }
        return nil
    }
}
