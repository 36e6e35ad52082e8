import Foundation
import GatehouseCore
import Logging
import PostgresNIO

/// The PostgreSQL schema, as versioned forward-only migrations. Never edit a shipped
/// migration: add the next one. Applied under a session-level advisory lock, so that
/// several instances starting at once apply each migration exactly once. A statement waits at
/// most `lockWait` for a table's lock: a migration's `ALTER TABLE` queued behind a long
/// transaction would otherwise hold every write to that table, the serving instances' too,
/// until it ended (`migrate`).
enum PostgresMigrations {
    /// One migration: a version name, its statements and then its Swift step, applied in one
    /// transaction.
    struct Migration: Sendable {
        let version: String
        let statements: [String]
        /// Work SQL cannot do as the gateway does it (the gateway's own normalization).
        var step: (@Sendable (PostgresConnection, Logger) async throws -> Void)? = nil
    }

    /// An arbitrary, fixed key for the migrations' advisory lock ("gatehous" in ASCII).
    static let lockKey: Int64 = 0x6761_7465_686F_7573
    /// How long a migration's statement waits for a lock another transaction holds, at most
    /// (`PostgresStorage` passes half of its operation timeout when that is shorter): what the
    /// writes queued behind it wait.
    static let lockWait = Duration.seconds(2)
    /// How long a migration that gave up a lock waits before it tries again, the first time
    /// (then twice, four, eight, then ten times as long, ± 20 %).
    static let lockRetryPause = Duration.seconds(3)

    /// Every migration, oldest first.
    static let all: [Migration] = [
        Migration(
            version: "v1-initial",
            statements: [
                """
                CREATE TABLE accounts (
                  uid text PRIMARY KEY,
                  created_at timestamptz NOT NULL,
                  last_sign_in_at timestamptz NOT NULL,
                  disabled boolean NOT NULL DEFAULT false
                )
                """,
                """
                CREATE TABLE provider_links (
                  uid text NOT NULL REFERENCES accounts(uid) ON DELETE CASCADE,
                  provider_id text NOT NULL,
                  federated_id text NOT NULL,
                  profile_json bytea NOT NULL,
                  sealed_tokens text NOT NULL,
                  linked_at timestamptz NOT NULL,
                  updated_at timestamptz NOT NULL,
                  PRIMARY KEY (provider_id, federated_id),
                  UNIQUE (uid, provider_id)
                )
                """,
                "CREATE INDEX provider_links_uid ON provider_links(uid)",
                """
                CREATE TABLE signin_transactions (
                  state_hash text PRIMARY KEY,
                  binding_hash text NOT NULL,
                  provider_id text NOT NULL,
                  code_verifier text NOT NULL,
                  nonce text NOT NULL,
                  return_to text NOT NULL,
                  mode text NOT NULL,
                  redirect_uri text NOT NULL,
                  provider_context text NOT NULL DEFAULT '',
                  created_at timestamptz NOT NULL,
                  expires_at timestamptz NOT NULL
                )
                """,
                "CREATE INDEX signin_transactions_expires_at ON signin_transactions(expires_at)",
                """
                CREATE TABLE signin_results (
                  id_hash text PRIMARY KEY,
                  payload bytea NOT NULL,
                  expires_at timestamptz NOT NULL
                )
                """,
                "CREATE INDEX signin_results_expires_at ON signin_results(expires_at)",
                """
                CREATE TABLE sessions (
                  id_hash text PRIMARY KEY,
                  uid text NOT NULL REFERENCES accounts(uid) ON DELETE CASCADE,
                  created_at timestamptz NOT NULL,
                  expires_at timestamptz NOT NULL
                )
                """,
                "CREATE INDEX sessions_uid ON sessions(uid)",
                "CREATE INDEX sessions_expires_at ON sessions(expires_at)",
                """
                CREATE TABLE service_keys (
                  id text PRIMARY KEY,
                  name text NOT NULL,
                  secret_hash text NOT NULL UNIQUE,
                  scopes text NOT NULL,
                  created_at timestamptz NOT NULL,
                  revoked_at timestamptz
                )
                """,
            ]),
        // Accounts like Firebase's: verified emails for "one account per email", sessions that
        // double as refresh-token families, pending credentials, the gateway's signing keys,
        // and the account a link or re-authentication flow belongs to.
        Migration(
            version: "v2-accounts-and-gateway-tokens",
            statements: [
                "ALTER TABLE provider_links ADD COLUMN verified_email text",
                // Through `snapshotField`: a snapshot holding `\u0000` would stop the upgrade.
                """
                UPDATE provider_links SET verified_email = lower(normalize(btrim(\(PostgresStorage.snapshotField("profile_json", "email"))), NFC))
                WHERE (\(PostgresStorage.snapshotField("profile_json", "emailVerified")))::boolean
                  AND (\(PostgresStorage.snapshotField("profile_json", "email"))) LIKE '%_@_%'
                """,
                "CREATE INDEX provider_links_verified_email ON provider_links(verified_email)",
                "ALTER TABLE signin_transactions ADD COLUMN uid text",
                "ALTER TABLE sessions ADD COLUMN family_id text",
                "ALTER TABLE sessions ADD COLUMN sign_in_provider text NOT NULL DEFAULT ''",
                "UPDATE sessions SET family_id = id_hash",
                "ALTER TABLE sessions ALTER COLUMN family_id SET NOT NULL",
                "ALTER TABLE sessions ADD CONSTRAINT sessions_family_id UNIQUE (family_id)",
                """
                CREATE TABLE refresh_tokens (
                  token_hash text PRIMARY KEY,
                  family_id text NOT NULL REFERENCES sessions(family_id) ON DELETE CASCADE,
                  created_at timestamptz NOT NULL,
                  used_at timestamptz
                )
                """,
                "CREATE INDEX refresh_tokens_family_id ON refresh_tokens(family_id)",
                """
                CREATE TABLE pending_credentials (
                  token_hash text PRIMARY KEY,
                  target_uid text NOT NULL REFERENCES accounts(uid) ON DELETE CASCADE,
                  provider_id text NOT NULL,
                  federated_id text NOT NULL,
                  profile_json bytea NOT NULL,
                  sealed_tokens text NOT NULL,
                  verified_email text,
                  expires_at timestamptz NOT NULL
                )
                """,
                "CREATE INDEX pending_credentials_expires_at ON pending_credentials(expires_at)",
                """
                CREATE TABLE signing_keys (
                  kid text PRIMARY KEY,
                  sealed_private_key text NOT NULL,
                  created_at timestamptz NOT NULL
                )
                """,
            ]),
        // Envelope encryption: the vault's data keys, wrapped by configured keys.
        Migration(
            version: "v3-data-keys",
            statements: [
                """
                CREATE TABLE data_keys (
                  id text PRIMARY KEY,
                  wrapped_key text NOT NULL,
                  created_at timestamptz NOT NULL
                )
                """
            ]),
        // Result binding (the client's result_challenge) and single-use ID tokens.
        Migration(
            version: "v4-result-binding-and-spent-tokens",
            statements: [
                "ALTER TABLE signin_transactions ADD COLUMN result_challenge text",
                """
                CREATE TABLE spent_tokens (
                  token_hash text PRIMARY KEY,
                  expires_at timestamptz NOT NULL
                )
                """,
            ]),
        // Named locks as leases (withLock): no pooled connection is held while a lock is.
        Migration(
            version: "v5-lock-leases",
            statements: [
                """
                CREATE TABLE gatehouse_locks (
                  name text PRIMARY KEY,
                  holder text NOT NULL,
                  expires_at timestamptz NOT NULL
                )
                """
            ]),
        // Retry windows: the sealed successor of a spent refresh token, the sealed answer of a
        // redeemed result, each until its window ends.
        Migration(
            version: "v6-retry-windows",
            statements: [
                "ALTER TABLE refresh_tokens ADD COLUMN sealed_successor text, ADD COLUMN retry_until timestamptz",
                "CREATE INDEX refresh_tokens_retry_until ON refresh_tokens(retry_until) WHERE retry_until IS NOT NULL",
                "ALTER TABLE signin_results ADD COLUMN sealed_answer text, ADD COLUMN answer_token_hash text, ADD COLUMN retry_until timestamptz",
            ]),
        // The change feed (`SharedStore`): every committed change to an account, a link or a
        // session tells each listening instance the account's uid, whichever statement made it
        // (cascades, purges and tools included). PostgreSQL folds repeats within a transaction.
        // A new session changes nothing cached (absent sessions are never cached).
        Migration(
            version: "v7-account-change-feed",
            statements: [
                """
                CREATE FUNCTION gatehouse_account_changed() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                  IF TG_OP <> 'INSERT' THEN PERFORM pg_notify('\(PostgresStorage.changeChannel)', OLD.uid); END IF;
                  IF TG_OP <> 'DELETE' THEN PERFORM pg_notify('\(PostgresStorage.changeChannel)', NEW.uid); END IF;
                  RETURN NULL;
                END
                $$
                """,
                """
                CREATE TRIGGER accounts_changed AFTER INSERT OR UPDATE OR DELETE ON accounts
                FOR EACH ROW EXECUTE FUNCTION gatehouse_account_changed()
                """,
                """
                CREATE TRIGGER provider_links_changed AFTER INSERT OR UPDATE OR DELETE ON provider_links
                FOR EACH ROW EXECUTE FUNCTION gatehouse_account_changed()
                """,
                """
                CREATE TRIGGER sessions_changed AFTER UPDATE OR DELETE ON sessions
                FOR EACH ROW EXECUTE FUNCTION gatehouse_account_changed()
                """,
            ]),
        // A revoked (or removed) service key is told on the same channel, its id behind a
        // prefix no uid has (uids are base62), so every instance forgets it at once.
        Migration(
            version: "v8-service-key-change-feed",
            statements: [
                """
                CREATE FUNCTION gatehouse_service_key_changed() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                  PERFORM pg_notify('\(PostgresStorage.changeChannel)', '\(PostgresStorage.serviceKeyPayloadPrefix)' || OLD.id);
                  RETURN NULL;
                END
                $$
                """,
                """
                CREATE TRIGGER service_keys_changed AFTER UPDATE OR DELETE ON service_keys
                FOR EACH ROW EXECUTE FUNCTION gatehouse_service_key_changed()
                """,
            ]),
        // Custom claims per account (hooks, `PUT /v1/users/{uid}/claims`) and a sign-in's own
        // claims per session (a hook's `sessionClaims`). A change of claims updates the account
        // row, so the change feed tells every instance.
        Migration(
            version: "v9-custom-claims",
            statements: [
                "ALTER TABLE accounts ADD COLUMN custom_claims bytea",
                "ALTER TABLE sessions ADD COLUMN claims bytea",
            ]),
        // The webhook outbox: one row per event and endpoint, written in the transaction of the
        // change it reports, claimed under a lease by one instance, removed once delivered.
        Migration(
            version: "v10-webhook-outbox",
            statements: [
                """
                CREATE TABLE webhook_outbox (
                  id text PRIMARY KEY,
                  event_id text NOT NULL,
                  endpoint text NOT NULL,
                  type text NOT NULL,
                  payload bytea NOT NULL,
                  created_at timestamptz NOT NULL,
                  next_attempt_at timestamptz NOT NULL,
                  attempts integer NOT NULL DEFAULT 0,
                  status text NOT NULL DEFAULT 'pending',
                  lease_until timestamptz,
                  last_status integer,
                  last_error text
                )
                """,
                "CREATE INDEX webhook_outbox_due ON webhook_outbox (status, next_attempt_at)",
                "CREATE INDEX webhook_outbox_created ON webhook_outbox (created_at)",
            ]),
        // The stored audit trail (the operators' activity listing), newest first by id.
        Migration(
            version: "v11-audit-events",
            statements: [
                """
                CREATE TABLE audit_events (
                  id bigserial PRIMARY KEY,
                  at timestamptz NOT NULL,
                  event text NOT NULL,
                  actor text NOT NULL,
                  uid text,
                  provider text,
                  key_id text
                )
                """,
                "CREATE INDEX audit_events_uid ON audit_events (uid, id)",
                "CREATE INDEX audit_events_event ON audit_events (event, id)",
                "CREATE INDEX audit_events_at ON audit_events (at)",
            ]),
        // Each session's last use (sign-in or refresh), for the operators' session listing.
        Migration(
            version: "v12-session-uses",
            statements: [
                """
                CREATE TABLE session_uses (
                  family_id text PRIMARY KEY,
                  used_at timestamptz NOT NULL,
                  client_address text NOT NULL,
                  user_agent text
                )
                """
            ]),
        // Each service key's last use, apart from `service_keys`: its change trigger would
        // otherwise tell every instance to drop its key cache at each recorded use.
        Migration(
            version: "v13-service-key-uses",
            statements: ["CREATE TABLE service_key_uses (key_id text PRIMARY KEY, used_at timestamptz NOT NULL)"]),
        // Paging orders by byte order (`COLLATE "C"`, as SQLite does), which the primary keys'
        // indexes in the database's collation cannot give: without these, each page of the
        // operators' account listing, of the webhook outbox and of a key rotation's pass over
        // every link sorted the whole table.
        Migration(
            version: "v14-byte-order-paging",
            statements: [
                #"CREATE INDEX accounts_uid_bytes ON accounts (uid COLLATE "C")"#,
                #"CREATE INDEX provider_links_bytes ON provider_links (provider_id COLLATE "C", federated_id COLLATE "C")"#,
                #"CREATE INDEX webhook_outbox_status_id_bytes ON webhook_outbox (status, id COLLATE "C")"#,
            ]),
        // Each endpoint's worker claims its own due entries: by (status, next_attempt_at) alone,
        // a healthy endpoint's claim read past every due entry of a receiver that is down.
        Migration(
            version: "v15-outbox-by-endpoint",
            statements: ["CREATE INDEX webhook_outbox_endpoint_due ON webhook_outbox (endpoint, status, next_attempt_at)"]),
        // v2 filled the verified emails of the links it found with SQL, which normalizes them
        // otherwise than `EmailAddress` (PostgreSQL's `btrim` keeps tabs and newlines, a `C`
        // database's `lower()` folds ASCII only, and nothing refused a malformed address): such
        // a link matched no new sign-in of its address until its own next sign-in rewrote it.
        Migration(version: "v16-verified-emails-normalized", statements: [], step: normalizeVerifiedEmails),
        // The session that started a link or re-authentication: the flow completes only while it lives.
        Migration(version: "v17-flow-sessions", statements: ["ALTER TABLE signin_transactions ADD COLUMN session_family_id text"]),
        // When the session's user last authenticated at the provider (`NULL`: at its sign-in).
        Migration(version: "v18-session-authentication-time", statements: ["ALTER TABLE sessions ADD COLUMN authenticated_at timestamptz"]),
        // The purge's batches find what expired through these instead of reading the tables.
        Migration(
            version: "v19-expiry-indexes",
            statements: [
                "CREATE INDEX spent_tokens_expires_at ON spent_tokens(expires_at)",
                "CREATE INDEX signin_results_retry_until ON signin_results(retry_until) WHERE retry_until IS NOT NULL",
            ]),
        // The claim holding an outbox entry (`OutboxLease.id`): its outcome is recorded only
        // while the entry is still held under that claim. The lease's end (`lease_until`) is
        // the server's time from this version on. An older instance, during a rolling upgrade,
        // moves the lease without naming a claim (its claim, outcome or redelivery): the trigger
        // then clears the id, so that a newer instance's lapsed claim does not record its late
        // outcome over the older instance's claim. The trigger cannot tell an id left out of
        // the update from one written again unchanged: a claim that moves its lease writes a
        // new id.
        Migration(
            version: "v20-outbox-lease-ids",
            statements: [
                "ALTER TABLE webhook_outbox ADD COLUMN lease_id text",
                """
                CREATE FUNCTION gatehouse_outbox_lease_moved() RETURNS trigger LANGUAGE plpgsql AS $$
                BEGIN
                  NEW.lease_id := NULL;
                  RETURN NEW;
                END
                $$
                """,
                """
                CREATE TRIGGER webhook_outbox_lease_moved BEFORE UPDATE OF lease_until ON webhook_outbox
                FOR EACH ROW WHEN (NEW.lease_id IS NOT DISTINCT FROM OLD.lease_id AND NEW.lease_until IS DISTINCT FROM OLD.lease_until)
                EXECUTE FUNCTION gatehouse_outbox_lease_moved()
                """,
            ]),
    ]

    /// Sets every link's `verified_email` to what the gateway writes for its snapshot
    /// (`EmailAddress.verified(of:)`). A snapshot that cannot be read keeps its value, with a
    /// warning naming its row: the gateway reads such a link as corrupt anyway, and one must
    /// not stop every instance from starting.
    @Sendable static func normalizeVerifiedEmails(_ connection: PostgresConnection, logger: Logger) async throws {
        var changes: [(providerId: String, federatedId: String, snapshot: Data, email: String?)] = []
        let rows = try await connection.query(
            "SELECT uid, provider_id, federated_id, profile_json, verified_email FROM provider_links", logger: logger)
        for try await (uid, providerId, federatedId, snapshot, stored) in rows.decode((String, String, String, Data, String?).self) {
            do {
                let profile = try ProfileSnapshot.decode(snapshot, uid: uid, providerId: providerId, federatedId: federatedId)
                let email = EmailAddress.verified(of: profile)
                if email != stored { changes.append((providerId, federatedId, snapshot, email)) }
            } catch {
                logger.warning("a link's verified email was left as it was", metadata: ["error": "\(error)"])
            }
        }
        // Only where the snapshot is still the one read: an instance of the earlier version, still
        // serving during a rolling upgrade, may have written a newer profile (and its email) since.
        for change in changes {
            try await connection.query(
                """
                UPDATE provider_links SET verified_email = \(change.email)
                WHERE provider_id = \(change.providerId) AND federated_id = \(change.federatedId) AND profile_json = \(change.snapshot)
                """, logger: logger)
        }
    }

    /// Applies `migrations` where missing (every one, outside tests); refuses a database
    /// migrated by a newer Gatehouse.
    ///
    /// A start that finds nothing to apply makes its checks and takes no lock. One instance
    /// migrates at a time: it holds a session-level advisory lock on one connection
    /// throughout, pauses included, so that instances starting together wait for
    /// it rather than queue for the tables in turn. Each migration commits on its own, and its
    /// statements wait at most `lockWait` for a lock another transaction holds: one that gives
    /// up (or loses a deadlock) rolls back, so the writes queued behind it go on, and is tried
    /// again after a pause that grows from `lockRetryPause` to ten times it, for as long as it
    /// takes (the gateway is not ready meanwhile).
    static func migrate(
        _ client: PostgresClient, migrations: [Migration] = all, lockWait: Duration = lockWait, lockRetryPause: Duration = lockRetryPause,
        logger: Logger
    ) async throws {
        try await client.withConnection { connection in
            // Every start but an upgrade's finds nothing to apply: the checks, without the lock.
            if try await unwrappingRefusals({ try await nothingToApply(migrations, on: connection, logger: logger) }) { return }
            // Asked for without waiting in the server, then again each second: a stop ends the
            // wait for another instance's migration, which may last as long as its pauses.
            while try await !answer(connection, "SELECT pg_try_advisory_lock(\(lockKey))", logger: logger) {
                try await Task.sleep(for: .seconds(1))
            }
            let result: Result<Void, any Error>
            do {
                try await migrateHoldingTheLock(connection, migrations: migrations, lockWait: lockWait, pause: lockRetryPause, logger: logger)
                result = .success(())
            } catch {
                result = .failure(error)
            }
            // In a task the caller's cancellation does not reach: a connection back in the pool
            // with the lock would hold every other instance's migration. Closed unless the
            // server says the lock was released.
            let unlocked = await Task { try? await answer(connection, "SELECT pg_advisory_unlock(\(lockKey))", logger: logger) }.value
            if unlocked != true { try? await connection.close() }
            try result.get()
        }
    }

    /// Whether every one of `migrations` is applied, after the checks every start makes (the
    /// server, the isolation, no migration of a newer version).
    private static func nothingToApply(_ migrations: [Migration], on connection: PostgresConnection, logger: Logger) async throws -> Bool {
        try await connection.withTransaction(logger: logger) { connection in
            try await requireTextFolding(connection, logger: logger)
            try await requireReadCommitted(connection, logger: logger)
            guard try await answer(connection, "SELECT to_regclass('gatehouse_migrations') IS NOT NULL", logger: logger) else { return false }
            let applied = try await appliedVersions(connection, known: migrations, logger: logger)
            return migrations.allSatisfy { applied.contains($0.version) }
        }
    }

    /// The versions the database records, refused when one is not among `known` (a newer
    /// Gatehouse migrated it).
    private static func appliedVersions(_ connection: PostgresConnection, known: [Migration], logger: Logger) async throws -> Set<String> {
        var applied = Set<String>()
        for try await version in try await connection.query("SELECT version FROM gatehouse_migrations", logger: logger).decode(String.self) {
            applied.insert(version)
        }
        let unknown = applied.subtracting(known.map(\.version))
        guard unknown.isEmpty else {
            throw PostgresStorageError(
                "the database has migrations this Gatehouse does not know (\(unknown.sorted().joined(separator: ", "))): it was migrated by a newer version"
            )
        }
        return applied
    }

    /// The one boolean `sql` answers, read whole: an error the statement meets while it runs
    /// comes with its rows, not with the call that sends it.
    private static func answer(_ connection: PostgresConnection, _ sql: PostgresQuery, logger: Logger) async throws -> Bool {
        var answer = false
        for try await value in try await connection.query(sql, logger: logger).decode(Bool.self) { answer = value }
        return answer
    }

    /// The states a migration's transaction rolls back in and is tried again: a lock not had
    /// within `lockWait`, a deadlock lost to a serving transaction, a serialization failure.
    static let retriedStates: Set<String> = [
        PostgresError.Code.lockNotAvailable.raw, PostgresError.Code.deadlockDetected.raw, PostgresError.Code.serializationFailure.raw,
    ]

    /// The checks, then each missing migration in a transaction of its own, tried again in the
    /// `retriedStates`.
    private static func migrateHoldingTheLock(
        _ connection: PostgresConnection, migrations: [Migration], lockWait: Duration, pause: Duration, logger: Logger
    ) async throws {
        let applied = try await unwrappingRefusals {
            try await connection.withTransaction(logger: logger) { connection in
                try await requireTextFolding(connection, logger: logger)
                try await requireReadCommitted(connection, logger: logger)
                try await connection.query(
                    "CREATE TABLE IF NOT EXISTS gatehouse_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())",
                    logger: logger)
                return try await appliedVersions(connection, known: migrations, logger: logger)
            }
        }
        for migration in migrations where !applied.contains(migration.version) {
            var attempt = 0
            while true {
                do {
                    try await unwrappingRefusals { try await apply(migration, on: connection, lockWait: lockWait, logger: logger) }
                    break
                } catch let error as PostgresTransactionError {
                    guard let state = PostgresStorage.sqlState(of: error), retriedStates.contains(state) else { throw error }
                    attempt += 1
                    let wait = pause * min(1 << min(attempt - 1, 4), 10) * Double.random(in: 0.8...1.2)
                    logger.warning(
                        "a migration waited for a lock another transaction holds, or lost to one (a deadlock, a serialization failure): rolled back so that the writes queued behind it go on, and tried again after a pause (pg_stat_activity shows long transactions)",
                        metadata: [
                            "db.migration": "\(migration.version)", "sqlstate": "\(state)", "attempt": "\(attempt)",
                            "db.lock_wait_ms": "\(lockWait.wholeMilliseconds)", "db.retry_in_ms": "\(wait.wholeMilliseconds)",
                        ])
                    try await Task.sleep(for: wait)
                }
            }
        }
    }

    /// `migration` in one transaction: its statements, its step and its record.
    private static func apply(_ migration: Migration, on connection: PostgresConnection, lockWait: Duration, logger: Logger) async throws {
        try await connection.withTransaction(logger: logger) { connection in
            // A migration's own statements (building an index on a large table) may take longer
            // than any request may; their waits for others' locks may not.
            try await connection.query("SET LOCAL statement_timeout = 0", logger: logger)
            try await connection.query("SET LOCAL lock_timeout = \(unescaped: "\(PostgresStorage.milliseconds(lockWait))")", logger: logger)
            for statement in migration.statements {
                try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger)
            }
            try await migration.step?(connection, logger)
            try await connection.query("INSERT INTO gatehouse_migrations (version) VALUES (\(migration.version))", logger: logger)
        }
    }

    /// `body`, with a refusal of ours thrown as itself rather than inside the transaction's error.
    private static func unwrappingRefusals<T>(_ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as PostgresTransactionError {
            if let refusal = error.closureError as? PostgresStorageError { throw refusal }
            throw error
        }
    }
}

extension PostgresMigrations {
    /// Refuses a database whose transactions do not default to READ COMMITTED, PostgreSQL's
    /// default: the one-account-per-email check of a link's update looks for other holders of
    /// an address after waiting for its lock, and sees them only with each statement's own
    /// snapshot (setting the level in each transaction would cost one more statement on every
    /// sign-in). A role's or database's `default_transaction_isolation` counts as the
    /// connections see it.
    static func requireReadCommitted(_ connection: PostgresConnection, logger: Logger) async throws {
        for try await level in try await connection.query("SHOW default_transaction_isolation", logger: logger).decode(String.self)
        where level != "read committed" {
            throw PostgresStorageError(
                "the PostgreSQL connections' default_transaction_isolation is '\(level)': Gatehouse needs 'read committed', PostgreSQL's default (ALTER DATABASE … SET default_transaction_isolation = 'read committed', and the same for the role if it sets one)"
            )
        }
    }

    /// Refuses a database in which `PostgresStorage.folded` cannot run, before any migration:
    /// otherwise every email lookup and account search would fail, at the first sign-in that
    /// makes one, with an SQL error. It needs a UTF-8 database (`normalize` and the `ς` in the
    /// expression) and the ICU collation `und-x-icu` as `COLLATE` resolves it there (a server
    /// built without ICU has none).
    static func requireTextFolding(_ connection: PostgresConnection, logger: Logger) async throws {
        let rows = try await connection.query(
            #"SELECT getdatabaseencoding(), to_regcollation('"und-x-icu"') IS NOT NULL"#, logger: logger)
        for try await (encoding, collation) in rows.decode((String, Bool).self) {
            guard encoding == "UTF8" else {
                throw PostgresStorageError(
                    "the PostgreSQL database's encoding is \(encoding): Gatehouse needs a UTF8 database (CREATE DATABASE … ENCODING 'UTF8' TEMPLATE template0, with a UTF-8 or C locale)"
                )
            }
            guard collation else {
                throw PostgresStorageError(
                    "the PostgreSQL server has no ICU collation \"und-x-icu\" in this database: Gatehouse folds email addresses and account searches with it; use a PostgreSQL server built with ICU, as the distributions' packages and the official images are"
                )
            }
        }
    }
}

/// A PostgreSQL store failure that is not a database error (configuration, schema version).
public struct PostgresStorageError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, for people.
    public let description: String
    /// The database could not be reached at all (a server may wait and try again; a one-shot
    /// command stops).
    public let isUnreachable: Bool

    /// An error saying `description`.
    init(_ description: String, unreachable: Bool = false) {
        self.description = description
        self.isUnreachable = unreachable
    }
}
