import Foundation

/// Sign-in flows in progress: started transactions, one-time results, and the single-use
/// credentials (ID tokens) already spent. Part of `GatehouseStorage`.
public protocol FlowStore: Sendable {
    /// Saves a started sign-in.
    func insertTransaction(_ transaction: SignInTransaction) async throws
    /// Deletes and returns the transaction with this state **and** binding, if any.
    func takeTransaction(stateHash: String, bindingHash: String) async throws -> SignInTransaction?
    /// Saves a one-time sign-in result.
    func insertResult(idHash: String, payload: Data, expiresAt: Date) async throws
    /// The result if it has not expired, left in place: what a redemption reads first. A
    /// redeemed result is `.redeemed` while its retry window lasts and the refresh token it
    /// answered is unused, and gone otherwise.
    func result(idHash: String, now: Date) async throws -> StoredResultState?
    /// Redeems the result if it has not expired and was not redeemed: in one transaction it
    /// stores the redemption's refresh token (the first of the session's family) and either
    /// keeps the sealed answer for retries or deletes the result, and ends the session the
    /// redemption replaces (`endsSession`). A failed redemption leaves the result and that
    /// session, a successful one the token, never one without the other; `false` when
    /// there was nothing to redeem (someone else won), and `StorageError.sessionGone`, nothing
    /// written, when the token's session ended since it was read.
    func takeResult(idHash: String, now: Date, redemption: ResultRedemption) async throws -> Bool
    /// Records that a single-use credential (an ID token posted to the gateway) was used,
    /// until `expiresAt`; `false` when it had been recorded already (a replay), across instances.
    func spendToken(hash: String, expiresAt: Date) async throws -> Bool
    /// Forgets a spent credential whose sign-in stored nothing (the app's hook refused it or
    /// could not be asked), so that it may be presented again.
    func releaseToken(hash: String) async throws
}
