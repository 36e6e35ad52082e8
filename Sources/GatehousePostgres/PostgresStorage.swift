import Foundation
import GatehouseCore
import Logging
import PostgresNIO
import _ConnectionPoolModule

/// The store for several gateway instances: PostgreSQL through postgres-nio's pooled client.
///
/// Every protocol method is one statement or one transaction, so nothing is half-written;
/// "take" methods are `DELETE … RETURNING`, so exactly one instance wins a state or result.
/// Serialization failures and deadlocks (40001, 40P01) are retried a few times; a unique
/// violation is `StorageError.conflict`. The pool reconnects by itself after a restart.
public final class PostgresStorage: GatehouseStorage {
    private let client: PostgresClient
    private let runner: Task<Void, Never>
    private let logger: Logger
    /// `host:port/database`, for error messages (never the password).
    private let location: String
    /// How long one statement or transaction may wait (for a connection included) before the
    /// caller gets `StorageError.unavailable`: without it, requests would queue for as long as
    /// the pool keeps trying to reach a stopped server.
    private let operationTimeout: Duration
    /// How long a `withLock` lease lasts when its holder never releases it (it died).
    private let lockLease: Duration
    /// How long `withLock` waits for a lock another holder has.
    private let lockWait: Duration

    /// Connects lazily with `configuration` (see `DatabaseURL`); the pool runs until `shutdown()`.
    public init(
        configuration: PostgresClient.Configuration, operationTimeout: Duration = .seconds(5), lockLease: Duration = .seconds(120),
        lockWait: Duration = .seconds(60), logger: Logger
    ) {
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        self.client = client
        self.logger = logger
        self.operationTimeout = operationTimeout
        self.lockLease = lockLease
        self.lockWait = lockWait
        location = "\(configuration.host ?? configuration.unixSocketPath ?? "?"):\(configuration.port ?? 5432)/\(configuration.database ?? "")"
        runner = Task { await client.run() }
    }

    /// Connects with a `postgres://` URL.
    public convenience init(
        url: String, maximumConnections: Int = 20, operationTimeout: Duration = .seconds(5), lockLease: Duration = .seconds(120),
        lockWait: Duration = .seconds(60), logger: Logger
    ) throws {
        self.init(
            configuration: try DatabaseURL.configuration(url, maximumConnections: maximumConnections), operationTimeout: operationTimeout,
            lockLease: lockLease, lockWait: lockWait, logger: logger)
    }

    /// Closes the pool's connections.
    public func shutdown() {
        runner.cancel()
    }

    deinit {
        runner.cancel()
    }

    /// Applies the versioned, forward-only migrations under an advisory lock.
    public func migrate() async throws {
        do {
            try await retrying { try await PostgresMigrations.migrate(client, logger: logger) }
        } catch let error as PostgresStorageError {
            throw error
        } catch {
            // postgres-nio's descriptions are generic on purpose (no credentials); add where.
            throw PostgresStorageError("could not migrate the PostgreSQL database at \(location): \(error)")
        }
    }

    /// Runs `SELECT 1`, within `limit` (at most the operation timeout).
    public func ping(within limit: Duration?) async throws {
        // A pool with no server queues the request until the limit: readiness passes a short
        // one so that it follows the database within a second.
        let client = self.client
        let logger = self.logger
        _ = try await retrying {
            try await withinTimeout(limit.map { min($0, operationTimeout) }) { try await client.query("SELECT 1", logger: logger) }
        }
    }

    /// Saves a started sign-in.
    public func insertTransaction(_ t: SignInTransaction) async throws {
        try await execute(
            """
            INSERT INTO signin_transactions (state_hash, binding_hash, provider_id, code_verifier, nonce, return_to, mode, redirect_uri,
              provider_context, uid, created_at, expires_at, result_challenge)
            VALUES (\(t.stateHash), \(t.bindingHash), \(t.providerId), \(t.codeVerifier), \(t.nonce), \(t.returnTo), \(t.mode.rawValue),
              \(t.redirectURI), \(t.providerContext), \(t.uid), \(t.createdAt), \(t.expiresAt), \(t.resultChallenge))
            """)
    }

    /// Deletes and returns the transaction with this state and binding (one winner across instances).
    public func takeTransaction(stateHash: String, bindingHash: String) async throws -> SignInTransaction? {
        let rows = try await query(
            """
            DELETE FROM signin_transactions WHERE state_hash = \(stateHash) AND binding_hash = \(bindingHash)
            RETURNING state_hash, binding_hash, provider_id, code_verifier, nonce, return_to, mode, redirect_uri, provider_context,
              uid, created_at, expires_at, result_challenge
            """, logger: logger)
        for try await (state, binding, provider, verifier, nonce, returnTo, mode, redirect, context, uid, created, expires, challenge)
            in rows.decode((String, String, String, String, String, String, String, String, String, String?, Date, Date, String?).self)
        {
            // A mode this version does not know cannot be continued: as good as no transaction.
            guard let mode = SignInMode(rawValue: mode) else { return nil }
            return SignInTransaction(
                stateHash: state, bindingHash: binding, providerId: provider, codeVerifier: verifier, nonce: nonce, returnTo: returnTo,
                mode: mode, redirectURI: redirect, providerContext: context, uid: uid, createdAt: created, expiresAt: expires,
                resultChallenge: challenge)
        }
        return nil
    }

    /// Records a single-use credential; `false` when it was recorded already (by any instance).
    public func spendToken(hash: String, expiresAt: Date) async throws -> Bool {
        let rows = try await query(
            "INSERT INTO spent_tokens (token_hash, expires_at) VALUES (\(hash), \(expiresAt)) ON CONFLICT (token_hash) DO NOTHING RETURNING 1",
            logger: logger)
        for try await _ in rows.decode(Int.self) { return true }
        return false
    }

    /// Saves a one-time sign-in result.
    public func insertResult(idHash: String, payload: Data, expiresAt: Date) async throws {
        try await execute("INSERT INTO signin_results (id_hash, payload, expires_at) VALUES (\(idHash), \(payload), \(expiresAt))")
    }

    /// The result if it has not expired, left in place; a redeemed one while its retry window
    /// lasts and the refresh token it answered is unused.
    public func result(idHash: String, now: Date) async throws -> StoredResultState? {
        let rows = try await query(
            """
            SELECT payload, sealed_answer, retry_until > \(now)
              AND (answer_token_hash IS NULL OR EXISTS (SELECT 1 FROM refresh_tokens WHERE token_hash = answer_token_hash AND used_at IS NULL))
            FROM signin_results WHERE id_hash = \(idHash) AND expires_at > \(now)
            """, logger: logger)
        for try await (payload, answer, retryable) in rows.decode((Data, String?, Bool?).self) {
            guard let answer else { return .pending(payload) }
            return retryable == true ? .redeemed(sealedAnswer: answer) : nil
        }
        return nil
    }

    /// Redeems the result if it has not expired and was not redeemed; stores the refresh
    /// token and keeps the sealed answer (or deletes the result) in the same transaction.
    public func takeResult(idHash: String, now: Date, redemption: ResultRedemption) async throws -> Bool {
        try await transaction { connection, logger in
            // An expired result goes for good: a clock set back later cannot revive it.
            try await connection.query("DELETE FROM signin_results WHERE id_hash = \(idHash) AND expires_at <= \(now)", logger: logger)
            let taken: PostgresQuery
            if let answer = redemption.sealedAnswer {
                taken = """
                    UPDATE signin_results SET sealed_answer = \(answer), answer_token_hash = \(redemption.refreshToken?.tokenHash),
                      retry_until = \(redemption.retryUntil)
                    WHERE id_hash = \(idHash) AND sealed_answer IS NULL RETURNING 1
                    """
            } else {
                taken = "DELETE FROM signin_results WHERE id_hash = \(idHash) AND sealed_answer IS NULL RETURNING 1"
            }
            var found = false
            for try await _ in try await connection.query(taken, logger: logger) { found = true }
            guard found else { return false }
            if let token = redemption.refreshToken {
                try await connection.query(
                    "INSERT INTO refresh_tokens (token_hash, family_id, created_at) VALUES (\(token.tokenHash), \(token.familyId), \(token.issuedAt))",
                    logger: logger)
            }
            return true
        }
    }

    /// The account with this uid.
    public func account(uid: String) async throws -> AccountRecord? {
        let rows = try await query(
            "SELECT uid, created_at, last_sign_in_at, disabled FROM accounts WHERE uid = \(uid)", logger: logger)
        for try await (uid, created, lastSignIn, disabled) in rows.decode((String, Date, Date, Bool).self) {
            return AccountRecord(uid: uid, createdAt: created, lastSignInAt: lastSignIn, disabled: disabled)
        }
        return nil
    }

    /// The link of this provider identity.
    public func link(providerId: String, federatedId: String) async throws -> ProviderLinkRecord? {
        try await links(
            "SELECT \(unescaped: Self.linkColumns) FROM provider_links WHERE provider_id = \(providerId) AND federated_id = \(federatedId)"
        ).first
    }

    /// The links of an account, oldest first.
    public func links(uid: String) async throws -> [ProviderLinkRecord] {
        try await links("SELECT \(unescaped: Self.linkColumns) FROM provider_links WHERE uid = \(uid) ORDER BY linked_at, provider_id")
    }

    /// Creates the account and its first link in one transaction; a taken identity is `StorageError.conflict`.
    public func createAccount(_ account: AccountRecord, firstLink link: ProviderLinkRecord) async throws {
        try await transaction { connection, logger in
            try await connection.query(
                """
                INSERT INTO accounts (uid, created_at, last_sign_in_at, disabled)
                VALUES (\(account.uid), \(account.createdAt), \(account.lastSignInAt), \(account.disabled))
                """, logger: logger)
            try await connection.query(try Self.insertQuery(link), logger: logger)
        }
    }

    /// Adds a link; a taken identity or provider slot is `StorageError.conflict`.
    public func addLink(_ link: ProviderLinkRecord, consumingPending: String?) async throws {
        try await withPendingConsumed(consumingPending, try Self.insertQuery(link))
    }

    /// `statement`, then (in the same transaction) the deletion of the pending credential a
    /// claim consumes; the statement alone when there is none.
    private func withPendingConsumed(_ tokenHash: String?, _ statement: PostgresQuery) async throws {
        guard let tokenHash else { return try await execute(statement) }
        try await transaction { connection, logger in
            try await connection.query(statement, logger: logger)
            try await connection.query("DELETE FROM pending_credentials WHERE token_hash = \(tokenHash)", logger: logger)
        }
    }

    /// Removes a link unless it is the account's last: the account row is locked first, so
    /// two concurrent unlinks of one account run one after the other.
    public func deleteLink(uid: String, providerId: String) async throws -> UnlinkOutcome {
        try await transaction { connection, logger in
            try await connection.query("SELECT uid FROM accounts WHERE uid = \(uid) FOR UPDATE", logger: logger)
            let links = try await Self.links(
                "SELECT \(unescaped: Self.linkColumns) FROM provider_links WHERE uid = \(uid)", on: connection, logger: logger)
            guard let link = links.first(where: { $0.providerId == providerId }) else { return .notLinked }
            guard links.count > 1 else { return .lastLink }
            try await connection.query("DELETE FROM provider_links WHERE uid = \(uid) AND provider_id = \(providerId)", logger: logger)
            return .deleted(link)
        }
    }

    /// Deletes the account; links, sessions, refresh tokens and pending credentials cascade.
    public func deleteAccount(uid: String) async throws -> [ProviderLinkRecord]? {
        try await transaction { connection, logger in
            let links = try await Self.links(
                "SELECT \(unescaped: Self.linkColumns) FROM provider_links WHERE uid = \(uid) ORDER BY linked_at", on: connection, logger: logger)
            for try await _ in try await connection.query("DELETE FROM accounts WHERE uid = \(uid) RETURNING uid", logger: logger) {
                return links
            }
            return nil
        }
    }

    /// Accounts holding a link with this normalized verified email.
    public func uids(verifiedEmail: String, limit: Int) async throws -> [String] {
        let rows = try await query(
            """
            SELECT uid FROM provider_links WHERE verified_email = \(verifiedEmail)
            GROUP BY uid ORDER BY min(linked_at), uid LIMIT \(limit)
            """, logger: logger)
        var uids: [String] = []
        for try await uid in rows.decode(String.self) { uids.append(uid) }
        return uids
    }

    /// Replaces the link's profile and tokens and moves the account's last sign-in, in one transaction.
    public func recordSignIn(link: ProviderLinkRecord, at date: Date) async throws {
        try await transaction { connection, logger in
            try await connection.query(try Self.updateQuery(link), logger: logger)
            try await connection.query("UPDATE accounts SET last_sign_in_at = \(date) WHERE uid = \(link.uid)", logger: logger)
        }
    }

    /// Replaces a link's profile and tokens (never its owner).
    public func updateLink(_ link: ProviderLinkRecord, consumingPending: String?) async throws {
        try await withPendingConsumed(consumingPending, try Self.updateQuery(link))
    }

    /// Replaces a link's profile snapshot and verified email only.
    public func updateLinkProfile(
        providerId: String, federatedId: String, uid: String, profileJSON: Data, verifiedEmail: String?, at date: Date
    ) async throws {
        try await execute(
            """
            UPDATE provider_links SET profile_json = \(profileJSON), verified_email = \(verifiedEmail), updated_at = \(date)
            WHERE provider_id = \(providerId) AND federated_id = \(federatedId) AND uid = \(uid)
            """)
    }

    /// A page of all links in (provider, federated id) byte order (collation "C", as SQLite's
    /// BINARY: the cursor must not depend on the server's locale), after the cursor.
    public func links(after cursor: LinkCursor?, limit: Int) async throws -> [ProviderLinkRecord] {
        let provider = cursor?.providerId ?? ""
        let federated = cursor?.federatedId ?? ""
        return try await links(
            """
            SELECT \(unescaped: Self.linkColumns) FROM provider_links WHERE (provider_id COLLATE "C", federated_id COLLATE "C") > (\(provider), \(federated))
            ORDER BY provider_id COLLATE "C", federated_id COLLATE "C" LIMIT \(limit)
            """)
    }

    /// Compare-and-set of a link's sealed tokens.
    public func replaceSealedTokens(providerId: String, federatedId: String, expected: String, with sealed: String) async throws -> Bool {
        try await changed(
            """
            UPDATE provider_links SET sealed_tokens = \(sealed)
            WHERE provider_id = \(providerId) AND federated_id = \(federatedId) AND sealed_tokens = \(expected) RETURNING uid
            """)
    }

    /// Saves a session.
    public func insertSession(_ session: SessionRecord) async throws {
        try await execute(
            """
            INSERT INTO sessions (id_hash, uid, created_at, expires_at, family_id, sign_in_provider)
            VALUES (\(session.idHash), \(session.uid), \(session.createdAt), \(session.expiresAt), \(session.familyId),
              \(session.signInProvider))
            """)
    }

    /// The session with this hash, if it has not expired.
    public func session(idHash: String, now: Date) async throws -> SessionRecord? {
        try await Self.firstSession(
            try await query(
                "SELECT \(unescaped: Self.sessionColumns) FROM sessions WHERE id_hash = \(idHash) AND expires_at > \(now)", logger: logger))
    }

    /// The session of a refresh-token family, if it has not expired.
    public func session(familyId: String, now: Date) async throws -> SessionRecord? {
        try await Self.firstSession(
            try await query(
                "SELECT \(unescaped: Self.sessionColumns) FROM sessions WHERE family_id = \(familyId) AND expires_at > \(now)", logger: logger))
    }

    /// The unexpired session of a refresh token's family.
    public func session(refreshTokenHash: String, now: Date) async throws -> SessionRecord? {
        try await Self.firstSession(
            try await query(
                """
                SELECT \(unescaped: Self.sessionColumns) FROM sessions
                WHERE family_id = (SELECT family_id FROM refresh_tokens WHERE token_hash = \(refreshTokenHash)) AND expires_at > \(now)
                """, logger: logger))
    }

    /// Ends a family's session; its refresh tokens cascade.
    public func deleteSession(familyId: String) async throws {
        try await execute("DELETE FROM sessions WHERE family_id = \(familyId)")
    }

    /// Stores a refresh token's hash in its family.
    public func insertRefreshToken(tokenHash: String, familyId: String, at date: Date) async throws {
        try await execute("INSERT INTO refresh_tokens (token_hash, family_id, created_at) VALUES (\(tokenHash), \(familyId), \(date))")
    }

    /// Spends a refresh token, or revokes its family when it was spent already. The token
    /// row is locked, so two instances presenting the same token cannot both rotate it.
    public func rotateRefreshToken(tokenHash: String, successor: RefreshSuccessor, now: Date) async throws -> RefreshRotation {
        try await transaction { connection, logger in
            var found: (String, Date?, String?, Date?)?
            // FOR UPDATE: concurrent uses of one token queue here, so exactly one rotates and
            // the others see it spent (and get its kept successor, or revoke).
            for try await row in try await connection.query(
                "SELECT family_id, used_at, sealed_successor, retry_until FROM refresh_tokens WHERE token_hash = \(tokenHash) FOR UPDATE",
                logger: logger
            ).decode((String, Date?, String?, Date?).self) {
                found = row
            }
            guard let (familyId, usedAt, kept, retryUntil) = found else { return .unknown }
            let session = try await Self.firstSession(
                try await connection.query(
                    "SELECT \(unescaped: Self.sessionColumns) FROM sessions WHERE family_id = \(familyId) AND expires_at > \(now)",
                    logger: logger))
            if usedAt != nil {
                if let session, let kept, let retryUntil, retryUntil > now { return .retried(session, sealedSuccessor: kept) }
                try await connection.query("DELETE FROM sessions WHERE family_id = \(familyId)", logger: logger)
                return .reused
            }
            guard let session else { return .unknown }
            // Only the token spent last keeps its successor: the predecessor's window ends here.
            try await connection.query(
                "UPDATE refresh_tokens SET sealed_successor = NULL, retry_until = NULL WHERE family_id = \(familyId) AND sealed_successor IS NOT NULL",
                logger: logger)
            try await connection.query(
                """
                UPDATE refresh_tokens SET used_at = \(now), sealed_successor = \(successor.sealedToken),
                  retry_until = \(successor.sealedToken.map { _ in successor.retryUntil })
                WHERE token_hash = \(tokenHash)
                """, logger: logger)
            try await connection.query(
                "INSERT INTO refresh_tokens (token_hash, family_id, created_at) VALUES (\(successor.tokenHash), \(familyId), \(now))",
                logger: logger)
            return .rotated(session)
        }
    }

    /// Saves a pending credential.
    public func insertPendingCredential(_ c: PendingCredentialRecord) async throws {
        try await execute(
            """
            INSERT INTO pending_credentials (token_hash, target_uid, provider_id, federated_id, profile_json, sealed_tokens, verified_email,
              expires_at)
            VALUES (\(c.tokenHash), \(c.targetUid), \(c.providerId), \(c.federatedId), \(c.profileJSON), \(c.sealedTokens),
              \(c.verifiedEmail), \(c.expiresAt))
            """)
    }

    /// Deletes and returns a pending credential that has not expired.
    public func takePendingCredential(tokenHash: String, now: Date) async throws -> PendingCredentialRecord? {
        let credential = try await Self.pending(
            try await query(
                "DELETE FROM pending_credentials WHERE token_hash = \(tokenHash) RETURNING \(unescaped: Self.pendingColumns)", logger: logger))
        return credential.flatMap { $0.expiresAt > now ? $0 : nil }
    }

    /// The pending credential if it has not expired, left in place.
    public func pendingCredential(tokenHash: String, now: Date) async throws -> PendingCredentialRecord? {
        try await Self.pending(
            try await query(
                "SELECT \(unescaped: Self.pendingColumns) FROM pending_credentials WHERE token_hash = \(tokenHash) AND expires_at > \(now)",
                logger: logger))
    }

    private static let pendingColumns = "token_hash, target_uid, provider_id, federated_id, profile_json, sealed_tokens, verified_email, expires_at"

    private static func pending(_ rows: PostgresRowSequence) async throws -> PendingCredentialRecord? {
        for try await (hash, target, provider, federated, profile, tokens, email, expires) in rows.decode(
            (String, String, String, String, Data, String, String?, Date).self)
        {
            return PendingCredentialRecord(
                tokenHash: hash, targetUid: target, providerId: provider, federatedId: federated, profileJSON: profile, sealedTokens: tokens,
                verifiedEmail: email, expiresAt: expires)
        }
        return nil
    }

    /// Saves a signing key.
    public func insertSigningKey(_ key: SigningKeyRecord) async throws {
        try await execute(
            "INSERT INTO signing_keys (kid, sealed_private_key, created_at) VALUES (\(key.kid), \(key.sealedPrivateKey), \(key.createdAt))")
    }

    /// Every signing key, newest first.
    public func signingKeys() async throws -> [SigningKeyRecord] {
        var keys: [SigningKeyRecord] = []
        for try await (kid, sealed, created) in try await query(
            "SELECT kid, sealed_private_key, created_at FROM signing_keys ORDER BY created_at DESC, kid", logger: logger
        ).decode((String, String, Date).self) {
            keys.append(SigningKeyRecord(kid: kid, sealedPrivateKey: sealed, createdAt: created))
        }
        return keys
    }

    /// Replaces a signing key's sealed private key if it is still `expected`.
    public func replaceSealedSigningKey(kid: String, expected: String, with sealed: String) async throws -> Bool {
        try await changed(
            "UPDATE signing_keys SET sealed_private_key = \(sealed) WHERE kid = \(kid) AND sealed_private_key = \(expected) RETURNING kid")
    }

    /// Saves a data key.
    public func insertDataKey(_ key: DataKeyRecord) async throws {
        try await execute("INSERT INTO data_keys (id, wrapped_key, created_at) VALUES (\(key.id), \(key.wrappedKey), \(key.createdAt))")
    }

    /// Every data key, newest first.
    public func dataKeys() async throws -> [DataKeyRecord] {
        var keys: [DataKeyRecord] = []
        for try await (id, wrapped, created) in try await query(
            "SELECT id, wrapped_key, created_at FROM data_keys ORDER BY created_at DESC, id", logger: logger
        ).decode((String, String, Date).self) {
            keys.append(DataKeyRecord(id: id, wrappedKey: wrapped, createdAt: created))
        }
        return keys
    }

    /// Replaces a data key's wrapping if it is still `expected`.
    public func replaceWrappedDataKey(id: String, expected: String, with wrapped: String) async throws -> Bool {
        try await changed("UPDATE data_keys SET wrapped_key = \(wrapped) WHERE id = \(id) AND wrapped_key = \(expected) RETURNING id")
    }

    /// Deletes a data key.
    public func deleteDataKey(id: String) async throws -> Bool {
        try await changed("DELETE FROM data_keys WHERE id = \(id) RETURNING id")
    }

    /// Sealed values per key label (`v2.<id>`), over links, signing keys and live pending credentials.
    public func sealingKeyUsage(now: Date) async throws -> [String: Int] {
        var usage: [String: Int] = [:]
        for try await (label, uses) in try await query(
            """
            SELECT split_part(value, '.', 1) || '.' || split_part(value, '.', 2), count(*) FROM (
              SELECT sealed_tokens AS value FROM provider_links
              UNION ALL SELECT sealed_private_key FROM signing_keys
              UNION ALL SELECT sealed_tokens FROM pending_credentials WHERE expires_at > \(now)
              UNION ALL SELECT sealed_successor FROM refresh_tokens WHERE sealed_successor IS NOT NULL AND retry_until > \(now)
              UNION ALL SELECT sealed_answer FROM signin_results WHERE sealed_answer IS NOT NULL AND retry_until > \(now)
            ) sealed GROUP BY 1
            """, logger: logger
        ).decode((String, Int).self) {
            usage[label] = uses
        }
        return usage
    }

    /// Ends one session.
    public func deleteSession(idHash: String) async throws {
        try await execute("DELETE FROM sessions WHERE id_hash = \(idHash)")
    }

    /// Ends every session of an account.
    public func deleteSessions(uid: String) async throws {
        try await execute("DELETE FROM sessions WHERE uid = \(uid)")
    }

    /// Accounts by the email of any linked profile snapshot (lower-cased both sides).
    public func uids(email: String, limit: Int) async throws -> [String] {
        let rows = try await query(
            """
            SELECT uid FROM provider_links
            WHERE lower(convert_from(profile_json, 'UTF8')::jsonb ->> 'email') = lower(\(email))
            GROUP BY uid ORDER BY min(linked_at), uid LIMIT \(limit)
            """, logger: logger)
        var uids: [String] = []
        for try await uid in rows.decode(String.self) { uids.append(uid) }
        return uids
    }

    /// Sets the account's `disabled` flag.
    public func setDisabled(uid: String, disabled: Bool) async throws -> Bool {
        try await transaction { connection, logger in
            var found = false
            for try await _ in try await connection.query(
                "UPDATE accounts SET disabled = \(disabled) WHERE uid = \(uid) RETURNING uid", logger: logger)
            {
                found = true
            }
            if found, disabled { try await connection.query("DELETE FROM sessions WHERE uid = \(uid)", logger: logger) }
            return found
        }
    }

    /// Saves a new service key (scopes as one space-separated column).
    public func insertServiceKey(_ key: ServiceKeyRecord) async throws {
        try await execute(
            """
            INSERT INTO service_keys (id, name, secret_hash, scopes, created_at, revoked_at)
            VALUES (\(key.id), \(key.name), \(key.secretHash), \(key.scopes.joined(separator: " ")), \(key.createdAt), \(key.revokedAt))
            """)
    }

    /// The key with this secret hash.
    public func serviceKey(secretHash: String) async throws -> ServiceKeyRecord? {
        try await serviceKeys("SELECT \(unescaped: Self.keyColumns) FROM service_keys WHERE secret_hash = \(secretHash)").first
    }

    /// Every key, oldest first.
    public func serviceKeys() async throws -> [ServiceKeyRecord] {
        try await serviceKeys("SELECT \(unescaped: Self.keyColumns) FROM service_keys ORDER BY created_at, id")
    }

    /// Revokes a key that is not revoked yet.
    public func revokeServiceKey(id: String, at date: Date) async throws -> Bool {
        try await changed("UPDATE service_keys SET revoked_at = \(date) WHERE id = \(id) AND revoked_at IS NULL RETURNING id")
    }

    /// Deletes expired transactions, results and sessions.
    public func purgeExpired(now: Date) async throws {
        try await transaction { connection, logger in
            try await connection.query("DELETE FROM signin_transactions WHERE expires_at <= \(now)", logger: logger)
            try await connection.query("DELETE FROM signin_results WHERE expires_at <= \(now) OR retry_until <= \(now)", logger: logger)
            try await connection.query(
                "UPDATE refresh_tokens SET sealed_successor = NULL, retry_until = NULL WHERE retry_until <= \(now)", logger: logger)
            try await connection.query("DELETE FROM sessions WHERE expires_at <= \(now)", logger: logger)
            try await connection.query("DELETE FROM pending_credentials WHERE expires_at <= \(now)", logger: logger)
            try await connection.query("DELETE FROM spent_tokens WHERE expires_at <= \(now)", logger: logger)
            // Leases whose holder died (the server's clock, like the leases themselves).
            try await connection.query("DELETE FROM gatehouse_locks WHERE expires_at < now()", logger: logger)
        }
    }

    /// A named lock across instances, held as a lease in `gatehouse_locks`: taken and
    /// released by one short statement each, so no pooled connection is held while `body`
    /// runs. (A session-level advisory lock kept one connection for the whole body — a
    /// provider's token call included — and every waiter blocked in PostgreSQL on another:
    /// a few slow refreshes starved the pool for every request.) Waiters retry with a growing
    /// pause for up to `lockWait`, then answer `StorageError.unavailable`. A holder that died
    /// frees the lock when its lease ends (`lockLease`); the lease is longer than any body
    /// (a provider call ends at its upstream timeout).
    public func withLock<T: Sendable>(_ name: String, _ body: @Sendable () async throws -> T) async throws -> T {
        let holder = UUID().uuidString
        let deadline = ContinuousClock.now + lockWait
        var pause = Duration.milliseconds(5)
        while try await !lease(name, holder: holder) {
            guard ContinuousClock.now < deadline else {
                logger.warning("lock wait timed out", metadata: ["lock": "\(name.prefix(80))"])
                throw StorageError.unavailable
            }
            try await Task.sleep(for: pause)
            pause = min(pause * 2, .milliseconds(100))
        }
        let result: Result<T, any Error>
        do {
            result = .success(try await body())
        } catch {
            result = .failure(error)
        }
        // A release that fails (the database went away) leaves the lease to expire.
        try? await execute("DELETE FROM gatehouse_locks WHERE name = \(name) AND holder = \(holder)")
        return try result.get()
    }

    /// Takes the lease when nobody holds it or its holder's lease has ended (the server's
    /// clock decides, so instances' clocks need not agree).
    private func lease(_ name: String, holder: String) async throws -> Bool {
        let milliseconds = Int(lockLease.components.seconds * 1000 + lockLease.components.attoseconds / 1_000_000_000_000_000)
        let rows = try await query(
            """
            INSERT INTO gatehouse_locks (name, holder, expires_at) VALUES (\(name), \(holder), now() + \(milliseconds) * interval '1 millisecond')
            ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
            WHERE gatehouse_locks.expires_at < now()
            RETURNING holder
            """, logger: logger)
        for try await _ in rows.decode(String.self) { return true }
        return false
    }

    // MARK: Helpers

    private static let linkColumns = "uid, provider_id, federated_id, profile_json, sealed_tokens, linked_at, updated_at, verified_email"
    private static let sessionColumns = "id_hash, uid, created_at, expires_at, family_id, sign_in_provider"
    private static let keyColumns = "id, name, secret_hash, scopes, created_at, revoked_at"

    private static func updateQuery(_ link: ProviderLinkRecord) throws -> PostgresQuery {
        try """
        UPDATE provider_links SET profile_json = \(link.profileJSON), sealed_tokens = \(link.sealedTokens), updated_at = \(link.updatedAt),
          verified_email = \(link.verifiedEmail)
        WHERE provider_id = \(link.providerId) AND federated_id = \(link.federatedId) AND uid = \(link.uid)
        """
    }

    private static func insertQuery(_ link: ProviderLinkRecord) throws -> PostgresQuery {
        try """
        INSERT INTO provider_links (uid, provider_id, federated_id, profile_json, sealed_tokens, linked_at, updated_at, verified_email)
        VALUES (\(link.uid), \(link.providerId), \(link.federatedId), \(link.profileJSON), \(link.sealedTokens), \(link.linkedAt),
          \(link.updatedAt), \(link.verifiedEmail))
        """
    }

    private func links(_ statement: PostgresQuery) async throws -> [ProviderLinkRecord] {
        try await Self.decodeLinks(try await query(statement, logger: logger))
    }

    private static func links(_ statement: PostgresQuery, on connection: PostgresConnection, logger: Logger) async throws
        -> [ProviderLinkRecord]
    {
        try await decodeLinks(try await connection.query(statement, logger: logger))
    }

    private static func decodeLinks(_ rows: PostgresRowSequence) async throws -> [ProviderLinkRecord] {
        var links: [ProviderLinkRecord] = []
        for try await (uid, provider, federated, profile, tokens, linked, updated, email) in rows.decode(
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
    private static func firstSession(_ rows: PostgresRowSequence) async throws -> SessionRecord? {
        for try await (id, uid, created, expires, family, provider) in rows.decode(
            (String, String, Date, Date, String, String).self)
        {
            return SessionRecord(idHash: id, uid: uid, createdAt: created, expiresAt: expires, familyId: family, signInProvider: provider)
        }
        return nil
    }

    private func serviceKeys(_ statement: PostgresQuery) async throws -> [ServiceKeyRecord] {
        var keys: [ServiceKeyRecord] = []
        for try await (id, name, hash, scopes, created, revoked) in try await query(statement, logger: logger).decode(
            (String, String, String, String, Date, Date?).self)
        {
            keys.append(
                ServiceKeyRecord(
                    id: id, name: name, secretHash: hash, scopes: scopes.split(separator: " ").map(String.init), createdAt: created,
                    revokedAt: revoked))
        }
        return keys
    }

    /// One statement through the pool, with `retrying`'s error handling.
    private func query(_ statement: PostgresQuery, logger: Logger) async throws -> PostgresRowSequence {
        let client = self.client
        return try await retrying { try await withinTimeout { try await client.query(statement, logger: logger) } }
    }

    /// One statement whose rows are not needed.
    private func execute(_ statement: PostgresQuery) async throws {
        _ = try await query(statement, logger: logger)
    }

    /// Whether an `UPDATE … RETURNING` touched a row.
    private func changed(_ statement: PostgresQuery) async throws -> Bool {
        for try await _ in try await query(statement, logger: logger) { return true }
        return false
    }

    /// A transaction, retried whole on a serialization failure or deadlock.
    private func transaction<T: Sendable>(_ body: @escaping @Sendable (PostgresConnection, Logger) async throws -> T) async throws -> T {
        let logger = self.logger
        let client = self.client
        return try await retrying {
            try await withinTimeout {
                try await client.withTransaction(logger: logger) { connection in try await body(connection, logger) }
            }
        }
    }

    /// `operation`, or `StorageError.unavailable` once `operationTimeout` has passed. The
    /// operation is then cancelled (a statement cut short is rolled back by the server) but not
    /// waited for: a connection broken mid-query may not notice cancellation for a long time,
    /// and neither the request nor a shutdown may hang on it.
    private func withinTimeout<T: Sendable>(_ limit: Duration? = nil, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
        let timeout = limit ?? operationTimeout
        let outcome = Eventual<T>()
        let work = Task {
            do { outcome.set(try await operation()) } catch { outcome.fail(error) }
        }
        let timer = Task {
            try? await Task.sleep(for: timeout)
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

    /// Runs `operation`, retrying 40001/40P01 up to four times with a short growing pause,
    /// turning a unique violation into `StorageError.conflict` and a database that cannot be
    /// reached into `StorageError.unavailable` (the API's `503`, not a `500`).
    private func retrying<T>(_ operation: () async throws -> T) async throws -> T {
        var attempt = 0
        while true {
            do {
                return try await operation()
            } catch {
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

    /// The server lacks a resource: nothing was committed, and the answer is 503.
    private static let exhaustedStates: [String: String] = [
        "53100": "disk full", "53200": "out of memory", "53300": "too many connections", "53400": "configuration limit exceeded",
    ]

    /// Serialization failure and deadlock: the transaction lost a race and may simply run again.
    private static let retryableStates: Set<String> = [PostgresError.Code.serializationFailure.raw, PostgresError.Code.deadlockDetected.raw]

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
