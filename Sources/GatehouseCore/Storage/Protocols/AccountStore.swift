import Foundation

/// Accounts, their provider links (profile snapshots and sealed tokens) and the pending
/// credentials parked for them. Part of `GatehouseStorage`.
public protocol AccountStore: Sendable {
    /// The account with this uid.
    func account(uid: String) async throws -> AccountRecord?
    /// The link of this provider identity, on whichever account holds it.
    func link(providerId: String, federatedId: String) async throws -> ProviderLinkRecord?
    /// The links of an account, oldest first.
    func links(uid: String) async throws -> [ProviderLinkRecord]
    /// Creates an account with its first link in one transaction; throws
    /// `StorageError.conflict` when the identity is already linked, and with `exclusiveEmail`
    /// when another account's link holds the link's verified email — decided inside the
    /// transaction, so two accounts created at once with one address cannot both be written.
    func createAccount(_ account: AccountRecord, firstLink: ProviderLinkRecord, exclusiveEmail: Bool) async throws
    /// Replaces a link's profile and tokens and sets the account's last sign-in (and its custom
    /// claims, when `replacingClaims` is given), in one transaction; `StorageError.linkGone`
    /// when `link.uid` no longer holds the identity. With `exclusiveEmail`, a verified email
    /// that another account's link holds is `StorageError.changedMeanwhile` (taken since it was
    /// read; decided in the transaction, as for `createAccount`) and nothing is written —
    /// unless the link holds that address already as the transaction reads it (decided when it
    /// was written: accounts that shared an address before the rule keep sharing it).
    /// With `keepingTokens`, the link's stored tokens stay as they are and `link.sealedTokens`
    /// is not written: a sign-in that brings no grant (an ID token) must not write back the
    /// grant it read, which a token refresh or an encryption rotation may have replaced since.
    /// A disabled account is `StorageError.accountDisabled`, nothing written (decided in the
    /// transaction: an account disabled while the sign-in's hook was asked gets nothing of it).
    func recordSignIn(link: ProviderLinkRecord, at date: Date, replacingClaims: ClaimsReplacement?, exclusiveEmail: Bool, keepingTokens: Bool)
        async throws
    /// Replaces a link's profile snapshot and tokens (its profile only, with `keepingTokens`,
    /// as for `recordSignIn`) and, in the same transaction, deletes the pending credential with
    /// hash `consumingPending` (`StorageError.pendingGone`, nothing written, when it is not
    /// there: another claim took it) and replaces the account's custom claims, each when given;
    /// `StorageError.linkGone` when `link.uid` no longer holds the identity; with
    /// `exclusiveEmail`, `StorageError.changedMeanwhile`, and for a disabled account
    /// `StorageError.accountDisabled`, as for `recordSignIn`.
    func updateLink(
        _ link: ProviderLinkRecord, consumingPending: String?, replacingClaims: ClaimsReplacement?, exclusiveEmail: Bool, keepingTokens: Bool
    ) async throws
    /// Replaces a link's profile snapshot and verified email only (its tokens stay as
    /// stored); `StorageError.linkGone` when `uid` no longer holds the identity; with
    /// `exclusiveEmail`, `StorageError.changedMeanwhile` as for `recordSignIn`.
    func updateLinkProfile(
        providerId: String, federatedId: String, uid: String, profileJSON: Data, verifiedEmail: String?, at date: Date, exclusiveEmail: Bool
    ) async throws
    /// Adds a link to an existing account and, in the same transaction, deletes the pending
    /// credential with hash `consumingPending` (`StorageError.pendingGone` when it is not there,
    /// as for `updateLink`) and replaces the account's custom claims, each when given; `StorageError.conflict` when the identity is linked anywhere already, the
    /// account already has a link to that provider, the account is gone (deleted since it was
    /// read) or, with `exclusiveEmail`, another account's link holds the link's verified email
    /// (decided inside the transaction, as for `createAccount`); a disabled account is
    /// `StorageError.accountDisabled`, as for `recordSignIn`.
    func addLink(_ link: ProviderLinkRecord, consumingPending: String?, replacingClaims: ClaimsReplacement?, exclusiveEmail: Bool) async throws
    /// Removes the account's link to a provider unless it is the last one (decided inside
    /// the transaction, so two concurrent unlinks cannot leave an account with none), and in
    /// the same transaction ends the account's sessions that signed in with that provider,
    /// all but `sparing` (a session family: the caller's own).
    func deleteLink(uid: String, providerId: String, sparing: String?) async throws -> UnlinkOutcome
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
    /// Saves a pending credential.
    func insertPendingCredential(_ credential: PendingCredentialRecord) async throws
    /// Deletes and returns the pending credential with this hash if it has not expired.
    func takePendingCredential(tokenHash: String, now: Date) async throws -> PendingCredentialRecord?
    /// The pending credential with this hash if it has not expired, left in place.
    func pendingCredential(tokenHash: String, now: Date) async throws -> PendingCredentialRecord?
    /// The uids of accounts with a linked identity whose profile email is `email` (compared
    /// case-insensitively, whole address), oldest link first, at most `limit`.
    func uids(email: String, limit: Int) async throws -> [String]
    /// Disables or enables an account; disabling ends its sessions in the same transaction
    /// (those of an account already disabled too); whether the flag changed, or that there is
    /// no such account.
    func setDisabled(uid: String, disabled: Bool) async throws -> FlagChange
    /// Up to `limit` uids of accounts that `search` finds, in uid order (byte order) after the
    /// uid `after`: a stable cursor for operators' paging.
    func searchAccounts(_ search: AccountSearch, after: String?, limit: Int) async throws -> [String]
    /// Replaces an account's custom claims (with a basis, only while the account holds exactly
    /// it, else `StorageError.changedMeanwhile`): `.unchanged`, nothing written and no event
    /// recorded, when it holds exactly the replacement already; `.notFound` when there is no
    /// such account.
    func setCustomClaims(uid: String, _ claims: ClaimsReplacement) async throws -> FlagChange
}

/// A new value of an account's custom claims: the serialized JSON object, or `nil` to clear.
public struct ClaimsReplacement: Sendable, Equatable {
    /// What the replacement may overwrite.
    public enum Basis: Sendable, Equatable {
        /// Whatever is stored (a service's or an operator's replacement: the newest wins).
        case any
        /// Only exactly these stored claims (`nil`: none), the ones the replacement was computed
        /// from; otherwise the write throws `StorageError.changedMeanwhile` and commits nothing.
        case exactly(Data?)
    }

    /// What to store.
    public var stored: Data?
    /// What it may overwrite.
    public var basis: Basis

    /// Stores `stored` (`nil` clears) over whatever is stored.
    public init(stored: Data?) {
        self.stored = stored
        self.basis = .any
    }

    /// Stores `stored` only while the account holds `basis` (`nil`: no claims): a hook's answer,
    /// computed from the claims it was sent, must not undo a change made while it was asked.
    public init(stored: Data?, basis: Data?) {
        self.stored = stored
        self.basis = .exactly(basis)
    }
}

/// The writes without the one-account-per-email check, as the stores' tests use them (behind
/// `@_spi(Testing)`, so no other caller can skip the check by leaving the argument out); the
/// gateway's services pass `exclusiveEmail` from their setting.
@_spi(Testing)
extension AccountStore {
    /// Replaces a link's profile snapshot and tokens.
    public func updateLink(_ link: ProviderLinkRecord) async throws {
        try await updateLink(link, consumingPending: nil, replacingClaims: nil, exclusiveEmail: false, keepingTokens: false)
    }

    /// Replaces a link's profile snapshot and tokens, consuming a pending credential.
    public func updateLink(_ link: ProviderLinkRecord, consumingPending: String?) async throws {
        try await updateLink(link, consumingPending: consumingPending, replacingClaims: nil, exclusiveEmail: false, keepingTokens: false)
    }

    /// Replaces a link's profile snapshot and tokens, consuming a pending credential and
    /// replacing the account's claims.
    public func updateLink(_ link: ProviderLinkRecord, consumingPending: String?, replacingClaims: ClaimsReplacement?) async throws {
        try await updateLink(link, consumingPending: consumingPending, replacingClaims: replacingClaims, exclusiveEmail: false, keepingTokens: false)
    }

    /// Replaces a link's profile snapshot and verified email only.
    public func updateLinkProfile(
        providerId: String, federatedId: String, uid: String, profileJSON: Data, verifiedEmail: String?, at date: Date
    ) async throws {
        try await updateLinkProfile(
            providerId: providerId, federatedId: federatedId, uid: uid, profileJSON: profileJSON, verifiedEmail: verifiedEmail, at: date,
            exclusiveEmail: false)
    }

    /// Records a sign-in, replacing the account's claims when given.
    public func recordSignIn(link: ProviderLinkRecord, at date: Date, replacingClaims: ClaimsReplacement?) async throws {
        try await recordSignIn(link: link, at: date, replacingClaims: replacingClaims, exclusiveEmail: false, keepingTokens: false)
    }

    /// Creates an account with its first link, whatever other accounts' addresses.
    public func createAccount(_ account: AccountRecord, firstLink: ProviderLinkRecord) async throws {
        try await createAccount(account, firstLink: firstLink, exclusiveEmail: false)
    }

    /// Adds a link to an existing account, whatever other accounts' addresses (see
    /// `addLink(_:consumingPending:replacingClaims:exclusiveEmail:)`).
    public func addLink(_ link: ProviderLinkRecord) async throws {
        try await addLink(link, consumingPending: nil, replacingClaims: nil, exclusiveEmail: false)
    }

    /// Adds a link to an existing account, consuming a pending credential.
    public func addLink(_ link: ProviderLinkRecord, consumingPending: String?) async throws {
        try await addLink(link, consumingPending: consumingPending, replacingClaims: nil, exclusiveEmail: false)
    }

    /// Adds a link to an existing account, consuming a pending credential and replacing the
    /// account's claims, whatever other accounts' addresses.
    public func addLink(_ link: ProviderLinkRecord, consumingPending: String?, replacingClaims: ClaimsReplacement?) async throws {
        try await addLink(link, consumingPending: consumingPending, replacingClaims: replacingClaims, exclusiveEmail: false)
    }

    /// Records a sign-in without touching the custom claims.
    public func recordSignIn(link: ProviderLinkRecord, at date: Date) async throws {
        try await recordSignIn(link: link, at: date, replacingClaims: nil, exclusiveEmail: false, keepingTokens: false)
    }
}
