import Foundation
import GRDB
import GatehouseCore

/// SQLiteStorage's `SessionStore` part.
extension SQLiteStorage {
    /// Saves a session, ending the one it replaces.
    public func insertSession(_ session: SessionRecord, firstRefreshToken: NewRefreshToken?, ending: String?) async throws {
        try await write { db in
            // Checked in the write transaction, which SQLite runs alone: a disable commits
            // wholly before it (and is seen) or after it (and ends this session too).
            let disabled = try Bool.fetchOne(db.cachedStatement(sql: "SELECT disabled FROM accounts WHERE uid = ?"), arguments: [session.uid])
            guard disabled == false else { throw StorageError.changedMeanwhile }
            if let ending { try db.cachedStatement(sql: "DELETE FROM sessions WHERE family_id = ?").execute(arguments: [ending]) }
            try db.cachedStatement(
                sql: """
                    INSERT INTO sessions (id_hash, uid, created_at, expires_at, family_id, sign_in_provider, claims, authenticated_at)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(
                arguments: [
                    session.idHash, session.uid, session.createdAt, session.expiresAt, session.familyId, session.signInProvider, session.claims,
                    session.authenticatedAt,
                ])
            // In the same transaction: one commit (one fsync) for the sign-in's session.
            if let use = session.firstUse { try Self.upsertSessionUse(familyId: session.familyId, use, db) }
            if let token = firstRefreshToken { try Self.insertRefreshToken(token, db) }
        }
    }
    /// The session with this hash, if it has not expired.
    public func session(idHash: String, now: Date) async throws -> SessionRecord? {
        try await read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM sessions WHERE id_hash = ? AND expires_at > ?"), arguments: [idHash, now]).map(
                Self.session)
        }
    }
    /// The live session with its account and links in one read transaction: one trip through
    /// GRDB's reader queue instead of three, and one consistent snapshot.
    public func signedIn(_ key: SessionKey, now: Date) async throws -> SignedInRecords? {
        try await read { db in
            let row: Row?
            switch key {
            case .cookieHash(let hash):
                row = try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT * FROM sessions WHERE id_hash = ? AND expires_at > ?"), arguments: [hash, now])
            case .family(let family):
                row = try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT * FROM sessions WHERE family_id = ? AND expires_at > ?"), arguments: [family, now])
            }
            guard let session = row.map(Self.session) else { return nil }
            let account = try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM accounts WHERE uid = ?"), arguments: [session.uid]).map(
                Self.account)
            let links = try Row.fetchAll(
                db.cachedStatement(sql: "SELECT * FROM provider_links WHERE uid = ? ORDER BY linked_at, provider_id"), arguments: [session.uid]
            ).map(Self.link)
            return SignedInRecords(session: session, account: account, links: links)
        }
    }
    /// The session of a refresh-token family, if it has not expired.
    public func session(familyId: String, now: Date) async throws -> SessionRecord? {
        try await read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM sessions WHERE family_id = ? AND expires_at > ?"), arguments: [familyId, now])
                .map(Self.session)
        }
    }
    /// The unexpired session of a refresh token's family.
    public func session(refreshTokenHash: String, now: Date) async throws -> SessionRecord? {
        try await read { db in
            try Row.fetchOne(
                db.cachedStatement(
                    sql: "SELECT * FROM sessions WHERE family_id = (SELECT family_id FROM refresh_tokens WHERE token_hash = ?) AND expires_at > ?"),
                arguments: [refreshTokenHash, now]
            ).map(Self.session)
        }
    }
    /// Ends a family's session; its refresh tokens cascade.
    public func deleteSession(familyId: String) async throws {
        try await write { db in try db.cachedStatement(sql: "DELETE FROM sessions WHERE family_id = ?").execute(arguments: [familyId]) }
    }
    /// Stores a refresh token's hash in its family, if its session lives.
    public func insertRefreshToken(tokenHash: String, familyId: String, at date: Date) async throws {
        try await write { db in try Self.insertRefreshToken(NewRefreshToken(tokenHash: tokenHash, familyId: familyId, issuedAt: date), db) }
    }
    /// Inserts a refresh token inside the caller's transaction; `StorageError.sessionGone`
    /// when its session has ended (the foreign key would refuse it as a constraint error).
    static func insertRefreshToken(_ token: NewRefreshToken, _ db: Database) throws {
        guard
            try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM sessions WHERE family_id = ?)"), arguments: [token.familyId]) == true
        else { throw StorageError.sessionGone }
        try db.cachedStatement(sql: "INSERT INTO refresh_tokens (token_hash, family_id, created_at) VALUES (?, ?, ?)").execute(arguments: [
            token.tokenHash, token.familyId, token.issuedAt,
        ])
    }
    /// Spends a refresh token, or revokes its family when it was spent already or holds its
    /// limit of tokens.
    public func rotateRefreshToken(tokenHash: String, successor: RefreshSuccessor, now: Date) async throws -> RefreshRotation {
        try await write { db in
            guard
                let token = try Row.fetchOne(
                    db.cachedStatement(sql: "SELECT family_id, used_at, sealed_successor, retry_until FROM refresh_tokens WHERE token_hash = ?"),
                    arguments: [tokenHash])
            else { return .unknown }
            let familyId: String = token["family_id"]
            let session = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT * FROM sessions WHERE family_id = ? AND expires_at > ?"), arguments: [familyId, now]
            )
            .map(Self.session)
            if (token["used_at"] as Date?) != nil {
                if let session, let kept: String = token["sealed_successor"], let until: Date = token["retry_until"], until > now {
                    return .retried(session, sealedSuccessor: kept)
                }
                try db.cachedStatement(sql: "DELETE FROM sessions WHERE family_id = ?").execute(arguments: [familyId])
                return .reused(familyId: familyId)
            }
            guard let session else { return .unknown }
            // Counted up to the limit: a family's rows cost no more to count than the limit.
            let held =
                try Int.fetchOne(
                    db.cachedStatement(sql: "SELECT COUNT(*) FROM (SELECT 1 FROM refresh_tokens WHERE family_id = ? LIMIT ?)"),
                    arguments: [familyId, successor.familyLimit]) ?? 0
            if held >= successor.familyLimit {
                try db.cachedStatement(sql: "DELETE FROM sessions WHERE family_id = ?").execute(arguments: [familyId])
                return .exhausted(session)
            }
            // Only the token spent last keeps its successor: the predecessor's window ends here.
            try db.cachedStatement(
                sql: "UPDATE refresh_tokens SET sealed_successor = NULL, retry_until = NULL WHERE family_id = ? AND sealed_successor IS NOT NULL"
            ).execute(arguments: [familyId])
            try db.cachedStatement(sql: "UPDATE refresh_tokens SET used_at = ?, sealed_successor = ?, retry_until = ? WHERE token_hash = ?").execute(
                arguments: [now, successor.sealedToken, successor.sealedToken.map { _ in successor.retryUntil }, tokenHash])
            try db.cachedStatement(sql: "INSERT INTO refresh_tokens (token_hash, family_id, created_at) VALUES (?, ?, ?)").execute(arguments: [
                successor.tokenHash, familyId, now,
            ])
            if let use = successor.use { try Self.upsertSessionUse(familyId: familyId, use, db) }
            return .rotated(session)
        }
    }
    /// Ends one session.
    public func deleteSession(idHash: String) async throws {
        try await write { db in try db.cachedStatement(sql: "DELETE FROM sessions WHERE id_hash = ?").execute(arguments: [idHash]) }
    }
    /// An account's live sessions, newest first.
    public func sessions(uid: String, now: Date) async throws -> [SessionRecord] {
        try await read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: "SELECT * FROM sessions WHERE uid = ? AND expires_at > ? ORDER BY created_at DESC LIMIT \(SessionRecord.listLimit)"),
                arguments: [uid, now]
            ).map(Self.session)
        }
    }
    /// How many live sessions an account has.
    public func sessionCount(uid: String, now: Date) async throws -> Int {
        try await read { db in
            try Int.fetchOne(db.cachedStatement(sql: "SELECT COUNT(*) FROM sessions WHERE uid = ? AND expires_at > ?"), arguments: [uid, now])
                ?? 0
        }
    }
    /// The distinct own claims of an account's live sessions.
    public func sessionClaims(uid: String, now: Date, limit: Int) async throws -> [Data] {
        try await read { db in
            try Data.fetchAll(
                db.cachedStatement(sql: "SELECT DISTINCT claims FROM sessions WHERE uid = ? AND expires_at > ? AND claims IS NOT NULL LIMIT ?"),
                arguments: [uid, now, limit])
        }
    }
    /// Ends every session of an account: whether a live one ended.
    @discardableResult public func deleteSessions(uid: String, now: Date) async throws -> Bool {
        try await write { db in
            let live = try Bool.fetchOne(
                db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM sessions WHERE uid = ? AND expires_at > ?)"), arguments: [uid, now])
            try db.cachedStatement(sql: "DELETE FROM sessions WHERE uid = ?").execute(arguments: [uid])
            return live == true
        }
    }

    /// Records a session's last use.
    public func recordSessionUse(familyId: String, _ use: SessionUse) async throws {
        try await write { db in try Self.upsertSessionUse(familyId: familyId, use, db) }
    }

    /// Inserts or replaces a session's last use in the caller's transaction.
    static func upsertSessionUse(familyId: String, _ use: SessionUse, _ db: Database) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO session_uses (family_id, used_at, client_address, user_agent) VALUES (?, ?, ?, ?)
                ON CONFLICT (family_id) DO UPDATE SET used_at = excluded.used_at, client_address = excluded.client_address,
                  user_agent = excluded.user_agent
                """
        ).execute(arguments: [familyId, use.at, use.clientAddress, use.userAgent])
    }

    /// Sessions' last uses.
    public func sessionUses(familyIds: [String]) async throws -> [String: SessionUse] {
        guard !familyIds.isEmpty else { return [:] }
        return try await read { db in
            let marks = Array(repeating: "?", count: familyIds.count).joined(separator: ", ")
            var uses: [String: SessionUse] = [:]
            for row in try Row.fetchAll(
                db, sql: "SELECT * FROM session_uses WHERE family_id IN (\(marks))", arguments: StatementArguments(familyIds))
            {
                uses[row["family_id"]] = SessionUse(at: row["used_at"], clientAddress: row["client_address"], userAgent: row["user_agent"])
            }
            return uses
        }
    }
}
