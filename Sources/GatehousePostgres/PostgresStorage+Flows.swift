import Foundation
import GatehouseCore
import Logging
import PostgresNIO
import _ConnectionPoolModule

/// PostgresStorage's `FlowStore` part.
extension PostgresStorage {
    /// Saves a started sign-in.
    public func insertTransaction(_ t: SignInTransaction) async throws {
        try await execute(
            """
            INSERT INTO signin_transactions (state_hash, binding_hash, provider_id, code_verifier, nonce, return_to, mode, redirect_uri,
              provider_context, uid, session_family_id, created_at, expires_at, result_challenge)
            VALUES (\(t.stateHash), \(t.bindingHash), \(t.providerId), \(t.codeVerifier), \(t.nonce), \(t.returnTo), \(t.mode.rawValue),
              \(t.redirectURI), \(t.providerContext), \(t.uid), \(t.sessionFamilyId), \(t.createdAt), \(t.expiresAt), \(t.resultChallenge))
            """)
    }
    /// Deletes and returns the transaction with this state and binding (one winner across instances).
    public func takeTransaction(stateHash: String, bindingHash: String) async throws -> SignInTransaction? {
        let rows = try await write(
            """
            DELETE FROM signin_transactions WHERE state_hash = \(stateHash) AND binding_hash = \(bindingHash)
            RETURNING state_hash, binding_hash, provider_id, code_verifier, nonce, return_to, mode, redirect_uri, provider_context,
              uid, session_family_id, created_at, expires_at, result_challenge
            """)
        for (state, binding, provider, verifier, nonce, returnTo, mode, redirect, context, uid, family, created, expires, challenge)
            in try rows.decode((String, String, String, String, String, String, String, String, String, String?, String?, Date, Date, String?).self)
        {
            // A mode this version does not know cannot be continued: as good as no transaction.
            guard let mode = SignInMode(rawValue: mode) else { return nil }
            return SignInTransaction(
                stateHash: state, bindingHash: binding, providerId: provider, codeVerifier: verifier, nonce: nonce, returnTo: returnTo,
                mode: mode, redirectURI: redirect, providerContext: context, uid: uid, sessionFamilyId: family, createdAt: created,
                expiresAt: expires, resultChallenge: challenge)
        }
        return nil
    }
    /// Records a single-use credential; `false` when it was recorded already (by any instance).
    public func spendToken(hash: String, expiresAt: Date) async throws -> Bool {
        try await !write(
            "INSERT INTO spent_tokens (token_hash, expires_at) VALUES (\(hash), \(expiresAt)) ON CONFLICT (token_hash) DO NOTHING RETURNING 1"
        ).isEmpty
    }
    /// Forgets a spent credential.
    public func releaseToken(hash: String) async throws {
        try await execute("DELETE FROM spent_tokens WHERE token_hash = \(hash)")
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
        for (payload, answer, retryable) in try rows.decode((Data, String?, Bool?).self) {
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
            // The replaced session first: a refresh token refused after it takes the delete back too.
            if let family = redemption.endsSession {
                try await connection.query("DELETE FROM sessions WHERE family_id = \(family)", logger: logger)
            }
            if let token = redemption.refreshToken { try await Self.insertRefreshToken(token, connection, logger) }
            return true
        }
    }
}
