import Foundation

/// Everything Gatehouse keeps, behind one protocol: SQLite embedded, PostgreSQL for
/// several instances. Each method is atomic; "take" methods delete what they return, so a
/// state, result or code-bound record can be used once even across instances.
public protocol GatehouseStorage: Sendable {
    /// Creates or upgrades the schema (versioned, forward-only).
    func migrate() async throws
    /// Answers when the store is reachable, within `limit` if given (readiness asks for a
    /// short one) or the store's own operation timeout.
    func ping(within limit: Duration?) async throws

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
    /// keeps the sealed answer for retries or deletes the result. A failed redemption leaves
    /// the result, a successful one the token, never one without the other; `false` when
    /// there was nothing to redeem (someone else won).
    func takeResult(idHash: String, now: Date, redemption: ResultRedemption) async throws -> Bool

    /// Records that a single-use credential (an ID token posted to the gateway) was used,
    /// until `expiresAt`; `false` when it had been recorded already (a replay), across instances.
    func spendToken(hash: String, expiresAt: Date) async throws -> Bool

    /// The account with this uid.
    func account(uid: String) async throws -> AccountRecord?
    /// The link of this provider identity, on whichever account holds it.
    func link(providerId: String, federatedId: String) async throws -> ProviderLinkRecord?
    /// The links of an account, oldest first.
    func links(uid: String) async throws -> [ProviderLinkRecord]
    /// Creates an account with its first link in one transaction; throws
    /// `StorageError.conflict` when the identity is already linked.
    func createAccount(_ account: AccountRecord, firstLink: ProviderLinkRecord) async throws
    /// Replaces a link's profile and tokens and sets the account's last sign-in, in one transaction.
    func recordSignIn(link: ProviderLinkRecord, at date: Date) async throws
    /// Replaces a link's profile snapshot and tokens and, in the same transaction, deletes the
    /// pending credential with hash `consumingPending` when given.
    func updateLink(_ link: ProviderLinkRecord, consumingPending: String?) async throws

    /// Replaces a link's profile snapshot and verified email only (its tokens stay as
    /// stored), if `uid` still owns it.
    func updateLinkProfile(
        providerId: String, federatedId: String, uid: String, profileJSON: Data, verifiedEmail: String?, at date: Date
    ) async throws
    /// Adds a link to an existing account and, in the same transaction, deletes the pending
    /// credential with hash `consumingPending` when given; `StorageError.conflict` when the
    /// identity is linked anywhere already or the account already has a link to that provider.
    func addLink(_ link: ProviderLinkRecord, consumingPending: String?) async throws
    /// Removes the account's link to a provider unless it is the last one (decided inside
    /// the transaction, so two concurrent unlinks cannot leave an account with none).
    func deleteLink(uid: String, providerId: String) async throws -> UnlinkOutcome
    /// Deletes an account with its links, sessions and refresh tokens; returns the links it
    /// had (so their grants can be revoked), or `nil` when there is no such account.
    func deleteAccount(uid: String) async throws -> [ProviderLinkRecord]?
    /// The uids of accounts with a link whose normalized verified email is `verifiedEmail`,
    /// oldest link first, at most `limit`.
    func uids(verifiedEmail: String, limit: Int) async throws -> [String]

    /// Up to `limit` links of every account, ordered by provider id then federated id, after
    /// the link at `after` (from the start when `nil`): a stable cursor for batch jobs.
    func links(after: LinkCursor?, limit: Int) async throws -> [ProviderLinkRecord]
    /// Replaces a link's sealed tokens only while they are still `expected` (compare and set:
    /// a refresh that stored new tokens meanwhile wins); `false` when they had changed.
    func replaceSealedTokens(providerId: String, federatedId: String, expected: String, with sealed: String) async throws -> Bool

    /// Saves a session.
    func insertSession(_ session: SessionRecord) async throws
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

    /// Stores a new refresh token (by hash) in a session's family.
    func insertRefreshToken(tokenHash: String, familyId: String, at date: Date) async throws
    /// Spends a refresh token and stores its successor in one transaction, keeping the sealed
    /// successor beside the spent token (and wiping the one its predecessor kept, so only the
    /// immediately preceding token ever has a retry window). A token spent before returns
    /// its kept successor while the window lasts (`.retried`), and otherwise revokes its
    /// whole family (reuse means it was stolen or replayed).
    func rotateRefreshToken(tokenHash: String, successor: RefreshSuccessor, now: Date) async throws -> RefreshRotation

    /// Saves a pending credential.
    func insertPendingCredential(_ credential: PendingCredentialRecord) async throws
    /// Deletes and returns the pending credential with this hash if it has not expired.
    func takePendingCredential(tokenHash: String, now: Date) async throws -> PendingCredentialRecord?
    /// The pending credential with this hash if it has not expired, left in place.
    func pendingCredential(tokenHash: String, now: Date) async throws -> PendingCredentialRecord?

    /// Saves a new signing key.
    func insertSigningKey(_ key: SigningKeyRecord) async throws
    /// Every signing key, newest first.
    func signingKeys() async throws -> [SigningKeyRecord]
    /// Replaces a signing key's sealed private key if it is still `expected` (re-encryption).
    func replaceSealedSigningKey(kid: String, expected: String, with sealed: String) async throws -> Bool

    /// Saves a new data key; a taken id is `StorageError.conflict`.
    func insertDataKey(_ key: DataKeyRecord) async throws
    /// Every data key, newest first.
    func dataKeys() async throws -> [DataKeyRecord]
    /// Replaces a data key's wrapping if it is still `expected` (a new key-encryption key).
    func replaceWrappedDataKey(id: String, expected: String, with wrapped: String) async throws -> Bool
    /// Deletes a data key; whether it existed.
    func deleteDataKey(id: String) async throws -> Bool
    /// How many stored sealed values each key seals — provider tokens of links, signing keys,
    /// unexpired pending credentials and what retry windows keep — by label: the sealed value's first two dot-separated
    /// parts (`v1.<configured key id>` or `v2.<data key id>`).
    func sealingKeyUsage(now: Date) async throws -> [String: Int]
    /// Ends every session of an account.
    func deleteSessions(uid: String) async throws

    /// The uids of accounts with a linked identity whose profile email is `email` (compared
    /// case-insensitively, whole address), oldest link first, at most `limit`.
    func uids(email: String, limit: Int) async throws -> [String]
    /// Disables or enables an account; disabling ends its sessions in the same transaction;
    /// `false` when there is no such account.
    func setDisabled(uid: String, disabled: Bool) async throws -> Bool

    /// Saves a new service key.
    func insertServiceKey(_ key: ServiceKeyRecord) async throws
    /// The key whose secret has this hash (revoked ones included; the caller checks).
    func serviceKey(secretHash: String) async throws -> ServiceKeyRecord?
    /// Every key, oldest first.
    func serviceKeys() async throws -> [ServiceKeyRecord]
    /// Revokes a key; `false` when there is no such key or it was already revoked.
    func revokeServiceKey(id: String, at date: Date) async throws -> Bool

    /// Deletes expired transactions, results (redeemed ones once their retry window ended),
    /// sessions (with their refresh tokens) and pending credentials, and wipes the sealed
    /// successors of spent refresh tokens whose retry window ended.
    func purgeExpired(now: Date) async throws

    /// Runs `body` holding the lock `name`, exclusive among every gateway instance using this
    /// store (one provider-token refresh at a time per linked identity, across instances).
    /// A lock dies with its holder: a crashed instance never leaves it taken.
    func withLock<T: Sendable>(_ name: String, _ body: @Sendable () async throws -> T) async throws -> T
}

extension GatehouseStorage {
    /// Answers when the store is reachable, within the store's own operation timeout.
    public func ping() async throws {
        try await ping(within: nil)
    }

    /// Replaces a link's profile snapshot and tokens.
    public func updateLink(_ link: ProviderLinkRecord) async throws {
        try await updateLink(link, consumingPending: nil)
    }

    /// Adds a link to an existing account (see `addLink(_:consumingPending:)`).
    public func addLink(_ link: ProviderLinkRecord) async throws {
        try await addLink(link, consumingPending: nil)
    }
}
