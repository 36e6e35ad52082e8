import Foundation
import GatehouseCore
import Logging
import PostgresNIO
import _ConnectionPoolModule

/// PostgresStorage's `SessionStore` part.
extension PostgresStorage {
    /// Saves a session, ending the one it replaces.
    public func insertSession(_ session: SessionRecord, firstRefreshToken: NewRefreshToken?, ending: String?) async throws {
        // The account's row is read `FOR SHARE`, which a disable's `UPDATE` waits for (or
        // which waits for the disable and then reads the account as it left it): a disable
        // either sees this session and ends it, or this session is not written. One statement
        // (one commit) for the session, its first use, its first refresh token and the end of
        // the session it replaces; the parts a session does not carry insert (or delete) no row
        // (their values bound as NULL).
        let use = session.firstUse
        let token = firstRefreshToken
        let written = try await changed(
            """
            WITH s AS (
              INSERT INTO sessions (id_hash, uid, created_at, expires_at, family_id, sign_in_provider, claims, authenticated_at)
              SELECT \(session.idHash), uid, \(session.createdAt), \(session.expiresAt), \(session.familyId),
                \(session.signInProvider), \(session.claims), \(session.authenticatedAt)
              FROM accounts WHERE uid = \(session.uid) AND NOT disabled FOR SHARE
              RETURNING family_id
            ), u AS (
              INSERT INTO session_uses (family_id, used_at, client_address, user_agent)
              SELECT family_id, \(use?.at), \(use?.clientAddress), \(use?.userAgent) FROM s WHERE \(use != nil)
              \(unescaped: Self.keepingLastUse)
            ), r AS (
              INSERT INTO refresh_tokens (token_hash, family_id, created_at)
              SELECT \(token?.tokenHash), family_id, \(token?.issuedAt) FROM s WHERE \(token != nil)
            ), e AS (
              DELETE FROM sessions WHERE family_id = \(ending) AND EXISTS (SELECT 1 FROM s)
            )
            SELECT family_id FROM s
            """)
        guard written else { throw StorageError.changedMeanwhile }
    }
    /// The session with this hash, if it has not expired.
    public func session(idHash: String, now: Date) async throws -> SessionRecord? {
        try Self.firstSession(
            try await query(
                "SELECT \(unescaped: Self.sessionColumns) FROM sessions WHERE id_hash = \(idHash) AND expires_at > \(now)", logger: logger))
    }
    /// The live session with its account and links in one statement (one round trip, one
    /// snapshot): the session's row joined with its account and with each of its links.
    public func signedIn(_ key: SessionKey, now: Date) async throws -> SignedInRecords? {
        let chosen: PostgresQuery
        switch key {
        case .cookieHash(let hash):
            chosen = "SELECT \(unescaped: Self.sessionColumns) FROM sessions WHERE id_hash = \(hash) AND expires_at > \(now)"
        case .family(let family):
            chosen = "SELECT \(unescaped: Self.sessionColumns) FROM sessions WHERE family_id = \(family) AND expires_at > \(now)"
        }
        var statement: PostgresQuery = "WITH s AS ("
        statement.sql += chosen.sql
        statement.binds = chosen.binds
        statement.sql += """
            ) SELECT s.id_hash, s.uid, s.created_at, s.expires_at, s.family_id, s.sign_in_provider, s.claims,
            a.created_at, a.last_sign_in_at, a.disabled, a.custom_claims,
            l.provider_id, l.federated_id, l.profile_json, l.sealed_tokens, l.linked_at, l.updated_at, l.verified_email, s.authenticated_at
            FROM s LEFT JOIN accounts a ON a.uid = s.uid LEFT JOIN provider_links l ON l.uid = s.uid
            ORDER BY l.linked_at, l.provider_id
            """
        var records: SignedInRecords?
        for row in try await query(statement, logger: logger).decode(
            (
                String, String, Date, Date, String, String, Data?, Date?, Date?, Bool?, Data?, String?, String?, Data?, String?, Date?, Date?,
                String?, Date?
            ).self)
        {
            let (id, uid, created, expires, family, provider, sessionClaims, accountCreated, lastSignIn, disabled, customClaims) = (
                row.0, row.1, row.2, row.3, row.4, row.5, row.6, row.7, row.8, row.9, row.10
            )
            if records == nil {
                let account = accountCreated.flatMap { created in
                    lastSignIn.map {
                        AccountRecord(uid: uid, createdAt: created, lastSignInAt: $0, disabled: disabled ?? false, customClaims: customClaims)
                    }
                }
                records = SignedInRecords(
                    session: SessionRecord(
                        idHash: id, uid: uid, createdAt: created, expiresAt: expires, familyId: family, signInProvider: provider,
                        claims: sessionClaims, authenticatedAt: row.18),
                    account: account, links: [])
            }
            if let providerId = row.11, let federated = row.12, let profile = row.13, let tokens = row.14, let linked = row.15,
                let updated = row.16
            {
                records?.links.append(
                    ProviderLinkRecord(
                        uid: uid, providerId: providerId, federatedId: federated, profileJSON: profile, sealedTokens: tokens,
                        linkedAt: linked, updatedAt: updated, verifiedEmail: row.17))
            }
        }
        return records
    }
    /// The session of a refresh-token family, if it has not expired.
    public func session(familyId: String, now: Date) async throws -> SessionRecord? {
        try Self.firstSession(
            try await query(
                "SELECT \(unescaped: Self.sessionColumns) FROM sessions WHERE family_id = \(familyId) AND expires_at > \(now)", logger: logger))
    }
    /// The unexpired session of a refresh token's family.
    public func session(refreshTokenHash: String, now: Date) async throws -> SessionRecord? {
        try Self.firstSession(
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
    /// Stores a refresh token's hash in its family, if its session lives.
    public func insertRefreshToken(tokenHash: String, familyId: String, at date: Date) async throws {
        try await transaction { connection, logger in
            try await Self.insertRefreshToken(NewRefreshToken(tokenHash: tokenHash, familyId: familyId, issuedAt: date), connection, logger)
        }
    }
    /// Inserts a refresh token inside the caller's transaction; `StorageError.sessionGone`
    /// when its session has ended. The session's row is locked (`FOR KEY SHARE`, what the
    /// foreign key's own check takes): a sign-out committing first is seen here, one
    /// committing after waits for this transaction and removes the token with its session.
    static func insertRefreshToken(_ token: NewRefreshToken, _ connection: PostgresConnection, _ logger: Logger) async throws {
        guard
            try await answersRow(
                connection.query("SELECT 1 FROM sessions WHERE family_id = \(token.familyId) FOR KEY SHARE", logger: logger))
        else { throw StorageError.sessionGone }
        try await connection.query(
            "INSERT INTO refresh_tokens (token_hash, family_id, created_at) VALUES (\(token.tokenHash), \(token.familyId), \(token.issuedAt))",
            logger: logger)
    }
    /// Spends a refresh token, or revokes its family when it was spent already or holds its
    /// limit of tokens. The token row is locked, so two instances presenting the same token
    /// cannot both rotate it.
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
            let session = try Self.firstSession(
                try await connection.query(
                    "SELECT \(unescaped: Self.sessionColumns) FROM sessions WHERE family_id = \(familyId) AND expires_at > \(now)",
                    logger: logger
                ).collect())
            if usedAt != nil {
                if let session, let kept, let retryUntil, retryUntil > now { return .retried(session, sealedSuccessor: kept) }
                try await connection.query("DELETE FROM sessions WHERE family_id = \(familyId)", logger: logger)
                return .reused(familyId: familyId)
            }
            guard let session else { return .unknown }
            // Counted up to the limit: a family's rows cost no more to count than the limit.
            var held = 0
            for try await count in try await connection.query(
                "SELECT COUNT(*) FROM (SELECT 1 FROM refresh_tokens WHERE family_id = \(familyId) LIMIT \(successor.familyLimit)) AS held",
                logger: logger
            ).decode(Int.self) {
                held = count
            }
            if held >= successor.familyLimit {
                try await connection.query("DELETE FROM sessions WHERE family_id = \(familyId)", logger: logger)
                return .exhausted(session)
            }
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
            if let use = successor.use {
                try await connection.query(Self.recordingUse(familyId: familyId, use), logger: logger)
            }
            return .rotated(session)
        }
    }
    /// Ends one session.
    public func deleteSession(idHash: String) async throws {
        try await execute("DELETE FROM sessions WHERE id_hash = \(idHash)")
    }
    /// An account's live sessions, newest first, at most `SessionRecord.listLimit`.
    public func sessions(uid: String, now: Date) async throws -> [SessionRecord] {
        var sessions: [SessionRecord] = []
        for (id, owner, created, expires, family, provider, claims, authenticated) in try await query(
            """
            SELECT \(unescaped: Self.sessionColumns) FROM sessions WHERE uid = \(uid) AND expires_at > \(now)
            ORDER BY created_at DESC LIMIT \(SessionRecord.listLimit)
            """, logger: logger
        ).decode((String, String, Date, Date, String, String, Data?, Date?).self) {
            sessions.append(
                SessionRecord(
                    idHash: id, uid: owner, createdAt: created, expiresAt: expires, familyId: family, signInProvider: provider, claims: claims,
                    authenticatedAt: authenticated))
        }
        return sessions
    }
    /// How many live sessions an account has.
    public func sessionCount(uid: String, now: Date) async throws -> Int {
        var count = 0
        for value in try await query("SELECT COUNT(*) FROM sessions WHERE uid = \(uid) AND expires_at > \(now)", logger: logger)
            .decode(Int.self)
        {
            count = value
        }
        return count
    }
    /// The distinct own claims of an account's live sessions.
    public func sessionClaims(uid: String, now: Date, limit: Int) async throws -> [Data] {
        var claims: [Data] = []
        for value in try await query(
            "SELECT DISTINCT claims FROM sessions WHERE uid = \(uid) AND expires_at > \(now) AND claims IS NOT NULL LIMIT \(limit)", logger: logger
        ).decode(Data.self) {
            claims.append(value)
        }
        return claims
    }
    /// Ends every session of an account: whether a live one ended (one row answered at most).
    @discardableResult public func deleteSessions(uid: String, now: Date) async throws -> Bool {
        try await changed(
            "WITH ended AS (DELETE FROM sessions WHERE uid = \(uid) RETURNING expires_at) SELECT 1 FROM ended WHERE expires_at > \(now) LIMIT 1")
    }

    /// Records a session's last use.
    public func recordSessionUse(familyId: String, _ use: SessionUse) async throws {
        try await execute(Self.recordingUse(familyId: familyId, use))
    }

    /// The statement that records a family's last use.
    static func recordingUse(familyId: String, _ use: SessionUse) -> PostgresQuery {
        """
        INSERT INTO session_uses (family_id, used_at, client_address, user_agent)
        VALUES (\(familyId), \(use.at), \(use.clientAddress), \(use.userAgent))
        \(unescaped: keepingLastUse)
        """
    }

    /// Keeps one row per session family: a later use replaces the earlier one.
    static let keepingLastUse = """
        ON CONFLICT (family_id) DO UPDATE SET used_at = excluded.used_at, client_address = excluded.client_address,
          user_agent = excluded.user_agent
        """

    /// Sessions' last uses.
    public func sessionUses(familyIds: [String]) async throws -> [String: SessionUse] {
        guard !familyIds.isEmpty else { return [:] }
        var uses: [String: SessionUse] = [:]
        for (family, at, address, agent) in try await query(
            "SELECT family_id, used_at, client_address, user_agent FROM session_uses WHERE family_id = ANY(\(familyIds))", logger: logger
        ).decode((String, Date, String, String?).self) {
            uses[family] = SessionUse(at: at, clientAddress: address, userAgent: agent)
        }
        return uses
    }
}
