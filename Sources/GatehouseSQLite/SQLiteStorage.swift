import Foundation
import GRDB
import GatehouseCore

/// The embedded default store: one SQLite file in WAL mode, through GRDB.
///
/// WAL with `synchronous=FULL` keeps every committed sign-in across a crash or `kill -9`;
/// each protocol method is one SQLite transaction, so nothing is ever half-written.
public final class SQLiteStorage: GatehouseStorage {
    /// The WAL database: one writer, concurrent readers.
    let pool: DatabasePool
    /// The in-process named locks (`withLock`).
    let locks = KeyedLock()
    /// How long a caller of `withLock` waits for a held lock before giving up.
    let lockWait: Duration
    /// The data folder, named in errors about the disk.
    let folder: String

    /// Opens (or creates) the database file, readable by its owner only (0600; SQLite gives
    /// its `-wal` and `-shm` files the same permissions). `lockWait` bounds the wait for a named
    /// lock (`withLock`).
    public init(path: String, lockWait: Duration = .seconds(60)) throws {
        self.lockWait = lockWait
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
            db.add(function: Self.fold)
        }
        pool = try DatabasePool(path: path, configuration: configuration)
        folder = (path as NSString).deletingLastPathComponent
    }

    /// A read, with resource failures as `StorageError.exhausted`.
    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        do { return try await pool.read(body) } catch let error as DatabaseError { throw exhausted(error) ?? error }
    }

    /// A write transaction, with resource failures as `StorageError.exhausted`: SQLite rolled
    /// it back, so nothing was committed and the caller may answer 503.
    ///
    /// The webhook events recorded with the write (`Outbox.entries`) are inserted in the same
    /// transaction, unless the write reports it changed nothing.
    func write<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        let recorded = Outbox.entries
        do {
            return try await pool.write { db in
                let result = try body(db)
                guard !recorded.isEmpty else { return result }
                for entry in Outbox.keep(recorded, after: result) {
                    try Self.insertOutbox(entry, db)
                }
                return result
            }
        } catch let error as DatabaseError {
            throw exhausted(error) ?? error
        }
    }

    /// A full disk, an I/O error, no memory, a file that cannot be opened or written: the
    /// condition and the data folder, never the statement's values.
    func exhausted(_ error: DatabaseError) -> StorageError? {
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
        _ = try await read { db in try Int.fetchOne(db.cachedStatement(sql: "SELECT 1")) }
    }

    /// Replaces an account's custom claims, when given (in the caller's transaction).
    static func replaceClaims(_ claims: ClaimsReplacement?, uid: String, _ db: Database) throws {
        guard let claims else { return }
        switch claims.basis {
        case .any:
            try db.cachedStatement(sql: "UPDATE accounts SET custom_claims = ? WHERE uid = ?").execute(arguments: [claims.stored, uid])
        case .exactly(let basis):
            // `IS` compares NULL with NULL too (an account without claims).
            try db.cachedStatement(sql: "UPDATE accounts SET custom_claims = ? WHERE uid = ? AND custom_claims IS ?").execute(
                arguments: [claims.stored, uid, basis])
            guard db.changesCount > 0 else { throw StorageError.changedMeanwhile }
        }
    }

    /// Deletes the pending credential with this hash, when given (in the caller's transaction).
    static func deletePending(_ tokenHash: String?, _ db: Database) throws {
        guard let tokenHash else { return }
        try db.cachedStatement(sql: "DELETE FROM pending_credentials WHERE token_hash = ?").execute(arguments: [tokenHash])
        // Taken by another claim since it was read: this one writes nothing.
        guard db.changesCount > 0 else { throw StorageError.pendingGone }
    }

    /// A pending credential from its row.
    static func pending(_ row: Row) -> PendingCredentialRecord {
        PendingCredentialRecord(
            tokenHash: row["token_hash"], targetUid: row["target_uid"], providerId: row["provider_id"], federatedId: row["federated_id"],
            profileJSON: row["profile_json"], sealedTokens: row["sealed_tokens"], verifiedEmail: row["verified_email"],
            expiresAt: row["expires_at"])
    }

    /// A service key from its row (scopes stored space-separated).
    static func serviceKey(_ row: Row) -> ServiceKeyRecord {
        let scopes: String = row["scopes"]
        return ServiceKeyRecord(
            id: row["id"], name: row["name"], secretHash: row["secret_hash"], scopes: scopes.split(separator: " ").map(String.init),
            createdAt: row["created_at"], revokedAt: row["revoked_at"])
    }

    /// Deletes expired transactions, results and sessions.
    public func purgeExpired(now: Date) async throws {
        try await write { db in
            for statement in Self.purgeStatements { try db.execute(sql: statement, arguments: [now]) }
        }
    }

    /// The purge's statements, `?1` being the time: each finds what it removes through an
    /// index on its time column (the purge holds the write lock, which a scan of every
    /// session would hold for as long as the table is large), except the last, which reads
    /// the uses of the sessions still held, one per live session.
    @_spi(Testing) public static let purgeStatements = [
        "DELETE FROM signin_transactions WHERE expires_at <= ?1",
        "DELETE FROM signin_results WHERE expires_at <= ?1 OR retry_until <= ?1",
        "UPDATE refresh_tokens SET sealed_successor = NULL, retry_until = NULL WHERE retry_until <= ?1",
        "DELETE FROM sessions WHERE expires_at <= ?1",
        "DELETE FROM pending_credentials WHERE expires_at <= ?1",
        "DELETE FROM spent_tokens WHERE expires_at <= ?1",
        // The uses of sessions that ended (expired, signed out, revoked).
        "DELETE FROM session_uses WHERE family_id NOT IN (SELECT family_id FROM sessions) AND ?1 IS NOT NULL",
    ]

    /// `body`, with a uniqueness violation reported as `StorageError.conflict`.
    func conflicting(_ body: () async throws -> Void) async throws {
        do {
            try await body()
        } catch let error as DatabaseError where error.resultCode == .SQLITE_CONSTRAINT {
            throw StorageError.conflict
        }
    }

    /// A session from its row.
    static func session(_ row: Row) -> SessionRecord {
        SessionRecord(
            idHash: row["id_hash"], uid: row["uid"], createdAt: row["created_at"], expiresAt: row["expires_at"], familyId: row["family_id"],
            signInProvider: row["sign_in_provider"], claims: row["claims"], authenticatedAt: row["authenticated_at"])
    }

    /// An account from its row.
    static func account(_ row: Row) -> AccountRecord {
        AccountRecord(
            uid: row["uid"], createdAt: row["created_at"], lastSignInAt: row["last_sign_in_at"], disabled: row["disabled"],
            customClaims: row["custom_claims"])
    }

    /// A provider link from its row.
    static func link(_ row: Row) -> ProviderLinkRecord {
        ProviderLinkRecord(
            uid: row["uid"], providerId: row["provider_id"], federatedId: row["federated_id"], profileJSON: row["profile_json"],
            sealedTokens: row["sealed_tokens"], linkedAt: row["linked_at"], updatedAt: row["updated_at"], verifiedEmail: row["verified_email"])
    }

    /// Inserts a link inside the caller's transaction.
    static func insert(_ link: ProviderLinkRecord, _ db: Database) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO provider_links (uid, provider_id, federated_id, profile_json, sealed_tokens, linked_at, updated_at, verified_email)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(
            arguments: [
                link.uid, link.providerId, link.federatedId, link.profileJSON, link.sealedTokens, link.linkedAt, link.updatedAt, link.verifiedEmail,
            ])
    }

    /// Replaces a link's snapshot and tokens (its snapshot only, `keepingTokens`) inside the
    /// caller's transaction; `StorageError.linkGone` (rolling it back) when the link is no
    /// longer there.
    static func update(_ link: ProviderLinkRecord, keepingTokens: Bool, _ db: Database) throws {
        try db.cachedStatement(
            sql: """
                UPDATE provider_links SET profile_json = ?, sealed_tokens = coalesce(?, sealed_tokens), updated_at = ?, verified_email = ?
                WHERE provider_id = ? AND federated_id = ? AND uid = ?
                """
        ).execute(
            arguments: [
                link.profileJSON, keepingTokens ? nil : link.sealedTokens, link.updatedAt, link.verifiedEmail, link.providerId, link.federatedId,
                link.uid,
            ])
        guard db.changesCount > 0 else { throw StorageError.linkGone }
    }
}
