import Foundation
import GRDB
import GatehouseCore

/// The embedded default store: one SQLite file in WAL mode, through GRDB.
///
/// WAL with `synchronous=FULL` keeps every committed sign-in across a crash or `kill -9`;
/// each protocol method is one SQLite transaction, so nothing is ever half-written.
public final class SQLiteStorage: GatehouseStorage {
    private let pool: DatabasePool
    private let locks = KeyedLock()
    /// The data folder, named in errors about the disk.
    private let folder: String

    /// Opens (or creates) the database file, readable by its owner only (0600; SQLite gives
    /// its `-wal` and `-shm` files the same permissions).
    public init(path: String) throws {
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: path + suffix) {
            try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path + suffix)
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = FULL")
            try db.execute(sql: "PRAGMA foreign_keys = ON")
        }
        pool = try DatabasePool(path: path, configuration: configuration)
        folder = (path as NSString).deletingLastPathComponent
    }

    /// A read, with resource failures as `StorageError.exhausted`.
    private func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do { return try await pool.read(body) } catch let error as DatabaseError { throw exhausted(error) ?? error }
    }

    /// A write transaction, with resource failures as `StorageError.exhausted`: SQLite rolled
    /// it back, so nothing was committed and the caller may answer 503.
    private func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do { return try await pool.write(body) } catch let error as DatabaseError { throw exhausted(error) ?? error }
    }

    /// A full disk, an I/O error, no memory, a file that cannot be opened or written: the
    /// condition and the data folder, never the statement's values.
    private func exhausted(_ error: DatabaseError) -> StorageError? {
        let condition: String
        switch error.resultCode {
        case .SQLITE_FULL: condition = "disk full (SQLITE_FULL) in \(folder)"
        case .SQLITE_IOERR: condition = "I/O error (SQLITE_IOERR, extended code \(error.extendedResultCode.rawValue)) in \(folder)"
        case .SQLITE_NOMEM: condition = "out of memory (SQLITE_NOMEM)"
        case .SQLITE_CANTOPEN: condition = "cannot open the database files (SQLITE_CANTOPEN) in \(folder)"
        case .SQLITE_READONLY: condition = "the database is read-only (SQLITE_READONLY) in \(folder)"
        case .SQLITE_BUSY: condition = "the database stayed locked past the busy timeout (SQLITE_BUSY)"
        default: return nil
        }
        return .exhausted(condition: condition)
    }

    /// Applies the versioned, forward-only migrations.
    public func migrate() async throws {
        try SQLiteMigrations.migrator.migrate(pool)
    }

    /// Runs a trivial query (a local file: no limit to apply).
    public func ping(within limit: Duration?) async throws {
        _ = try await read { db in try Int.fetchOne(db, sql: "SELECT 1") }
    }

    /// Saves a started sign-in.
    public func insertTransaction(_ t: SignInTransaction) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO signin_transactions (state_hash, binding_hash, provider_id, code_verifier, nonce, return_to, mode,
                      redirect_uri, provider_context, uid, created_at, expires_at, result_challenge)
                      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    t.stateHash, t.bindingHash, t.providerId, t.codeVerifier, t.nonce, t.returnTo, t.mode.rawValue, t.redirectURI, t.providerContext,
                    t.uid, t.createdAt, t.expiresAt, t.resultChallenge,
                ])
        }
    }

    /// Deletes and returns the transaction with this state and binding (`DELETE … RETURNING`: one winner).
    public func takeTransaction(stateHash: String, bindingHash: String) async throws -> SignInTransaction? {
        try await write { db in
            guard
                let row = try Row.fetchOne(
                    db, sql: "DELETE FROM signin_transactions WHERE state_hash = ? AND binding_hash = ? RETURNING *",
                    arguments: [stateHash, bindingHash])
                // A mode this version does not know cannot be continued: as good as no transaction.
            else { return nil }
            guard let mode = SignInMode(rawValue: row["mode"]) else { return nil }
            return SignInTransaction(
                stateHash: row["state_hash"], bindingHash: row["binding_hash"], providerId: row["provider_id"],
                codeVerifier: row["code_verifier"], nonce: row["nonce"], returnTo: row["return_to"], mode: mode,
                redirectURI: row["redirect_uri"], providerContext: row["provider_context"], uid: row["uid"], createdAt: row["created_at"],
                expiresAt: row["expires_at"], resultChallenge: row["result_challenge"])
        }
    }

    /// Records a single-use credential; `false` when it was recorded already.
    public func spendToken(hash: String, expiresAt: Date) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "INSERT INTO spent_tokens (token_hash, expires_at) VALUES (?, ?) ON CONFLICT (token_hash) DO NOTHING",
                arguments: [hash, expiresAt])
            return db.changesCount == 1
        }
    }

    /// Saves a one-time sign-in result.
    public func insertResult(idHash: String, payload: Data, expiresAt: Date) async throws {
        try await write { db in
            try db.execute(
                sql: "INSERT INTO signin_results (id_hash, payload, expires_at) VALUES (?, ?, ?)", arguments: [idHash, payload, expiresAt])
        }
    }

    /// The result if it has not expired, left in place; a redeemed one while its retry window
    /// lasts and the refresh token it answered is unused.
    public func result(idHash: String, now: Date) async throws -> StoredResultState? {
        try await read { db in
            guard
                let row = try Row.fetchOne(
                    db, sql: "SELECT payload, sealed_answer, answer_token_hash, retry_until FROM signin_results WHERE id_hash = ? AND expires_at > ?",
                    arguments: [idHash, now])
            else { return nil }
            guard let answer: String = row["sealed_answer"] else { return .pending(row["payload"]) }
            guard let retryUntil: Date = row["retry_until"], retryUntil > now else { return nil }
            if let tokenHash: String = row["answer_token_hash"] {
                let unused = try Bool.fetchOne(
                    db, sql: "SELECT EXISTS (SELECT 1 FROM refresh_tokens WHERE token_hash = ? AND used_at IS NULL)", arguments: [tokenHash])
                guard unused == true else { return nil }
            }
            return .redeemed(sealedAnswer: answer)
        }
    }

    /// Redeems the result if it has not expired and was not redeemed; stores the refresh
    /// token and keeps the sealed answer (or deletes the result) in the same transaction.
    public func takeResult(idHash: String, now: Date, redemption: ResultRedemption) async throws -> Bool {
        try await write { db in
            // An expired result goes for good: a clock set back later cannot revive it.
            try db.execute(sql: "DELETE FROM signin_results WHERE id_hash = ? AND expires_at <= ?", arguments: [idHash, now])
            guard
                try Bool.fetchOne(
                    db, sql: "SELECT EXISTS (SELECT 1 FROM signin_results WHERE id_hash = ? AND sealed_answer IS NULL)", arguments: [idHash])
                    == true
            else { return false }
            if let answer = redemption.sealedAnswer {
                try db.execute(
                    sql: "UPDATE signin_results SET sealed_answer = ?, answer_token_hash = ?, retry_until = ? WHERE id_hash = ?",
                    arguments: [answer, redemption.refreshToken?.tokenHash, redemption.retryUntil, idHash])
            } else {
                try db.execute(sql: "DELETE FROM signin_results WHERE id_hash = ?", arguments: [idHash])
            }
            if let token = redemption.refreshToken {
                try db.execute(
                    sql: "INSERT INTO refresh_tokens (token_hash, family_id, created_at) VALUES (?, ?, ?)",
                    arguments: [token.tokenHash, token.familyId, token.issuedAt])
            }
            return true
        }
    }

    /// The account with this uid.
    public func account(uid: String) async throws -> AccountRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM accounts WHERE uid = ?", arguments: [uid]).map(Self.account)
        }
    }

    /// The link of this provider identity.
    public func link(providerId: String, federatedId: String) async throws -> ProviderLinkRecord? {
        try await read { db in
            try Row.fetchOne(
                db, sql: "SELECT * FROM provider_links WHERE provider_id = ? AND federated_id = ?", arguments: [providerId, federatedId]
            ).map(Self.link)
        }
    }

    /// The links of an account, oldest first.
    public func links(uid: String) async throws -> [ProviderLinkRecord] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM provider_links WHERE uid = ? ORDER BY linked_at, provider_id", arguments: [uid]).map(Self.link)
        }
    }

    /// Creates the account and its first link in one transaction; a uniqueness violation is `StorageError.conflict`.
    public func createAccount(_ account: AccountRecord, firstLink: ProviderLinkRecord) async throws {
        try await conflicting {
            try await write { db in
                try db.execute(
                    sql: "INSERT INTO accounts (uid, created_at, last_sign_in_at, disabled) VALUES (?, ?, ?, ?)",
                    arguments: [account.uid, account.createdAt, account.lastSignInAt, account.disabled])
                try Self.insert(firstLink, db)
            }
        }
    }

    /// Replaces the link's profile and tokens and moves the account's last sign-in, in one transaction.
    public func recordSignIn(link: ProviderLinkRecord, at date: Date) async throws {
        try await write { db in
            try Self.update(link, db)
            try db.execute(sql: "UPDATE accounts SET last_sign_in_at = ? WHERE uid = ?", arguments: [date, link.uid])
        }
    }

    /// Replaces a link's profile and tokens (never its owner).
    public func updateLink(_ link: ProviderLinkRecord, consumingPending: String?) async throws {
        try await write { db in
            try Self.update(link, db)
            try Self.deletePending(consumingPending, db)
        }
    }

    /// Replaces a link's profile snapshot and verified email only.
    public func updateLinkProfile(
        providerId: String, federatedId: String, uid: String, profileJSON: Data, verifiedEmail: String?, at date: Date
    ) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    UPDATE provider_links SET profile_json = ?, verified_email = ?, updated_at = ?
                    WHERE provider_id = ? AND federated_id = ? AND uid = ?
                    """,
                arguments: [profileJSON, verifiedEmail, date, providerId, federatedId, uid])
        }
    }

    /// Adds a link; a taken identity or provider slot is `StorageError.conflict`.
    public func addLink(_ link: ProviderLinkRecord, consumingPending: String?) async throws {
        try await conflicting {
            try await write { db in
                try Self.insert(link, db)
                try Self.deletePending(consumingPending, db)
            }
        }
    }

    /// Deletes the pending credential a claim consumes, inside the claim's transaction.
    private static func deletePending(_ tokenHash: String?, _ db: Database) throws {
        guard let tokenHash else { return }
        try db.execute(sql: "DELETE FROM pending_credentials WHERE token_hash = ?", arguments: [tokenHash])
    }

    /// Removes a link unless it is the account's last (one write transaction: SQLite has one writer).
    public func deleteLink(uid: String, providerId: String) async throws -> UnlinkOutcome {
        try await write { db in
            let links = try Row.fetchAll(db, sql: "SELECT * FROM provider_links WHERE uid = ?", arguments: [uid]).map(Self.link)
            guard let link = links.first(where: { $0.providerId == providerId }) else { return .notLinked }
            guard links.count > 1 else { return .lastLink }
            try db.execute(sql: "DELETE FROM provider_links WHERE uid = ? AND provider_id = ?", arguments: [uid, providerId])
            return .deleted(link)
        }
    }

    /// Deletes the account; links, sessions, refresh tokens and pending credentials cascade.
    public func deleteAccount(uid: String) async throws -> [ProviderLinkRecord]? {
        try await write { db in
            let links = try Row.fetchAll(db, sql: "SELECT * FROM provider_links WHERE uid = ? ORDER BY linked_at", arguments: [uid]).map(Self.link)
            try db.execute(sql: "DELETE FROM accounts WHERE uid = ?", arguments: [uid])
            return db.changesCount > 0 ? links : nil
        }
    }

    /// Accounts holding a link with this normalized verified email.
    public func uids(verifiedEmail: String, limit: Int) async throws -> [String] {
        try await read { db in
            try String.fetchAll(
                db,
                sql: "SELECT uid FROM provider_links WHERE verified_email = ? GROUP BY uid ORDER BY min(linked_at), uid LIMIT ?",
                arguments: [verifiedEmail, limit])
        }
    }

    /// A page of all links in (provider, federated id) order, after the cursor.
    public func links(after cursor: LinkCursor?, limit: Int) async throws -> [ProviderLinkRecord] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT * FROM provider_links WHERE (provider_id, federated_id) > (?, ?)
                    ORDER BY provider_id, federated_id LIMIT ?
                    """, arguments: [cursor?.providerId ?? "", cursor?.federatedId ?? "", limit]
            ).map(Self.link)
        }
    }

    /// Compare-and-set of a link's sealed tokens.
    public func replaceSealedTokens(providerId: String, federatedId: String, expected: String, with sealed: String) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "UPDATE provider_links SET sealed_tokens = ? WHERE provider_id = ? AND federated_id = ? AND sealed_tokens = ?",
                arguments: [sealed, providerId, federatedId, expected])
            return db.changesCount > 0
        }
    }

    /// Saves a session.
    public func insertSession(_ session: SessionRecord) async throws {
        try await write { db in
            try db.execute(
                sql: "INSERT INTO sessions (id_hash, uid, created_at, expires_at, family_id, sign_in_provider) VALUES (?, ?, ?, ?, ?, ?)",
                arguments: [session.idHash, session.uid, session.createdAt, session.expiresAt, session.familyId, session.signInProvider])
        }
    }

    /// The session with this hash, if it has not expired.
    public func session(idHash: String, now: Date) async throws -> SessionRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM sessions WHERE id_hash = ? AND expires_at > ?", arguments: [idHash, now]).map(Self.session)
        }
    }

    /// The session of a refresh-token family, if it has not expired.
    public func session(familyId: String, now: Date) async throws -> SessionRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM sessions WHERE family_id = ? AND expires_at > ?", arguments: [familyId, now]).map(Self.session)
        }
    }

    /// The unexpired session of a refresh token's family.
    public func session(refreshTokenHash: String, now: Date) async throws -> SessionRecord? {
        try await read { db in
            try Row.fetchOne(
                db, sql: "SELECT * FROM sessions WHERE family_id = (SELECT family_id FROM refresh_tokens WHERE token_hash = ?) AND expires_at > ?",
                arguments: [refreshTokenHash, now]
            ).map(Self.session)
        }
    }

    /// Ends a family's session; its refresh tokens cascade.
    public func deleteSession(familyId: String) async throws {
        try await write { db in try db.execute(sql: "DELETE FROM sessions WHERE family_id = ?", arguments: [familyId]) }
    }

    /// Stores a refresh token's hash in its family.
    public func insertRefreshToken(tokenHash: String, familyId: String, at date: Date) async throws {
        try await write { db in
            try db.execute(
                sql: "INSERT INTO refresh_tokens (token_hash, family_id, created_at) VALUES (?, ?, ?)", arguments: [tokenHash, familyId, date])
        }
    }

    /// Spends a refresh token, or revokes its family when it was spent already.
    public func rotateRefreshToken(tokenHash: String, successor: RefreshSuccessor, now: Date) async throws -> RefreshRotation {
        try await write { db in
            guard
                let token = try Row.fetchOne(
                    db, sql: "SELECT family_id, used_at, sealed_successor, retry_until FROM refresh_tokens WHERE token_hash = ?",
                    arguments: [tokenHash])
            else { return .unknown }
            let familyId: String = token["family_id"]
            let session = try Row.fetchOne(db, sql: "SELECT * FROM sessions WHERE family_id = ? AND expires_at > ?", arguments: [familyId, now])
                .map(Self.session)
            if (token["used_at"] as Date?) != nil {
                if let session, let kept: String = token["sealed_successor"], let until: Date = token["retry_until"], until > now {
                    return .retried(session, sealedSuccessor: kept)
                }
                try db.execute(sql: "DELETE FROM sessions WHERE family_id = ?", arguments: [familyId])
                return .reused
            }
            guard let session else { return .unknown }
            // Only the token spent last keeps its successor: the predecessor's window ends here.
            try db.execute(
                sql: "UPDATE refresh_tokens SET sealed_successor = NULL, retry_until = NULL WHERE family_id = ? AND sealed_successor IS NOT NULL",
                arguments: [familyId])
            try db.execute(
                sql: "UPDATE refresh_tokens SET used_at = ?, sealed_successor = ?, retry_until = ? WHERE token_hash = ?",
                arguments: [now, successor.sealedToken, successor.sealedToken.map { _ in successor.retryUntil }, tokenHash])
            try db.execute(
                sql: "INSERT INTO refresh_tokens (token_hash, family_id, created_at) VALUES (?, ?, ?)",
                arguments: [successor.tokenHash, familyId, now])
            return .rotated(session)
        }
    }

    /// Saves a pending credential.
    public func insertPendingCredential(_ c: PendingCredentialRecord) async throws {
        try await write { db in
            try db.execute(
                sql: """
                    INSERT INTO pending_credentials (token_hash, target_uid, provider_id, federated_id, profile_json, sealed_tokens,
                      verified_email, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [c.tokenHash, c.targetUid, c.providerId, c.federatedId, c.profileJSON, c.sealedTokens, c.verifiedEmail, c.expiresAt])
        }
    }

    /// Deletes and returns a pending credential that has not expired.
    public func takePendingCredential(tokenHash: String, now: Date) async throws -> PendingCredentialRecord? {
        try await write { db in
            guard let row = try Row.fetchOne(db, sql: "DELETE FROM pending_credentials WHERE token_hash = ? RETURNING *", arguments: [tokenHash])
            else { return nil }
            let credential = Self.pending(row)
            return credential.expiresAt > now ? credential : nil
        }
    }

    /// The pending credential if it has not expired, left in place.
    public func pendingCredential(tokenHash: String, now: Date) async throws -> PendingCredentialRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM pending_credentials WHERE token_hash = ? AND expires_at > ?", arguments: [tokenHash, now])
                .map(Self.pending)
        }
    }

    private static func pending(_ row: Row) -> PendingCredentialRecord {
        PendingCredentialRecord(
            tokenHash: row["token_hash"], targetUid: row["target_uid"], providerId: row["provider_id"], federatedId: row["federated_id"],
            profileJSON: row["profile_json"], sealedTokens: row["sealed_tokens"], verifiedEmail: row["verified_email"],
            expiresAt: row["expires_at"])
    }

    /// Saves a signing key.
    public func insertSigningKey(_ key: SigningKeyRecord) async throws {
        try await conflicting {
            try await write { db in
                try db.execute(
                    sql: "INSERT INTO signing_keys (kid, sealed_private_key, created_at) VALUES (?, ?, ?)",
                    arguments: [key.kid, key.sealedPrivateKey, key.createdAt])
            }
        }
    }

    /// Every signing key, newest first.
    public func signingKeys() async throws -> [SigningKeyRecord] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM signing_keys ORDER BY created_at DESC, kid").map { row in
                SigningKeyRecord(kid: row["kid"], sealedPrivateKey: row["sealed_private_key"], createdAt: row["created_at"])
            }
        }
    }

    /// Replaces a signing key's sealed private key if it is still `expected`.
    public func replaceSealedSigningKey(kid: String, expected: String, with sealed: String) async throws -> Bool {
        try await write { db in
            try db.execute(
                sql: "UPDATE signing_keys SET sealed_private_key = ? WHERE kid = ? AND sealed_private_key = ?", arguments: [sealed, kid, expected])
            return db.changesCount > 0
        }
    }

    /// Saves a data key.
    public func insertDataKey(_ key: DataKeyRecord) async throws {
        try await conflicting {
            try await write { db in
                try db.execute(
                    sql: "INSERT INTO data_keys (id, wrapped_key, created_at) VALUES (?, ?, ?)", arguments: [key.id, key.wrappedKey, key.createdAt])
            }
        }
    }

    /// Every data key, newest first.
    public func dataKeys() async throws -> [DataKeyRecord] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM data_keys ORDER BY created_at DESC, id").map { row in
                DataKeyRecord(id: row["id"], wrappedKey: row["wrapped_key"], createdAt: row["created_at"])
            }
        }
    }

    /// Replaces a data key's wrapping if it is still `expected`.
    public func replaceWrappedDataKey(id: String, expected: String, with wrapped: String) async throws -> Bool {
        try await write { db in
            try db.execute(sql: "UPDATE data_keys SET wrapped_key = ? WHERE id = ? AND wrapped_key = ?", arguments: [wrapped, id, expected])
            return db.changesCount > 0
        }
    }

    /// Deletes a data key.
    public func deleteDataKey(id: String) async throws -> Bool {
        try await write { db in
            try db.execute(sql: "DELETE FROM data_keys WHERE id = ?", arguments: [id])
            return db.changesCount > 0
        }
    }

    /// Sealed values per key label (`v2.<id>`), over links, signing keys and live pending credentials.
    public func sealingKeyUsage(now: Date) async throws -> [String: Int] {
        // The label ends before the second dot: `substr(value, 4)` starts after `vN.`.
        func label(_ column: String) -> String { "substr(\(column), 1, instr(substr(\(column), 4), '.') + 2)" }
        let sql = """
            SELECT label, count(*) AS uses FROM (
              SELECT \(label("sealed_tokens")) AS label FROM provider_links
              UNION ALL SELECT \(label("sealed_private_key")) FROM signing_keys
              UNION ALL SELECT \(label("sealed_tokens")) FROM pending_credentials WHERE expires_at > ?1
              UNION ALL SELECT \(label("sealed_successor")) FROM refresh_tokens WHERE sealed_successor IS NOT NULL AND retry_until > ?1
              UNION ALL SELECT \(label("sealed_answer")) FROM signin_results WHERE sealed_answer IS NOT NULL AND retry_until > ?1
            ) GROUP BY label
            """
        return try await read { db in
            var usage: [String: Int] = [:]
            for row in try Row.fetchAll(db, sql: sql, arguments: [now]) {
                usage[row["label"]] = row["uses"]
            }
            return usage
        }
    }

    /// Ends one session.
    public func deleteSession(idHash: String) async throws {
        try await write { db in try db.execute(sql: "DELETE FROM sessions WHERE id_hash = ?", arguments: [idHash]) }
    }

    /// Ends every session of an account.
    public func deleteSessions(uid: String) async throws {
        try await write { db in try db.execute(sql: "DELETE FROM sessions WHERE uid = ?", arguments: [uid]) }
    }

    /// Accounts by the email of any linked profile snapshot (SQLite's JSON functions; lower-cased both sides).
    public func uids(email: String, limit: Int) async throws -> [String] {
        try await read { db in
            try String.fetchAll(
                db,
                sql: """
                    SELECT uid FROM provider_links
                    WHERE lower(json_extract(CAST(profile_json AS TEXT), '$.email')) = lower(?)
                    GROUP BY uid ORDER BY min(linked_at), uid LIMIT ?
                    """, arguments: [email, limit])
        }
    }

    /// Sets the account's `disabled` flag.
    public func setDisabled(uid: String, disabled: Bool) async throws -> Bool {
        try await write { db in
            try db.execute(sql: "UPDATE accounts SET disabled = ? WHERE uid = ?", arguments: [disabled, uid])
            guard db.changesCount > 0 else { return false }
            if disabled { try db.execute(sql: "DELETE FROM sessions WHERE uid = ?", arguments: [uid]) }
            return true
        }
    }

    /// Saves a new service key (scopes as one space-separated column).
    public func insertServiceKey(_ key: ServiceKeyRecord) async throws {
        try await conflicting {
            try await write { db in
                try db.execute(
                    sql: "INSERT INTO service_keys (id, name, secret_hash, scopes, created_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?)",
                    arguments: [key.id, key.name, key.secretHash, key.scopes.joined(separator: " "), key.createdAt, key.revokedAt])
            }
        }
    }

    /// The key with this secret hash.
    public func serviceKey(secretHash: String) async throws -> ServiceKeyRecord? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM service_keys WHERE secret_hash = ?", arguments: [secretHash]).map(Self.serviceKey)
        }
    }

    /// Every key, oldest first.
    public func serviceKeys() async throws -> [ServiceKeyRecord] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM service_keys ORDER BY created_at, id").map(Self.serviceKey)
        }
    }

    /// Revokes a key that is not revoked yet.
    public func revokeServiceKey(id: String, at date: Date) async throws -> Bool {
        try await write { db in
            try db.execute(sql: "UPDATE service_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", arguments: [date, id])
            return db.changesCount > 0
        }
    }

    private static func serviceKey(_ row: Row) -> ServiceKeyRecord {
        let scopes: String = row["scopes"]
        return ServiceKeyRecord(
            id: row["id"], name: row["name"], secretHash: row["secret_hash"], scopes: scopes.split(separator: " ").map(String.init),
            createdAt: row["created_at"], revokedAt: row["revoked_at"])
    }

    /// Deletes expired transactions, results and sessions.
    public func purgeExpired(now: Date) async throws {
        try await write { db in
            try db.execute(sql: "DELETE FROM signin_transactions WHERE expires_at <= ?", arguments: [now])
            try db.execute(sql: "DELETE FROM signin_results WHERE expires_at <= ?1 OR retry_until <= ?1", arguments: [now])
            try db.execute(
                sql: "UPDATE refresh_tokens SET sealed_successor = NULL, retry_until = NULL WHERE retry_until <= ?", arguments: [now])
            try db.execute(sql: "DELETE FROM sessions WHERE expires_at <= ?", arguments: [now])
            try db.execute(sql: "DELETE FROM pending_credentials WHERE expires_at <= ?", arguments: [now])
            try db.execute(sql: "DELETE FROM spent_tokens WHERE expires_at <= ?", arguments: [now])
        }
    }

    /// An in-process lock: a SQLite file serves one gateway process (several instances use
    /// PostgreSQL), so exclusion within this process is exclusion among all its users.
    public func withLock<T: Sendable>(_ name: String, _ body: @Sendable () async throws -> T) async throws -> T {
        try await locks.run(name, body)
    }

    /// `body`, with a uniqueness violation reported as `StorageError.conflict`.
    private func conflicting(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            throw StorageError.conflict
        }
    }

    private static func session(_ row: Row) -> SessionRecord {
        SessionRecord(
            idHash: row["id_hash"], uid: row["uid"], createdAt: row["created_at"], expiresAt: row["expires_at"], familyId: row["family_id"],
            signInProvider: row["sign_in_provider"])
    }

    private static func account(_ row: Row) -> AccountRecord {
        AccountRecord(uid: row["uid"], createdAt: row["created_at"], lastSignInAt: row["last_sign_in_at"], disabled: row["disabled"])
    }

    private static func link(_ row: Row) -> ProviderLinkRecord {
        ProviderLinkRecord(
            uid: row["uid"], providerId: row["provider_id"], federatedId: row["federated_id"], profileJSON: row["profile_json"],
            sealedTokens: row["sealed_tokens"], linkedAt: row["linked_at"], updatedAt: row["updated_at"], verifiedEmail: row["verified_email"])
    }

    private static func insert(_ link: ProviderLinkRecord, _ db: Database) throws {
        try db.execute(
            sql: """
                INSERT INTO provider_links (uid, provider_id, federated_id, profile_json, sealed_tokens, linked_at, updated_at, verified_email)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                link.uid, link.providerId, link.federatedId, link.profileJSON, link.sealedTokens, link.linkedAt, link.updatedAt, link.verifiedEmail,
            ])
    }

    private static func update(_ link: ProviderLinkRecord, _ db: Database) throws {
        try db.execute(
            sql: """
                UPDATE provider_links SET profile_json = ?, sealed_tokens = ?, updated_at = ?, verified_email = ?
                WHERE provider_id = ? AND federated_id = ? AND uid = ?
                """,
            arguments: [link.profileJSON, link.sealedTokens, link.updatedAt, link.verifiedEmail, link.providerId, link.federatedId, link.uid])
    }
}
