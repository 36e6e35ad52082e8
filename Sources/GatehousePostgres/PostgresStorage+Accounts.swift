import Foundation
import GatehouseCore
import Logging
import PostgresNIO
import _ConnectionPoolModule

/// PostgresStorage's `AccountStore` part.
extension PostgresStorage {
    /// Closes the pool's connections (when it runs on its own; a pool run by ``runPool()``
    /// stops with the task or service running it).
    public func shutdown() {
        runner?.cancel()
    }
    /// The account with this uid.
    public func account(uid: String) async throws -> AccountRecord? {
        let rows = try await query(
            "SELECT uid, created_at, last_sign_in_at, disabled, custom_claims FROM accounts WHERE uid = \(uid)", logger: logger)
        for (uid, created, lastSignIn, disabled, claims) in try rows.decode((String, Date, Date, Bool, Data?).self) {
            return AccountRecord(uid: uid, createdAt: created, lastSignInAt: lastSignIn, disabled: disabled, customClaims: claims)
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
    public func createAccount(_ account: AccountRecord, firstLink link: ProviderLinkRecord, exclusiveEmail: Bool) async throws {
        try await transaction { connection, logger in
            if exclusiveEmail { try await Self.requireEmailFree(link.verifiedEmail, besides: link.uid, else: .conflict, connection, logger) }
            try await connection.query(
                """
                INSERT INTO accounts (uid, created_at, last_sign_in_at, disabled, custom_claims)
                VALUES (\(account.uid), \(account.createdAt), \(account.lastSignInAt), \(account.disabled), \(account.customClaims))
                """, logger: logger)
            try await connection.query(try Self.insertQuery(link), logger: logger)
        }
    }
    /// Adds a link; a taken identity or provider slot is `StorageError.conflict`.
    public func addLink(_ link: ProviderLinkRecord, consumingPending: String?, replacingClaims: ClaimsReplacement?, exclusiveEmail: Bool)
        async throws
    {
        let email = exclusiveEmail ? link.verifiedEmail : nil
        let check: @Sendable (PostgresConnection, Logger) async throws -> Void = { connection, logger in
            try await Self.requireEnabled(link.uid, connection, logger)
            try await Self.requireEmailFree(email, besides: link.uid, else: .conflict, connection, logger)
        }
        do {
            try await withPendingConsumed(consumingPending, try Self.insertQuery(link), replacingClaims: replacingClaims, uid: link.uid, first: check)
        } catch let error where Self.sqlState(of: error) == PostgresError.Code.foreignKeyViolation.raw {
            // The account was deleted since the caller read it: a conflict, as SQLite's
            // constraint reports it (the caller reads again and finds the account gone).
            throw StorageError.conflict
        }
    }
    /// `lockingEmail` for a new account or link with `email`, if any.
    static func requireEmailFree(
        _ email: String?, besides uid: String, else error: StorageError, _ connection: PostgresConnection, _ logger: Logger
    ) async throws {
        guard let email else { return }
        try await lockingEmail(email, besides: uid, else: error, connection, logger)
    }

    /// Takes a transaction-scoped advisory lock on the address, which every writer of that
    /// address with the rule takes before its look, then throws `error` when another account
    /// than `uid` holds it: of two transactions writing it at once, the second waits for the
    /// first to commit, then sees its link. That look needs each statement's own snapshot, READ
    /// COMMITTED, which migration requires of the database (`requireReadCommitted`).
    static func lockingEmail(
        _ email: String, besides uid: String, else error: StorageError, _ connection: PostgresConnection, _ logger: Logger
    ) async throws {
        // Keys hashed from the text, in a space the migrations' one fixed key does not share
        // by any likelihood that matters (a 64-bit hash).
        try await connection.query("SELECT pg_advisory_xact_lock(hashtextextended(\("verified-email:" + email), 0))", logger: logger)
        let rows = try await connection.query(
            "SELECT 1 FROM provider_links WHERE verified_email = \(email) AND uid <> \(uid) LIMIT 1", logger: logger)
        if try await answersRow(rows) { throw error }
    }

    /// An update of a link's verified address under one account per verified email.
    struct EmailRule: Sendable {
        /// The address the update records.
        var email: String
        /// The link's account.
        var uid: String
        /// The same update, only where the link holds the address already (answering a row
        /// when it wrote): tried first, so that a link keeping its address costs no more. The
        /// address was decided when it was written; accounts that shared it before the rule
        /// keep sharing it.
        var held: PostgresQuery
    }

    /// Runs `statement` (answering a row when it wrote) under `rule`: when the link does not
    /// hold the address, after `lockingEmail` (a taken address is
    /// `StorageError.changedMeanwhile`). Whether a row was written.
    static func updating(_ statement: PostgresQuery, under rule: EmailRule?, _ connection: PostgresConnection, _ logger: Logger) async throws
        -> Bool
    {
        if let rule {
            if try await answersRow(try await connection.query(rule.held, logger: logger)) { return true }
            try await lockingEmail(rule.email, besides: rule.uid, else: .changedMeanwhile, connection, logger)
        }
        return try await answersRow(try await connection.query(statement, logger: logger))
    }

    /// The rule for an update of `link` when `exclusive`, or `nil`.
    static func emailRule(_ link: ProviderLinkRecord, exclusive: Bool, keepingTokens: Bool) throws -> EmailRule? {
        guard exclusive, let email = link.verifiedEmail else { return nil }
        return EmailRule(email: email, uid: link.uid, held: try updateQuery(link, keepingTokens: keepingTokens, holdingItsEmail: true))
    }

    /// Removes a link unless it is the account's last: the account row is locked first, so
    /// two concurrent unlinks of one account run one after the other.
    public func deleteLink(uid: String, providerId: String, sparing: String?) async throws -> UnlinkOutcome {
        try await transaction { connection, logger in
            try await connection.query("SELECT uid FROM accounts WHERE uid = \(uid) FOR UPDATE", logger: logger)
            let links = try await Self.links(
                "SELECT \(unescaped: Self.linkColumns) FROM provider_links WHERE uid = \(uid)", on: connection, logger: logger)
            guard let link = links.first(where: { $0.providerId == providerId }) else { return .notLinked }
            guard links.count > 1 else { return .lastLink }
            try await connection.query("DELETE FROM provider_links WHERE uid = \(uid) AND provider_id = \(providerId)", logger: logger)
            try await connection.query(
                "DELETE FROM sessions WHERE uid = \(uid) AND sign_in_provider = \(providerId) AND family_id IS DISTINCT FROM \(sparing)",
                logger: logger)
            return .deleted(link)
        }
    }
    /// Deletes the account; links, sessions, refresh tokens and pending credentials cascade.
    /// The links returned are the ones deleted, as they were then: the account row is locked
    /// first (a link added meanwhile waits, then finds no account) and the links are deleted
    /// with `RETURNING` (tokens a refresh stored meanwhile are the ones returned, for their
    /// grants to be revoked), as SQLite's one writer gives.
    public func deleteAccount(uid: String) async throws -> [ProviderLinkRecord]? {
        try await transaction { connection, logger in
            var exists = false
            for try await _ in try await connection.query("SELECT uid FROM accounts WHERE uid = \(uid) FOR UPDATE", logger: logger) { exists = true }
            guard exists else { return nil }
            let links = try await Self.links(
                "DELETE FROM provider_links WHERE uid = \(uid) RETURNING \(unescaped: Self.linkColumns)", on: connection, logger: logger)
            try await connection.query("DELETE FROM accounts WHERE uid = \(uid)", logger: logger)
            return links.sorted { ($0.linkedAt, $0.providerId) < ($1.linkedAt, $1.providerId) }
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
        for uid in try rows.decode(String.self) { uids.append(uid) }
        return uids
    }
    /// Replaces the link's profile and tokens and moves the account's last sign-in, in one transaction.
    public func recordSignIn(
        link: ProviderLinkRecord, at date: Date, replacingClaims: ClaimsReplacement?, exclusiveEmail: Bool, keepingTokens: Bool
    ) async throws {
        try await transaction { connection, logger in
            try await Self.requireEnabled(link.uid, connection, logger)
            let rule = try Self.emailRule(link, exclusive: exclusiveEmail, keepingTokens: keepingTokens)
            let update = try Self.updateQuery(link, keepingTokens: keepingTokens)
            guard try await Self.updating(update, under: rule, connection, logger) else { throw StorageError.linkGone }
            try await connection.query("UPDATE accounts SET last_sign_in_at = \(date) WHERE uid = \(link.uid)", logger: logger)
            if let replacingClaims {
                try await Self.replaceClaims(replacingClaims, uid: link.uid, connection: connection, logger: logger)
            }
        }
    }
    /// Replaces a link's profile and tokens (never its owner).
    public func updateLink(
        _ link: ProviderLinkRecord, consumingPending: String?, replacingClaims: ClaimsReplacement?, exclusiveEmail: Bool, keepingTokens: Bool
    ) async throws {
        try await withPendingConsumed(
            consumingPending, try Self.updateQuery(link, keepingTokens: keepingTokens), replacingClaims: replacingClaims, uid: link.uid,
            unlessNoRow: .linkGone, first: { connection, logger in try await Self.requireEnabled(link.uid, connection, logger) },
            rule: try Self.emailRule(link, exclusive: exclusiveEmail, keepingTokens: keepingTokens))
    }
    /// Throws `StorageError.accountDisabled` when the account `uid` is disabled (a missing
    /// account is left to the write's own check). The row is locked as for an update, which
    /// the sign-in's write may make of it (its last sign-in, its claims): a disable waits for
    /// the write, or the write sees it; no lock is taken that the write would have to upgrade.
    static func requireEnabled(_ uid: String, _ connection: PostgresConnection, _ logger: Logger) async throws {
        let rows = try await connection.query("SELECT disabled FROM accounts WHERE uid = \(uid) FOR NO KEY UPDATE", logger: logger)
        for try await disabled in rows.decode(Bool.self) where disabled { throw StorageError.accountDisabled }
    }
    /// Replaces an account's custom claims.
    public func setCustomClaims(uid: String, _ claims: ClaimsReplacement) async throws -> FlagChange {
        try await transaction { connection, logger in
            var found: Data??
            for try await (stored) in try await connection.query(
                "SELECT custom_claims FROM accounts WHERE uid = \(uid) FOR NO KEY UPDATE", logger: logger
            ).decode(Data?.self) {
                found = .some(stored)
            }
            guard let stored = found else { return .notFound }
            guard stored != claims.stored else { return .unchanged }
            try await Self.replaceClaims(claims, uid: uid, connection: connection, logger: logger)
            return .changed
        }
    }
    /// Replaces a link's profile snapshot and verified email only.
    public func updateLinkProfile(
        providerId: String, federatedId: String, uid: String, profileJSON: Data, verifiedEmail: String?, at date: Date, exclusiveEmail: Bool
    ) async throws {
        @Sendable func update(holdingItsEmail: Bool) throws -> PostgresQuery {
            try """
            UPDATE provider_links SET profile_json = \(profileJSON), verified_email = \(verifiedEmail), updated_at = \(date)
            WHERE provider_id = \(providerId) AND federated_id = \(federatedId) AND uid = \(uid)
              AND (\(!holdingItsEmail) OR verified_email = \(verifiedEmail))
            RETURNING 1
            """
        }
        var rule: EmailRule?
        if exclusiveEmail, let verifiedEmail { rule = EmailRule(email: verifiedEmail, uid: uid, held: try update(holdingItsEmail: true)) }
        try await withPendingConsumed(nil, try update(holdingItsEmail: false), replacingClaims: nil, uid: uid, unlessNoRow: .linkGone, rule: rule)
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
        let credential = try Self.pending(
            try await write("DELETE FROM pending_credentials WHERE token_hash = \(tokenHash) RETURNING \(unescaped: Self.pendingColumns)"))
        return credential.flatMap { $0.expiresAt > now ? $0 : nil }
    }
    /// The pending credential if it has not expired, left in place.
    public func pendingCredential(tokenHash: String, now: Date) async throws -> PendingCredentialRecord? {
        try Self.pending(
            try await query(
                "SELECT \(unescaped: Self.pendingColumns) FROM pending_credentials WHERE token_hash = \(tokenHash) AND expires_at > \(now)",
                logger: logger))
    }
    /// Accounts by the email of any linked profile snapshot (folded both sides, `TextFolding`).
    public func uids(email: String, limit: Int) async throws -> [String] {
        // No index serves the folded snapshot field: a scan.
        let rows = try await scan(
            """
            SELECT uid FROM provider_links
            WHERE \(unescaped: Self.folded(Self.snapshotField("profile_json", "email"))) = \(TextFolding.folded(email))
            GROUP BY uid ORDER BY min(linked_at), uid LIMIT \(limit)
            """)
        var uids: [String] = []
        for uid in try rows.decode(String.self) { uids.append(uid) }
        return uids
    }
    /// Accounts an operator's search finds, in byte order (collation "C", as SQLite's) after
    /// the cursor.
    public func searchAccounts(_ search: AccountSearch, after: String?, limit: Int) async throws -> [String] {
        let rows: [PostgresRow]
        switch search {
        case .all:
            // The `accounts_uid_bytes` index serves it.
            rows = try await query(
                "SELECT uid FROM accounts WHERE uid COLLATE \"C\" > \(after ?? "") ORDER BY uid COLLATE \"C\" LIMIT \(limit)", logger: logger)
        case .text(let text):
            let pattern = search.pattern
            // It folds every link's snapshot fields: a scan.
            rows = try await scan(
                """
                SELECT a.uid FROM accounts a WHERE a.uid COLLATE "C" > \(after ?? "") AND (a.uid = \(text) OR EXISTS (
                  SELECT 1 FROM provider_links l WHERE l.uid = a.uid AND (l.federated_id = \(text) OR l.provider_id || ':' || l.federated_id = \(text)
                    OR \(unescaped: Self.folded(Self.snapshotField("l.profile_json", "email"))) LIKE \(pattern) ESCAPE '\\'
                    OR \(unescaped: Self.folded(Self.snapshotField("l.profile_json", "displayName"))) LIKE \(pattern) ESCAPE '\\')))
                ORDER BY a.uid COLLATE "C" LIMIT \(limit)
                """)
        }
        var uids: [String] = []
        for uid in try rows.decode(String.self) { uids.append(uid) }
        return uids
    }
    /// Sets the account's `disabled` flag.
    public func setDisabled(uid: String, disabled: Bool) async throws -> FlagChange {
        try await transaction { connection, logger in
            // The row is locked for the rest of the transaction, so a concurrent change waits
            // and sees this one's value: of two callers setting the same value, one changes it.
            var before: Bool?
            for try await value in try await connection.query(
                "SELECT disabled FROM accounts WHERE uid = \(uid) FOR UPDATE", logger: logger
            ).decode(Bool.self) {
                before = value
            }
            guard let before else { return .notFound }
            if before != disabled {
                try await connection.query("UPDATE accounts SET disabled = \(disabled) WHERE uid = \(uid)", logger: logger)
            }
            if disabled { try await connection.query("DELETE FROM sessions WHERE uid = \(uid)", logger: logger) }
            return before == disabled ? .unchanged : .changed
        }
    }
}
