import Foundation
import GRDB
import GatehouseCore

/// SQLiteStorage's `AccountStore` part.
extension SQLiteStorage {
    /// The account with this uid.
    public func account(uid: String) async throws -> AccountRecord? {
        try await read { db in
            try Row.fetchOne(db.cachedStatement(sql: "SELECT * FROM accounts WHERE uid = ?"), arguments: [uid]).map(Self.account)
        }
    }
    /// The link of this provider identity.
    public func link(providerId: String, federatedId: String) async throws -> ProviderLinkRecord? {
        try await read { db in
            try Row.fetchOne(
                db.cachedStatement(sql: "SELECT * FROM provider_links WHERE provider_id = ? AND federated_id = ?"),
                arguments: [providerId, federatedId]
            ).map(Self.link)
        }
    }
    /// The links of an account, oldest first.
    public func links(uid: String) async throws -> [ProviderLinkRecord] {
        try await read { db in
            try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM provider_links WHERE uid = ? ORDER BY linked_at, provider_id"), arguments: [uid])
                .map(Self.link)
        }
    }
    /// Creates the account and its first link in one transaction; a uniqueness violation is
    /// `StorageError.conflict`, as is, with `exclusiveEmail`, an address another account holds.
    public func createAccount(_ account: AccountRecord, firstLink: ProviderLinkRecord, exclusiveEmail: Bool) async throws {
        try await conflicting {
            try await write { db in
                if exclusiveEmail { try Self.requireEmailFree(firstLink.verifiedEmail, besides: firstLink.uid, else: .conflict, db) }
                try db.cachedStatement(
                    sql: "INSERT INTO accounts (uid, created_at, last_sign_in_at, disabled, custom_claims) VALUES (?, ?, ?, ?, ?)"
                ).execute(arguments: [account.uid, account.createdAt, account.lastSignInAt, account.disabled, account.customClaims])
                try Self.insert(firstLink, db)
            }
        }
    }
    /// Replaces the link's profile and tokens and moves the account's last sign-in, in one transaction.
    public func recordSignIn(
        link: ProviderLinkRecord, at date: Date, replacingClaims: ClaimsReplacement?, exclusiveEmail: Bool, keepingTokens: Bool
    ) async throws {
        try await write { db in
            try Self.requireEnabled(link.uid, db)
            if exclusiveEmail { try Self.requireEmailFree(link.verifiedEmail, newTo: link, db) }
            try Self.update(link, keepingTokens: keepingTokens, db)
            try db.cachedStatement(sql: "UPDATE accounts SET last_sign_in_at = ? WHERE uid = ?").execute(arguments: [date, link.uid])
            try Self.replaceClaims(replacingClaims, uid: link.uid, db)
        }
    }
    /// Replaces a link's profile and tokens (never its owner).
    public func updateLink(
        _ link: ProviderLinkRecord, consumingPending: String?, replacingClaims: ClaimsReplacement?, exclusiveEmail: Bool, keepingTokens: Bool
    ) async throws {
        try await write { db in
            try Self.requireEnabled(link.uid, db)
            if exclusiveEmail { try Self.requireEmailFree(link.verifiedEmail, newTo: link, db) }
            try Self.update(link, keepingTokens: keepingTokens, db)
            try Self.deletePending(consumingPending, db)
            try Self.replaceClaims(replacingClaims, uid: link.uid, db)
        }
    }
    /// Replaces an account's custom claims.
    public func setCustomClaims(uid: String, _ claims: ClaimsReplacement) async throws -> FlagChange {
        try await write { db in
            guard let row = try Row.fetchOne(db.cachedStatement(sql: "SELECT custom_claims FROM accounts WHERE uid = ?"), arguments: [uid])
            else { return .notFound }
            guard (row["custom_claims"] as Data?) != claims.stored else { return .unchanged }
            try Self.replaceClaims(claims, uid: uid, db)
            return .changed
        }
    }
    /// Replaces a link's profile snapshot and verified email only.
    public func updateLinkProfile(
        providerId: String, federatedId: String, uid: String, profileJSON: Data, verifiedEmail: String?, at date: Date, exclusiveEmail: Bool
    ) async throws {
        try await write { db in
            if exclusiveEmail {
                try Self.requireEmailFree(
                    verifiedEmail, besides: uid, else: .changedMeanwhile, unlessHeldBy: (providerId: providerId, federatedId: federatedId), db)
            }
            try db.cachedStatement(
                sql: """
                    UPDATE provider_links SET profile_json = ?, verified_email = ?, updated_at = ?
                    WHERE provider_id = ? AND federated_id = ? AND uid = ?
                    """
            ).execute(arguments: [profileJSON, verifiedEmail, date, providerId, federatedId, uid])
            guard db.changesCount > 0 else { throw StorageError.linkGone }
        }
    }
    /// Adds a link; a taken identity or provider slot is `StorageError.conflict`.
    public func addLink(_ link: ProviderLinkRecord, consumingPending: String?, replacingClaims: ClaimsReplacement?, exclusiveEmail: Bool)
        async throws
    {
        try await conflicting {
            try await write { db in
                try Self.requireEnabled(link.uid, db)
                if exclusiveEmail { try Self.requireEmailFree(link.verifiedEmail, besides: link.uid, else: .conflict, db) }
                try Self.insert(link, db)
                try Self.deletePending(consumingPending, db)
                try Self.replaceClaims(replacingClaims, uid: link.uid, db)
            }
        }
    }
    /// Throws `StorageError.accountDisabled` when the account `uid` is disabled (a missing
    /// account is left to the write's own check).
    static func requireEnabled(_ uid: String, _ db: Database) throws {
        let disabled = try Bool.fetchOne(db.cachedStatement(sql: "SELECT disabled FROM accounts WHERE uid = ?"), arguments: [uid])
        if disabled == true { throw StorageError.accountDisabled }
    }
    /// `requireEmailFree` for an update of `link`: `StorageError.changedMeanwhile`.
    static func requireEmailFree(_ email: String?, newTo link: ProviderLinkRecord, _ db: Database) throws {
        try requireEmailFree(
            email, besides: link.uid, else: .changedMeanwhile, unlessHeldBy: (providerId: link.providerId, federatedId: link.federatedId), db)
    }
    /// Throws `error` when another account than `uid` holds the verified `email`, unless the
    /// link `unlessHeldBy` holds it already (it was checked when written; an address two
    /// accounts shared before the rule held stays theirs). Inside a write transaction, which
    /// SQLite runs one at a time: nothing can add the address between this look and the
    /// caller's write.
    static func requireEmailFree(
        _ email: String?, besides uid: String, else error: StorageError, unlessHeldBy link: (providerId: String, federatedId: String)? = nil,
        _ db: Database
    ) throws {
        guard let email else { return }
        if let link,
            try String.fetchOne(
                db.cachedStatement(sql: "SELECT verified_email FROM provider_links WHERE provider_id = ? AND federated_id = ? AND uid = ?"),
                arguments: [link.providerId, link.federatedId, uid]) == email
        {
            return
        }
        let taken = try Bool.fetchOne(
            db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM provider_links WHERE verified_email = ? AND uid <> ?)"),
            arguments: [email, uid])
        if taken == true { throw error }
    }
    /// Removes a link unless it is the account's last (one write transaction: SQLite has one writer).
    public func deleteLink(uid: String, providerId: String, sparing: String?) async throws -> UnlinkOutcome {
        try await write { db in
            let links = try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM provider_links WHERE uid = ?"), arguments: [uid]).map(Self.link)
            guard let link = links.first(where: { $0.providerId == providerId }) else { return .notLinked }
            guard links.count > 1 else { return .lastLink }
            try db.cachedStatement(sql: "DELETE FROM provider_links WHERE uid = ? AND provider_id = ?").execute(arguments: [uid, providerId])
            // `IS NOT` keeps every session when nothing is spared (a NULL compares as unknown with `<>`).
            try db.cachedStatement(sql: "DELETE FROM sessions WHERE uid = ? AND sign_in_provider = ? AND family_id IS NOT ?").execute(
                arguments: [uid, providerId, sparing])
            return .deleted(link)
        }
    }
    /// Deletes the account; links, sessions, refresh tokens and pending credentials cascade.
    public func deleteAccount(uid: String) async throws -> [ProviderLinkRecord]? {
        try await write { db in
            let links = try Row.fetchAll(db.cachedStatement(sql: "SELECT * FROM provider_links WHERE uid = ? ORDER BY linked_at"), arguments: [uid])
                .map(Self.link)
            try db.cachedStatement(sql: "DELETE FROM accounts WHERE uid = ?").execute(arguments: [uid])
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
            try db.cachedStatement(
                sql: "UPDATE provider_links SET sealed_tokens = ? WHERE provider_id = ? AND federated_id = ? AND sealed_tokens = ?"
            ).execute(arguments: [sealed, providerId, federatedId, expected])
            return db.changesCount > 0
        }
    }
    /// Saves a pending credential.
    public func insertPendingCredential(_ c: PendingCredentialRecord) async throws {
        try await write { db in
            try db.cachedStatement(
                sql: """
                    INSERT INTO pending_credentials (token_hash, target_uid, provider_id, federated_id, profile_json, sealed_tokens,
                      verified_email, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [c.tokenHash, c.targetUid, c.providerId, c.federatedId, c.profileJSON, c.sealedTokens, c.verifiedEmail, c.expiresAt])
        }
    }
    /// Deletes and returns a pending credential that has not expired.
    public func takePendingCredential(tokenHash: String, now: Date) async throws -> PendingCredentialRecord? {
        try await write { db in
            guard
                let row = try Row.fetchOne(
                    db.cachedStatement(sql: "DELETE FROM pending_credentials WHERE token_hash = ? RETURNING *"), arguments: [tokenHash])
            else { return nil }
            let credential = Self.pending(row)
            return credential.expiresAt > now ? credential : nil
        }
    }
    /// The pending credential if it has not expired, left in place.
    public func pendingCredential(tokenHash: String, now: Date) async throws -> PendingCredentialRecord? {
        try await read { db in
            try Row.fetchOne(
                db.cachedStatement(sql: "SELECT * FROM pending_credentials WHERE token_hash = ? AND expires_at > ?"), arguments: [tokenHash, now]
            )
            .map(Self.pending)
        }
    }
    /// Accounts by the email of any linked profile snapshot (SQLite's JSON functions; folded
    /// both sides, `TextFolding`).
    public func uids(email: String, limit: Int) async throws -> [String] {
        try await read { db in
            try String.fetchAll(
                db,
                sql: """
                    SELECT uid FROM provider_links
                    WHERE gatehouse_fold(json_extract(CAST(profile_json AS TEXT), '$.email')) = ?
                    GROUP BY uid ORDER BY min(linked_at), uid LIMIT ?
                    """, arguments: [TextFolding.folded(email), limit])
        }
    }
    /// Accounts an operator's search finds, by uid after the cursor.
    public func searchAccounts(_ search: AccountSearch, after: String?, limit: Int) async throws -> [String] {
        try await read { db in
            switch search {
            case .all:
                return try String.fetchAll(db, sql: "SELECT uid FROM accounts WHERE uid > ? ORDER BY uid LIMIT ?", arguments: [after ?? "", limit])
            case .text(let text):
                return try String.fetchAll(
                    db,
                    sql: """
                        SELECT a.uid FROM accounts a WHERE a.uid > ? AND (a.uid = ? OR EXISTS (
                          SELECT 1 FROM provider_links l WHERE l.uid = a.uid AND (l.federated_id = ? OR l.provider_id || ':' || l.federated_id = ?
                            OR gatehouse_fold(json_extract(CAST(l.profile_json AS TEXT), '$.email')) LIKE ? ESCAPE '\\'
                            OR gatehouse_fold(json_extract(CAST(l.profile_json AS TEXT), '$.displayName')) LIKE ? ESCAPE '\\')))
                        ORDER BY a.uid LIMIT ?
                        """, arguments: [after ?? "", text, text, text, search.pattern, search.pattern, limit])
            }
        }
    }
    /// Sets the account's `disabled` flag.
    public func setDisabled(uid: String, disabled: Bool) async throws -> FlagChange {
        try await write { db in
            let before = try Bool.fetchOne(db.cachedStatement(sql: "SELECT disabled FROM accounts WHERE uid = ?"), arguments: [uid])
            guard let before else { return .notFound }
            if before != disabled {
                try db.cachedStatement(sql: "UPDATE accounts SET disabled = ? WHERE uid = ?").execute(arguments: [disabled, uid])
            }
            if disabled { try db.cachedStatement(sql: "DELETE FROM sessions WHERE uid = ?").execute(arguments: [uid]) }
            return before == disabled ? .unchanged : .changed
        }
    }
}
