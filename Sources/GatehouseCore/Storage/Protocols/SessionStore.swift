import Foundation

/// Sessions and their refresh-token families. Part of `GatehouseStorage`.
public protocol SessionStore: Sendable {
    /// Saves a session, with its first use when it carries one and `firstRefreshToken` when
    /// given (one transaction: an ID-token sign-in answers its token at once, so the session
    /// and its token commit together or not at all), unless its account is disabled or gone by
    /// the time it is written (a disable while the app's hook was asked): then
    /// `StorageError.changedMeanwhile`, and nothing written. A disable running at the same
    /// moment either ends it or is seen by it. (A parameter, not a member of `SessionRecord`:
    /// the record is held in the request path's async frames, which the frame check bounds.)
    /// `ending` names the family of a session the new one replaces (a re-authentication by ID
    /// token), deleted in the same transaction.
    func insertSession(_ session: SessionRecord, firstRefreshToken: NewRefreshToken?, ending: String?) async throws
    /// The session with this hash, if it has not expired.
    func session(idHash: String, now: Date) async throws -> SessionRecord?
    /// The session of a refresh-token family (an ID token's `sid`), if it has not expired.
    func session(familyId: String, now: Date) async throws -> SessionRecord?
    /// The unexpired session a refresh token belongs to, spent or not: what a refresh reads
    /// before it commits the rotation.
    func session(refreshTokenHash: String, now: Date) async throws -> SessionRecord?
    /// Ends one session.
    func deleteSession(idHash: String) async throws
    /// Ends the session of a refresh-token family, with its refresh tokens.
    func deleteSession(familyId: String) async throws
    /// Stores a new refresh token (by hash) in a session's family; `StorageError.sessionGone`,
    /// nothing written, when the session has ended.
    func insertRefreshToken(tokenHash: String, familyId: String, at date: Date) async throws
    /// Spends a refresh token and stores its successor in one transaction, keeping the sealed
    /// successor beside the spent token (and wiping the one its predecessor kept, so only the
    /// immediately preceding token ever has a retry window). A token spent before returns
    /// its kept successor while the window lasts (`.retried`), and otherwise revokes its
    /// whole family (reuse means it was stolen or replayed). Every spent token is kept while
    /// its session lives: a thief who rotates a stolen token many times must not be able to
    /// make the owner's spent one unknown, which would revoke nothing. What bounds them is
    /// the family's limit: a live token of a family holding `successor.familyLimit` tokens
    /// rotates nothing and ends the session (`.exhausted`).
    func rotateRefreshToken(tokenHash: String, successor: RefreshSuccessor, now: Date) async throws -> RefreshRotation
    /// Ends every session of an account: whether a live one (expiring after `now`) ended; the
    /// events recorded with the write are kept only then (expired sessions the purge has not
    /// removed yet go too, and count for nothing).
    @discardableResult func deleteSessions(uid: String, now: Date) async throws -> Bool
    /// An account's live sessions (expiring after `now`), newest first, at most `SessionRecord.listLimit`.
    func sessions(uid: String, now: Date) async throws -> [SessionRecord]
    /// How many live sessions an account has (`sessions(uid:now:)` lists at most `SessionRecord.listLimit`).
    func sessionCount(uid: String, now: Date) async throws -> Int
    /// The distinct own claims (`SessionRecord.claims`) of an account's live sessions that have
    /// some, at most `limit` of them (one sign-in's hook usually answers every sign-in alike).
    func sessionClaims(uid: String, now: Date, limit: Int) async throws -> [Data]
    /// Records that a session was used (its sign-in, a refresh of its tokens): when, from
    /// which client address and with which user agent; the last use replaces the one before.
    func recordSessionUse(familyId: String, _ use: SessionUse) async throws
    /// The last recorded use of each of these sessions (those never recorded are missing).
    func sessionUses(familyIds: [String]) async throws -> [String: SessionUse]
}

extension SessionStore {
    /// Saves a session without a first refresh token (`insertSession(_:firstRefreshToken:ending:)`).
    public func insertSession(_ session: SessionRecord) async throws {
        try await insertSession(session, firstRefreshToken: nil, ending: nil)
    }

    /// Saves a session, replacing none (`insertSession(_:firstRefreshToken:ending:)`).
    public func insertSession(_ session: SessionRecord, firstRefreshToken: NewRefreshToken?) async throws {
        try await insertSession(session, firstRefreshToken: firstRefreshToken, ending: nil)
    }
}
