import Foundation
import GRDB
import GatehouseCore

/// SQLiteStorage's `FlowStore` part.
extension SQLiteStorage {
    /// Saves a started sign-in.
    public func insertTransaction(_ t: SignInTransaction) async throws {
        try await write { db in
            try db.cachedStatement(
                sql: """
                    INSERT INTO signin_transactions (state_hash, binding_hash, provider_id, code_verifier, nonce, return_to, mode,
                      redirect_uri, provider_context, uid, session_family_id, created_at, expires_at, result_challenge)
                      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                t.stateHash, t.bindingHash, t.providerId, t.codeVerifier, t.nonce, t.returnTo, t.mode.rawValue, t.redirectURI, t.providerContext,
                t.uid, t.sessionFamilyId, t.createdAt, t.expiresAt, t.resultChallenge,
            ])
        }
    }
    /// Deletes and returns the transaction with this state and binding (`DELETE … RETURNING`: one winner).
    public func takeTransaction(stateHash: String, bindingHash: String) async throws -> SignInTransaction? {
        try await write { db in
            guard
                let row = try Row.fetchOne(
                    db.cachedStatement(sql: "DELETE FROM signin_transactions WHERE state_hash = ? AND binding_hash = ? RETURNING *"),
                    arguments: [stateHash, bindingHash])
                // A mode this version does not know cannot be continued: as good as no transaction.
            else { return nil }
            guard let mode = SignInMode(rawValue: row["mode"]) else { return nil }
            return SignInTransaction(
                stateHash: row["state_hash"], bindingHash: row["binding_hash"], providerId: row["provider_id"],
                codeVerifier: row["code_verifier"], nonce: row["nonce"], returnTo: row["return_to"], mode: mode,
                redirectURI: row["redirect_uri"], providerContext: row["provider_context"], uid: row["uid"],
                sessionFamilyId: row["session_family_id"], createdAt: row["created_at"], expiresAt: row["expires_at"],
                resultChallenge: row["result_challenge"])
        }
    }
    /// Records a single-use credential; `false` when it was recorded already.
    public func spendToken(hash: String, expiresAt: Date) async throws -> Bool {
        try await write { db in
            try db.cachedStatement(sql: "INSERT INTO spent_tokens (token_hash, expires_at) VALUES (?, ?) ON CONFLICT (token_hash) DO NOTHING")
                .execute(arguments: [hash, expiresAt])
            return db.changesCount == 1
        }
    }
    /// Forgets a spent credential.
    public func releaseToken(hash: String) async throws {
        try await write { db in
            try db.cachedStatement(sql: "DELETE FROM spent_tokens WHERE token_hash = ?").execute(arguments: [hash])
        }
    }
    /// Saves a one-time sign-in result.
    public func insertResult(idHash: String, payload: Data, expiresAt: Date) async throws {
        try await write { db in
            try db.cachedStatement(sql: "INSERT INTO signin_results (id_hash, payload, expires_at) VALUES (?, ?, ?)").execute(arguments: [
                idHash, payload, expiresAt,
            ])
        }
    }
    /// The result if it has not expired, left in place; a redeemed one while its retry window
    /// lasts and the refresh token it answered is unused.
    public func result(idHash: String, now: Date) async throws -> StoredResultState? {
        try await read { db in
            guard
                let row = try Row.fetchOne(
                    db.cachedStatement(
                        sql: "SELECT payload, sealed_answer, answer_token_hash, retry_until FROM signin_results WHERE id_hash = ? AND expires_at > ?"),
                    arguments: [idHash, now])
            else { return nil }
            guard let answer: String = row["sealed_answer"] else { return .pending(row["payload"]) }
            guard let retryUntil: Date = row["retry_until"], retryUntil > now else { return nil }
            if let tokenHash: String = row["answer_token_hash"] {
                let unused = try Bool.fetchOne(
                    db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM refresh_tokens WHERE token_hash = ? AND used_at IS NULL)"),
                    arguments: [tokenHash])
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
            try db.cachedStatement(sql: "DELETE FROM signin_results WHERE id_hash = ? AND expires_at <= ?").execute(arguments: [idHash, now])
            guard
                try Bool.fetchOne(
                    db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM signin_results WHERE id_hash = ? AND sealed_answer IS NULL)"),
                    arguments: [idHash])
                    == true
            else { return false }
            if let answer = redemption.sealedAnswer {
                try db.cachedStatement(sql: "UPDATE signin_results SET sealed_answer = ?, answer_token_hash = ?, retry_until = ? WHERE id_hash = ?")
                    .execute(arguments: [answer, redemption.refreshToken?.tokenHash, redemption.retryUntil, idHash])
            } else {
                try db.cachedStatement(sql: "DELETE FROM signin_results WHERE id_hash = ?").execute(arguments: [idHash])
            }
            // The replaced session first: a refresh token refused after it takes the delete back too.
            if let family = redemption.endsSession {
                try db.cachedStatement(sql: "DELETE FROM sessions WHERE family_id = ?").execute(arguments: [family])
            }
            if let token = redemption.refreshToken { try Self.insertRefreshToken(token, db) }
            return true
        }
    }
}
