import Foundation

/// Accounts and their provider links, the way Firebase Authentication keeps them: the first
/// sign-in creates the account, later ones update the link's profile and tokens; further
/// providers are linked, one account per verified email, pending credentials, unlink, delete.
public struct AccountService: Sendable {
    let storage: any GatehouseStorage
    let vault: TokenVault
    /// Where the profiles' photos are fetched, under the gateway's public URL.
    let photoURLs: PhotoURLs
    /// Firebase's "one account per email address".
    var oneAccountPerEmail = true
    /// How long a pending credential can be claimed.
    var pendingLifetime: TimeInterval = 600
    /// Where the time comes from.
    var clock: any GatehouseClock = SystemClock()
    /// Where account creation, linking, unlinking, re-authentication and deletion are recorded.
    var audit = AuditLog.disabled
    /// The app's blocking hooks, asked after every read and check and before any write.
    var hooks: any SignInHooks = NoSignInHooks()
    /// The webhook events each write records in its own transaction.
    var events = EventRecorder.disabled
    /// The custom claim that makes an account a console operator (`GATEHOUSE_ADMIN_CLAIM`),
    /// console on or off: only an operator or an `admin` key may change its value.
    var operatorClaim: String?
    /// The scopes granted by each stored token set, by its sealed form: opened once, not on
    /// every profile read (a new grant is a new sealed value, so nothing goes stale).
    let grantedScopes = RecentValues<String, [String]>(capacity: 8192)

    /// What a sign-in did.
    public struct SignIn: Sendable {
        /// The account signed in to.
        public var account: AccountRecord
        /// Its unified profile after the sign-in.
        public var profile: UnifiedProfile
        /// Whether the account was created now.
        public var isNewUser: Bool
        /// The claims a hook added to this sign-in's tokens only.
        public var sessionClaims: CustomClaims? = nil
    }

    /// Finds the account linked to this identity or creates one. Two simultaneous first
    /// sign-ins of one identity cannot create two accounts: the database's uniqueness rule
    /// decides, and the loser retries as a returning user. A new identity whose verified
    /// email belongs to an existing account is parked as a pending credential instead
    /// (`account-exists-with-different-credential`); the store checks the address again in the
    /// account's transaction, so of two such sign-ins at once the second is parked too.
    ///
    /// A new account is asked of the `before-create` hook, then of `before-sign-in`; a returning
    /// one of `before-sign-in`: both after every read and check, before anything is written.
    /// A parked credential asks no hook (nothing of an account changes): its claim does.
    public func signIn(profile: ProviderProfile, tokens: ProviderTokens, origin: SignInOrigin) async throws -> SignIn {
        let now = clock.now()
        for _ in 0..<3 {
            if let link = try await storage.link(providerId: profile.providerId, federatedId: profile.federatedId) {
                do {
                    return try await refreshLink(link, profile: profile, tokens: tokens, at: now, mode: .signIn, origin: origin)
                } catch StorageError.linkGone {
                    // Unlinked while the hook was asked: the identity is no longer this
                    // account's way in. Decided again as the identity stands now.
                    continue
                }
            }
            let verifiedEmail = EmailAddress.verified(of: profile)
            if oneAccountPerEmail, let verifiedEmail, let owner = try await storage.uids(verifiedEmail: verifiedEmail, limit: 1).first {
                // The address may be this very identity's, linked by a concurrent first sign-in
                // since the lookup above (account, link and email are written together): then
                // this is a returning user.
                if try await storage.link(providerId: profile.providerId, federatedId: profile.federatedId) != nil { continue }
                let pending = try await park(profile: profile, tokens: tokens, for: owner)
                throw GatehouseError.accountExistsWithDifferentCredential(email: profile.email ?? verifiedEmail, pendingToken: pending)
            }
            var account = AccountRecord(uid: Self.newUID(), createdAt: now, lastSignInAt: now)
            let allowance = try await askNew(account: account, profile: profile, origin: origin)
            account.customClaims = allowance.customClaims?.stored
            do {
                // The answer is built before the commit: after it, nothing is left to fail.
                let first = try await newLink(uid: account.uid, profile: profile, tokens: tokens, at: now)
                var answer = try await SignIn(account: account, profile: unifiedProfile(for: account, links: [first]), isNewUser: true)
                answer.sessionClaims = allowance.sessionClaims
                try await events.recording([.account(.accountCreated, uid: account.uid, at: now, ["providerId": .string(profile.providerId)])]) {
                    try await storage.createAccount(account, firstLink: first, exclusiveEmail: oneAccountPerEmail)
                }
                audit.record(.accountCreated, by: .user(account.uid), uid: account.uid, provider: profile.providerId)
                if !(allowance.customClaims?.isEmpty ?? true) {
                    audit.record(.claimsUpdated, by: .hook, uid: account.uid)
                }
                return answer
            } catch StorageError.conflict {
                continue  // someone else created it a moment ago: sign in to theirs
            }
        }
        throw GatehouseError.internalError()
    }

    /// `mode=link`: adds the identity to the signed-in account. Already on this account: its
    /// tokens are refreshed. On another account: `credential-already-in-use` with a pending
    /// token for that account's owner. Another identity of the same provider here:
    /// `provider-already-linked`.
    public func link(uid: String, profile: ProviderProfile, tokens: ProviderTokens, origin: SignInOrigin) async throws -> SignIn {
        // The flow's own tokens are the newest there are: they replace any the link holds.
        let grant = SealedGrant(sealed: try await seal(tokens, for: profile), isEmpty: tokens.accessToken.isEmpty, obtainedAt: .distantFuture)
        return try await attach(uid: uid, profile: profile, grant: grant, origin: origin) { owner in
            try await park(profile: profile, tokens: tokens, for: owner)
        }
    }

    /// `mode=reauthenticate`: the identity must already be linked to the signed-in account
    /// (else `user-mismatch`); its stored tokens and profile are refreshed.
    public func reauthenticate(uid: String, profile: ProviderProfile, tokens: ProviderTokens, origin: SignInOrigin) async throws -> SignIn {
        guard let link = try await storage.link(providerId: profile.providerId, federatedId: profile.federatedId), link.uid == uid else {
            throw GatehouseError.userMismatch(
                "The re-authentication signed in a different \(profile.providerId) user than the one linked to this account.")
        }
        let answer: SignIn
        do {
            answer = try await refreshLink(link, profile: profile, tokens: tokens, at: clock.now(), mode: .reauthenticate, origin: origin)
        } catch StorageError.linkGone {
            throw GatehouseError.providerNotLinked(profile.providerId)  // unlinked while the hook was asked
        }
        audit.record(.reauthenticated, by: .user(uid), uid: uid, provider: profile.providerId)
        return answer
    }

    /// `POST /v1/auth/link {"pendingToken"}`: links a parked credential to the signed-in
    /// account, which must be the one it was parked for, by a sign-in made after it was
    /// parked (proof of fresh control: an old stolen session cannot collect it).
    ///
    /// The credential is read, checked, and consumed by the same transaction that adds the
    /// link: a refused claim leaves it untouched for its owner, and a store error leaves it
    /// claimable.
    /// The claim is a link: the `before-sign-in` hook is asked (flow `pending-credential`).
    public func claimPending(uid: String, pendingToken: String, signedInAt: Date, client: SignInClient) async throws -> SignIn {
        let tokenHash = SecureRandom.digest(pendingToken)
        guard !pendingToken.isEmpty, pendingToken.utf8.count <= 128,
            let pending = try await storage.pendingCredential(tokenHash: tokenHash, now: clock.now())
        else { throw GatehouseError.invalidPendingToken() }
        guard pending.targetUid == uid else {
            throw GatehouseError.userMismatch("The pending credential belongs to another account: sign in to that account first.")
        }
        // Pending credentials record when they expire; they were issued one lifetime before.
        guard signedInAt >= pending.expiresAt.addingTimeInterval(-pendingLifetime) else {
            throw GatehouseError.requiresRecentLogin(
                detail: "Sign in again with a method of this account: a pending credential is claimed only by a sign-in made after it was issued.")
        }
        let profile = try pending.profile()
        let grant = SealedGrant(
            sealed: pending.sealedTokens, isEmpty: try await holdsNoGrant(pending),
            obtainedAt: pending.expiresAt.addingTimeInterval(-pendingLifetime))
        do {
            return try await attach(
                uid: uid, profile: profile, grant: grant, origin: SignInOrigin(client: client, flow: .pendingCredential),
                consumingPending: tokenHash
            ) { _ in nil }
        } catch StorageError.pendingGone {
            // Two claims at once: the one that consumed it linked; this one wrote nothing.
            throw GatehouseError.invalidPendingToken()
        }
    }

    /// Removes a provider from the account (never the last one); its stored tokens are
    /// destroyed with the link and the provider grant is revoked where possible. The sessions
    /// that signed in with it end, all but `sparing` (the caller's own session family): an
    /// identity someone else linked (with a stolen session) and the owner removes takes the
    /// sessions it opened with it. Answers the account's unified profile without it, built
    /// from what was read before the commit. `actor` is the audit's (the user by default; an
    /// operator's key for the admin route).
    public func unlink(
        uid: String, providerId: String, providers: ProviderRegistry, sparing: String? = nil, by actor: AuditActor? = nil
    ) async throws -> UnifiedProfile {
        guard let account = try await storage.account(uid: uid) else { throw GatehouseError.userNotFound() }
        // An operator (`actor`) unlinks from a disabled account too: removing an identity an
        // attacker linked must not need the account enabled, which would let it sign in.
        if account.disabled, actor == nil { throw GatehouseError.userDisabled() }
        let remaining = try await storage.links(uid: uid).filter { $0.providerId != providerId }
        let answer = try await unifiedProfile(for: account, links: remaining)
        let unlinked = WebhookEvent.account(.providerUnlinked, uid: uid, at: clock.now(), ["providerId": .string(providerId)])
        switch try await events.recording([unlinked], { try await storage.deleteLink(uid: uid, providerId: providerId, sparing: sparing) }) {
        case .deleted(let link):
            audit.record(.providerUnlinked, by: actor ?? .user(uid), uid: uid, provider: providerId)
            await revokeGrants([link], providers: providers)
            return answer
        case .notLinked:
            throw GatehouseError.providerNotLinked(providerId)
        case .lastLink:
            throw GatehouseError.operationNotAllowed("The last sign-in method of an account cannot be unlinked; delete the account instead.")
        }
    }

    /// Deletes the account with its links, sessions and tokens, then revokes the grants.
    /// `actor` is the audit's (the user by default; an operator's key for the admin route).
    public func delete(uid: String, providers: ProviderRegistry, by actor: AuditActor? = nil) async throws {
        let deleted = WebhookEvent.account(.accountDeleted, uid: uid, at: clock.now())
        guard let links = try await events.recording([deleted], { try await storage.deleteAccount(uid: uid) }) else {
            throw GatehouseError.userNotFound()
        }
        audit.record(.accountDeleted, by: actor ?? .user(uid), uid: uid)
        await revokeGrants(links, providers: providers)
    }

    /// Sign-in methods (provider ids) of the accounts holding this verified email.
    public func signInMethods(email: String) async throws -> [String] {
        guard let normalized = EmailAddress.normalized(email) else { throw GatehouseError.invalidArgument("email must be an email address.") }
        var methods: [String] = []
        for uid in try await storage.uids(verifiedEmail: normalized, limit: 10) {
            for link in try await storage.links(uid: uid) where !methods.contains(link.providerId) { methods.append(link.providerId) }
        }
        return methods
    }

    /// Best effort: the account or link is already gone, so a provider failing to revoke
    /// must not bring it back; the stored tokens are destroyed either way.
    private func revokeGrants(_ links: [ProviderLinkRecord], providers: ProviderRegistry) async {
        for link in links {
            guard let provider = try? providers.provider(link.providerId), let tokens = try? await vault.tokens(of: link) else { continue }
            try? await provider.revokeGrant(tokens: tokens)
        }
    }

    /// Links an identity (with already sealed tokens) to `uid`; `onElsewhere` may park a
    /// pending credential for the other account's owner when the identity is taken.
    /// The answer is built from what was read before the commit, so a store error means
    /// nothing was written.
    private func attach(
        uid: String, profile: ProviderProfile, grant: SealedGrant, origin: SignInOrigin, consumingPending: String? = nil,
        onElsewhere: (String) async throws -> String?
    ) async throws -> SignIn {
        try await redoingIfClaimsChanged {
            try await attachOnce(
                uid: uid, profile: profile, grant: grant, origin: origin, consumingPending: consumingPending, onElsewhere: onElsewhere)
        }
    }

    /// `profile` as a link of `uid` may keep it: with one account per verified email, an
    /// address that another account holds verified stays unverified here, so that it names one
    /// account (its console rights by email, the ID token's `email_verified`). A returning
    /// sign-in or a live profile may report such an address; a new link is refused instead
    /// (`email-already-in-use`). The link's `recorded` verified email was checked when it was
    /// written, so a profile that reports it again costs no look-up.
    public func keepingEmailsUnique(_ profile: ProviderProfile, for uid: String, recorded: String?) async throws -> ProviderProfile {
        guard EmailAddress.verified(of: profile) != recorded, try await emailHeldElsewhere(profile, besides: uid) else { return profile }
        var kept = profile
        kept.emailVerified = false
        return kept
    }

    /// Whether, with one account per verified email, another account than `uid` holds the
    /// verified email `profile` reports.
    private func emailHeldElsewhere(_ profile: ProviderProfile, besides uid: String) async throws -> Bool {
        guard oneAccountPerEmail, let email = EmailAddress.verified(of: profile) else { return false }
        return try await storage.uids(verifiedEmail: email, limit: 2).contains { $0 != uid }
    }

    /// `attach`, from one reading of the account.
    private func attachOnce(
        uid: String, profile: ProviderProfile, grant: SealedGrant, origin: SignInOrigin, consumingPending: String?,
        onElsewhere: (String) async throws -> String?
    ) async throws -> SignIn {
        let now = clock.now()
        for _ in 0..<2 {
            // Read on each pass: the one before may have taken a hook's claims into it that
            // were never stored (its write found the link gone).
            guard var account = try await storage.account(uid: uid) else { throw GatehouseError.userNotFound() }
            if account.disabled { throw GatehouseError.userDisabled() }
            let links = try await storage.links(uid: uid)
            if var existing = try await storage.link(providerId: profile.providerId, federatedId: profile.federatedId) {
                guard existing.uid == uid else { throw GatehouseError.credentialAlreadyInUse(pendingToken: try await onElsewhere(existing.uid)) }
                let profile = try await keepingEmailsUnique(profile, for: uid, recorded: existing.verifiedEmail)
                let allowance = try await askExisting(account: account, links: links, profile: profile, mode: .link, origin: origin)
                let replacing = claimsReplacement(allowance, of: &account)
                let before = existing
                let profileChanged = (try? existing.profile()) != profile
                existing.profileJSON = try ProfileSnapshot.encode(profile)
                let replacesGrant = grant.replaces(existing)
                if replacesGrant { existing.sealedTokens = grant.sealed }
                existing.verifiedEmail = EmailAddress.verified(of: profile)
                existing.updatedAt = now
                var answer = try await SignIn(
                    account: account, profile: unifiedProfile(for: account, links: Self.replacing(existing, in: links)), isNewUser: false)
                answer.sessionClaims = allowance.sessionClaims
                let recorded = await updateEvents(
                    uid: uid, providerId: profile.providerId, claimsChanged: replacing != nil, profileChanged: profileChanged,
                    restoring: replacesGrant ? before : nil, at: now)
                do {
                    try await refusingDisabled(recorded) {
                        try await storage.updateLink(
                            existing, consumingPending: consumingPending, replacingClaims: replacing, exclusiveEmail: oneAccountPerEmail,
                            keepingTokens: !replacesGrant)
                    }
                } catch StorageError.linkGone {
                    continue  // unlinked while the hook was asked: look again, it may be linked anew
                }
                if replacing != nil { audit.record(.claimsUpdated, by: .hook, uid: uid) }
                return answer
            }
            if links.contains(where: { $0.providerId == profile.providerId }) {
                throw GatehouseError.providerAlreadyLinked(profile.providerId)
            }
            if try await emailHeldElsewhere(profile, besides: uid) {
                // The address may be this very identity's, linked to another account since the
                // look-up above: then that is the answer (`credential-already-in-use`).
                if let other = try await storage.link(providerId: profile.providerId, federatedId: profile.federatedId) {
                    guard other.uid != uid else { continue }  // linked here meanwhile: look again
                    throw GatehouseError.credentialAlreadyInUse(pendingToken: try await onElsewhere(other.uid))
                }
                throw GatehouseError.emailAlreadyInUse(email: profile.email ?? "")
            }
            let allowance = try await askExisting(account: account, links: links, profile: profile, mode: .link, origin: origin)
            var updated = account
            let replacing = claimsReplacement(allowance, of: &updated)
            let link = ProviderLinkRecord(
                uid: uid, providerId: profile.providerId, federatedId: profile.federatedId,
                profileJSON: try ProfileSnapshot.encode(profile), sealedTokens: grant.sealed, linkedAt: now, updatedAt: now,
                verifiedEmail: EmailAddress.verified(of: profile))
            var answer = try await SignIn(account: updated, profile: unifiedProfile(for: updated, links: links + [link]), isNewUser: false)
            answer.sessionClaims = allowance.sessionClaims
            var recorded = [WebhookEvent.account(.providerLinked, uid: uid, at: now, ["providerId": .string(profile.providerId)])]
            if replacing != nil { recorded.append(.account(.accountUpdated, uid: uid, at: now, ["changes": .array([.string("customClaims")])])) }
            do {
                try await refusingDisabled(recorded) {
                    try await storage.addLink(
                        link, consumingPending: consumingPending, replacingClaims: replacing, exclusiveEmail: oneAccountPerEmail)
                }
                audit.record(.providerLinked, by: .user(uid), uid: uid, provider: profile.providerId)
                if replacing != nil { audit.record(.claimsUpdated, by: .hook, uid: uid) }
                return answer
            } catch StorageError.conflict {
                continue  // a concurrent link won: look again to say which rule it broke
            }
        }
        throw GatehouseError.credentialAlreadyInUse(pendingToken: nil)
    }

    /// A returning identity: new profile snapshot and tokens, last sign-in moved.
    private func refreshLink(
        _ link: ProviderLinkRecord, profile: ProviderProfile, tokens: ProviderTokens, at now: Date, mode: SignInMode, origin: SignInOrigin
    ) async throws -> SignIn {
        var current = link
        var again = false
        return try await redoingIfClaimsChanged {
            // Decided again from the link as the store holds it: the write may have failed on
            // the link itself (an address another account took while it was read elsewhere).
            if again {
                guard let fresh = try await storage.link(providerId: link.providerId, federatedId: link.federatedId), fresh.uid == link.uid
                else { throw StorageError.linkGone }
                current = fresh
            }
            again = true
            return try await refreshLinkOnce(current, profile: profile, tokens: tokens, at: now, mode: mode, origin: origin)
        }
    }

    /// Runs a sign-in's write (`body`: read the account, ask the hook, write) a second time
    /// when the account's claims changed while the hook was asked: the hook's claims are
    /// stored only over the claims it was sent (`ClaimsReplacement.basis`), so a change a
    /// service made meanwhile is not undone; asked again, the hook sees it. The same holds
    /// when another account took the verified address the write would record (read again, it
    /// is kept unverified). A second change in that time is `storage-unavailable` (retryable,
    /// nothing stored).
    private func redoingIfClaimsChanged(_ body: () async throws -> SignIn) async throws -> SignIn {
        do {
            return try await body()
        } catch StorageError.changedMeanwhile {}
        do {
            return try await body()
        } catch StorageError.changedMeanwhile {
            throw GatehouseError(
                code: .storageUnavailable,
                detail: "The account's claims or a linked address changed twice while it was written; nothing was stored: try again.",
                retryAfter: 1)
        }
    }

    /// A sign-in's write with its events: an account disabled since it was read (while the
    /// hook was asked) is `user-disabled`, and the store wrote nothing.
    private func refusingDisabled(_ recorded: [WebhookEvent], _ write: () async throws -> Void) async throws {
        do {
            try await events.recording(recorded, write)
        } catch StorageError.accountDisabled {
            throw GatehouseError.userDisabled()
        }
    }

    /// `refreshLink`, from one reading of the account.
    private func refreshLinkOnce(
        _ link: ProviderLinkRecord, profile: ProviderProfile, tokens: ProviderTokens, at now: Date, mode: SignInMode, origin: SignInOrigin
    ) async throws -> SignIn {
        var link = link
        guard var account = try await storage.account(uid: link.uid) else { throw GatehouseError.userNotFound() }
        if account.disabled { throw GatehouseError.userDisabled() }
        let profile = try await keepingEmailsUnique(profile, for: link.uid, recorded: link.verifiedEmail)
        let current = try await storage.links(uid: account.uid)
        let allowance = try await askExisting(account: account, links: current, profile: profile, mode: mode, origin: origin)
        let replacing = claimsReplacement(allowance, of: &account)
        // An unchanged profile keeps its stored bytes (compared typed with the snapshot, which
        // is decoded once): encoding it on every returning sign-in was wasted work.
        let previous = link
        let profileChanged = (try? link.profile()) != profile
        if profileChanged { link.profileJSON = try ProfileSnapshot.encode(profile) }
        link.verifiedEmail = EmailAddress.verified(of: profile)
        // An ID-token sign-in brings no access token: the grant of an earlier code flow stays
        // as the store holds it (a refresh may have replaced the one read above).
        let keepingTokens = tokens.accessToken.isEmpty
        if !keepingTokens { link.sealedTokens = try await seal(tokens, for: profile) }
        link.updatedAt = now
        account.lastSignInAt = now
        let links = Self.replacing(link, in: current)
        var answer = try await SignIn(account: account, profile: unifiedProfile(for: account, links: links), isNewUser: false)
        answer.sessionClaims = allowance.sessionClaims
        let recorded = await updateEvents(
            uid: account.uid, providerId: profile.providerId, claimsChanged: replacing != nil, profileChanged: profileChanged,
            restoring: keepingTokens ? nil : previous, at: now)
        try await refusingDisabled(recorded) {
            try await storage.recordSignIn(
                link: link, at: now, replacingClaims: replacing, exclusiveEmail: oneAccountPerEmail, keepingTokens: keepingTokens)
        }
        if replacing != nil { audit.record(.claimsUpdated, by: .hook, uid: account.uid) }
        return answer
    }

    /// Replaces the account's custom claims (`PUT /v1/users/{uid}/claims`, the console).
    /// Unless `mayChangeOperatorClaim` (an operator, an `admin` key), a replacement that would
    /// change the operator claim's value is refused with `permission-denied`: a key that may
    /// label users must not make one an operator, who could then mint any key.
    /// The check and the write are one: the replacement is stored only over the claims that
    /// were checked (a grant or a removal made meanwhile is `storage-unavailable`, retryable).
    public func setCustomClaims(uid: String, _ claims: CustomClaims, by actor: AuditActor, mayChangeOperatorClaim: Bool) async throws {
        var replacement = ClaimsReplacement(stored: claims.stored)
        if !mayChangeOperatorClaim, let operatorClaim {
            guard let account = try await storage.account(uid: uid) else { throw GatehouseError.userNotFound() }
            replacement = ClaimsReplacement(stored: claims.stored, basis: account.customClaims)
            // So may no name a consumer comparing without case reads as the claim.
            let stored = CustomClaims(stored: account.customClaims)
            let names = [operatorClaim] + claims.readingAs(operatorClaim) + stored.readingAs(operatorClaim)
            guard names.allSatisfy({ stored.members[$0] == claims.members[$0] }) else {
                throw GatehouseError(
                    code: .permissionDenied,
                    detail:
                        "The claim \(operatorClaim.debugDescription) makes its account a console operator (GATEHOUSE_ADMIN_CLAIM): only an operator or a key with the admin scope may change it."
                )
            }
        }
        // A live session's own claims (a hook's sessionClaims, a restriction perhaps) are minted
        // beside the account's at every refresh and never dropped to make room: claims that
        // would not fit beside them are refused here rather than end that session. (Past the
        // limit of distinct ones, which no hook answering alike reaches, a session left out
        // refreshes no more: `GatewayTokenService` refuses to mint without its claims.)
        for stored in try await storage.sessionClaims(uid: uid, now: clock.now(), limit: 1000) {
            guard CustomClaims(stored: stored).merging(claims) != nil else {
                throw GatehouseError.invalidArgument(
                    "With the claims a live session of this account carries for itself, these would take more than \(CustomClaims.maximumBytes) bytes: make them smaller, or revoke that session first (POST /v1/users/{uid}/revoke-sessions)."
                )
            }
        }
        let updated = WebhookEvent.account(.accountUpdated, uid: uid, at: clock.now(), ["changes": .array([.string("customClaims")])])
        do {
            switch try await events.recording([updated], { try await storage.setCustomClaims(uid: uid, replacement) }) {
            case .notFound: throw GatehouseError.userNotFound()
            // The same claims again: nothing changed, so nothing to tell receivers or the audit trail.
            case .unchanged: return
            case .changed: break
            }
        } catch StorageError.changedMeanwhile {
            throw GatehouseError(
                code: .storageUnavailable, detail: "The account's claims changed while this change was checked; nothing was stored: try again.",
                retryAfter: 1)
        }
        audit.record(.claimsUpdated, by: actor, uid: uid)
    }

    /// The events of a write that refreshes a link: `account.updated` naming what changed, and
    /// `grant.restored` when the link's stored grant had died (`restoring`: the link as it
    /// was, when new tokens replace its grant).
    private func updateEvents(
        uid: String, providerId: String, claimsChanged: Bool, profileChanged: Bool, restoring: ProviderLinkRecord?, at now: Date
    ) async -> [WebhookEvent] {
        var recorded: [WebhookEvent] = []
        var changes: [JSONValue] = []
        if profileChanged { changes.append(.string("profile")) }
        if claimsChanged { changes.append(.string("customClaims")) }
        if !changes.isEmpty, events.wants(.accountUpdated) {
            recorded.append(.account(.accountUpdated, uid: uid, at: now, ["changes": .array(changes), "providerId": .string(providerId)]))
        }
        if let restoring, events.wants(.grantRestored), (try? await vault.tokens(of: restoring))?.reauthRequired == true {
            recorded.append(.account(.grantRestored, uid: uid, at: now, ["providerId": .string(providerId)]))
        }
        return recorded
    }

    /// The `before-create` hook, then `before-sign-in`, for an account not created yet.
    private func askNew(account: AccountRecord, profile: ProviderProfile, origin: SignInOrigin) async throws -> HookAllowance {
        guard hooks.asks(.beforeCreate) || hooks.asks(.beforeSignIn) else { return .nothing }
        var subject = HookRequest.Account(
            uid: nil, email: profile.email, emailVerified: profile.emailCountsAsVerified, displayName: profile.displayName,
            providers: [profile.providerId], customClaims: [:], isNew: true)
        let data = { (subject: HookRequest.Account) in
            HookRequest.Payload(
                account: subject, profile: HookRequest.Profile(profile), idTokenClaims: origin.idTokenClaims,
                context: Self.context(profile.providerId, .signIn, origin))
        }
        let created = try await hooks.ask(.beforeCreate, data(subject))
        // before-sign-in sees the claims before-create chose, as the account will hold them.
        if let claims = created.customClaims { subject.customClaims = claims.members }
        let both = created.then(try await hooks.ask(.beforeSignIn, data(subject)))
        // Each answer was checked alone; their session claims add up.
        if both.tokenClaimsSize > CustomClaims.maximumBytes {
            return try hooks.unusable(
                .beforeSignIn,
                reason:
                    "the claims of before-create and before-sign-in together take \(both.tokenClaimsSize) bytes serialized; at most \(CustomClaims.maximumBytes)"
            )
        }
        return both
    }

    /// The `before-sign-in` hook for an existing account as it is now.
    private func askExisting(
        account: AccountRecord, links: [ProviderLinkRecord], profile: ProviderProfile, mode: SignInMode, origin: SignInOrigin
    ) async throws -> HookAllowance {
        guard hooks.asks(.beforeSignIn) else { return .nothing }
        let unified = UnifiedProfile.build(
            account: account, profiles: try links.map { try $0.profile() }, photoBaseURL: photoBaseURL(uid: account.uid, for: .signedInUser))
        let subject = HookRequest.Account(
            uid: account.uid, email: unified.email, emailVerified: unified.emailVerified, displayName: unified.displayName,
            providers: links.map(\.providerId), customClaims: unified.customClaims, isNew: false)
        return try await hooks.ask(
            .beforeSignIn,
            HookRequest.Payload(
                account: subject, profile: HookRequest.Profile(profile), idTokenClaims: origin.idTokenClaims,
                context: Self.context(profile.providerId, mode, origin)))
    }

    /// The hook request's context.
    private static func context(_ providerId: String, _ mode: SignInMode, _ origin: SignInOrigin) -> HookRequest.Context {
        HookRequest.Context(
            providerId: providerId, mode: mode, flow: origin.flow, clientAddress: origin.client.address, userAgent: origin.client.userAgent,
            returnToOrigin: origin.returnToOrigin, platform: origin.platform)
    }

    /// The replacement of `account`'s claims a hook's answer asks for (applied to `account`),
    /// or `nil` when it asks for none or for the claims the account already holds. It is
    /// written only over the claims the hook was sent (see `redoingIfClaimsChanged`).
    private func claimsReplacement(_ allowance: HookAllowance, of account: inout AccountRecord) -> ClaimsReplacement? {
        guard let claims = allowance.customClaims, claims != CustomClaims(stored: account.customClaims) else { return nil }
        let sent = account.customClaims
        account.customClaims = claims.stored
        return ClaimsReplacement(stored: claims.stored, basis: sent)
    }

    /// `links` with the one of `link`'s identity replaced by `link`: the links as they will be
    /// once a write commits, for an answer built before it.
    static func replacing(_ link: ProviderLinkRecord, in links: [ProviderLinkRecord]) -> [ProviderLinkRecord] {
        links.map { $0.providerId == link.providerId && $0.federatedId == link.federatedId ? link : $0 }
    }

    /// Parks the credential for `owner`; returns the pending token (only its hash is stored).
    private func park(profile: ProviderProfile, tokens: ProviderTokens, for owner: String) async throws -> String {
        let token = SecureRandom.token()
        try await storage.insertPendingCredential(
            PendingCredentialRecord(
                tokenHash: SecureRandom.digest(token), targetUid: owner, providerId: profile.providerId, federatedId: profile.federatedId,
                profileJSON: try ProfileSnapshot.encode(profile), sealedTokens: try await seal(tokens, for: profile),
                verifiedEmail: EmailAddress.verified(of: profile), expiresAt: clock.now().addingTimeInterval(pendingLifetime)))
        return token
    }

    private func newLink(uid: String, profile: ProviderProfile, tokens: ProviderTokens, at now: Date) async throws -> ProviderLinkRecord {
        ProviderLinkRecord(
            uid: uid, providerId: profile.providerId, federatedId: profile.federatedId, profileJSON: try ProfileSnapshot.encode(profile),
            sealedTokens: try await seal(tokens, for: profile), linkedAt: now, updatedAt: now, verifiedEmail: EmailAddress.verified(of: profile))
    }

    /// Who reads a unified profile, which decides where its photo URLs point.
    public enum ProfileReader: Sendable {
        /// The signed-in user (`/v1/me`, the ID token's `picture`): `/v1/me/photo`, which
        /// answers for whoever's credential comes with the request.
        case signedInUser
        /// A service or an operator (`/v1/users…`, `/v1/admin/users`): `/v1/users/{uid}/photo`,
        /// which names the account. `/v1/me/photo` in a list of users would show a browser
        /// its own user's photo for each of them.
        case service
    }

    /// Where the photo of `uid`'s profile is fetched by `reader`.
    func photoBaseURL(uid: String, for reader: ProfileReader) -> String {
        photoURLs.base(uid: uid, for: reader)
    }

    /// The unified profile of an account from its links' stored snapshots, as `reader` reads it.
    public func unifiedProfile(for account: AccountRecord, reader: ProfileReader = .signedInUser) async throws -> UnifiedProfile {
        try await unifiedProfile(for: account, links: try await storage.links(uid: account.uid), reader: reader)
    }

    /// The unified profile from links already read, with each link's granted scopes.
    func unifiedProfile(for account: AccountRecord, links: [ProviderLinkRecord], reader: ProfileReader = .signedInUser) async throws
        -> UnifiedProfile
    {
        var profile = UnifiedProfile.build(
            account: account, profiles: try links.map { try $0.profile() }, photoBaseURL: photoBaseURL(uid: account.uid, for: reader))
        for (index, link) in links.enumerated() where index < profile.providers.count {
            profile.providers[index].scopes = await scopes(of: link)
        }
        return profile
    }

    /// The scopes the link's stored grant holds; none when it holds no tokens (an ID-token
    /// sign-in) or they do not open (a removed key: the profile still answers).
    private func scopes(of link: ProviderLinkRecord) async -> [String] {
        if let known = grantedScopes.value(for: link.sealedTokens) { return known }
        let scopes = (try? await vault.tokens(of: link))?.scopes ?? []
        grantedScopes.insert(scopes, for: link.sealedTokens)
        return scopes
    }

    /// Seals tokens for the link of `profile`'s identity.
    private func seal(_ tokens: ProviderTokens, for profile: ProviderProfile) async throws -> String {
        try await vault.seal(tokens, providerId: profile.providerId, federatedId: profile.federatedId)
    }

    /// 28 random base62-ish characters, like Firebase uids.
    static func newUID() -> String {
        String(SecureRandom.token(byteCount: 21).replacingOccurrences(of: "-", with: "").replacingOccurrences(of: "_", with: "").prefix(28))
    }
}
