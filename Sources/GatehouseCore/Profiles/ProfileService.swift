import Foundation
import Logging

/// Profiles and photos, for the signed-in user's routes and for internal services: unified
/// profile, one provider's live profile, photo — cached, behind each provider's circuit
/// breaker, served stale when a provider fails and the cache still has an answer.
///
/// A class: the routes, the passthrough and the photo answers' byte counter share it by one
/// reference, so that a pass or a capture does not retain each of its twenty, and its async
/// methods' frames (which a connection's task keeps while it is open) hold that reference
/// rather than a copy of the whole service.
public final class ProfileService: Sendable {
    let storage: any GatehouseStorage
    let providers: ProviderRegistry
    let accounts: AccountService
    /// Opens and seals the links' provider tokens.
    let vault: TokenVault
    let refresher = TokenRefresher()
    /// Token sets opened lately, by their sealed form, with when: a passthrough call or a
    /// profile fetch does not decrypt the same grant again within `decryptedTokenLifetime`.
    /// A refresh, a sign-in or a key rotation writes a new sealed form, so nothing stale is served.
    let openedTokenSets = RecentValues<String, (tokens: ProviderTokens, openedAt: Date)>(capacity: 4096)
    /// How long an opened token set is kept (0: never).
    let decryptedTokenLifetime: TimeInterval
    let profileCache: ExpiringCache<ProviderProfile>
    /// The live profiles' budget, in `ProviderProfile.approximateBytes`: a profile weighs a few
    /// KB, so thousands fit, and users whose provider answers the most it may (userinfo up to
    /// 256 KB each) cannot make the cache hold more.
    static let profileCacheBytes = 32 << 20
    let photoCache: ExpiringCache<Photo>
    /// Photo sources that just failed, by the same key: answered from here, not fetched again.
    let photoFailures: ExpiringCache<GatehouseError>
    /// Photo transfers in progress, joined by concurrent misses.
    let photoDownloads = PhotoDownloads()
    /// One circuit breaker per provider.
    let circuits: ProviderCircuits
    /// How a whole photo's bytes are kept (`GatewayConfiguration.photoBytes`).
    let photoBytes: @Sendable ([[UInt8]]) -> any PhotoBytes
    /// Which providers' photos `/photo` prefers when the caller names none.
    let photoProviderOrder: [String]
    /// Refresh counters (the caches and breakers record their own).
    let metrics: GatehouseMetrics
    /// Where the time comes from.
    let clock: any GatehouseClock
    /// Tokens a refresh got whose write failed, by grant, with the sealed tokens they replace:
    /// the provider may have spent the refresh token the store still holds (rotation), so the
    /// grant's next refresh uses these and writes them instead of sending that token again.
    /// Process-local and bounded: another instance, or a restart, still meets the spent token.
    let unwrittenTokens = RecentValues<String, (replacing: String, tokens: ProviderTokens)>(capacity: 10_000)
    /// Writes of refreshed tokens are tried this many times before they are kept in memory.
    static let tokenWriteAttempts = 3
    /// When the provider last refused a grant's token on one call (a passthrough template,
    /// `profile`, `photo`) as soon as a refresh had got that token for a refusal of the one
    /// before: by grant and call. That call refuses the grant for another reason than its
    /// tokens' age (its own resource, a policy), so for `refusalRefreshInterval` its refusals are
    /// the caller's at once, whatever token it was sent: another refresh would only rotate the
    /// user's tokens and spend the app's token-endpoint budget. Process-local and bounded: each
    /// instance refreshes a grant for one call's refusal at most once per interval.
    let refusedAfterRefresh = RecentValues<String, Date>(capacity: 10_000)
    /// How long a call that refused a grant's fresh token is not refreshed for.
    static let refusalRefreshInterval: TimeInterval = 60
    let logger: Logger

    /// Built by `Gatehouse` from the deployment's settings.
    init(
        storage: any GatehouseStorage, providers: ProviderRegistry, accounts: AccountService, vault: TokenVault,
        configuration: GatewayConfiguration, metrics: GatehouseMetrics, logger: Logger
    ) {
        self.logger = logger
        self.storage = storage
        self.vault = vault
        self.providers = providers
        self.accounts = accounts
        self.metrics = metrics
        self.clock = configuration.clock
        let lifetime = configuration.profileCacheLifetime
        profileCache = ExpiringCache(
            name: "profile", lifetime: lifetime, staleLifetime: configuration.staleIfError, capacity: Self.profileCacheBytes, metrics: metrics,
            clock: configuration.clock
        ) { $0.approximateBytes }
        photoCache = ExpiringCache(
            name: "photo", lifetime: lifetime, staleLifetime: configuration.staleIfError, capacity: configuration.photoCacheBytes,
            metrics: metrics, clock: configuration.clock
        ) { $0.bytes.storageBytes }
        photoFailures = ExpiringCache(
            name: "photo-failure", lifetime: configuration.photoFailureLifetime, capacity: 10_000, metrics: metrics, clock: configuration.clock
        ) { _ in 1 }
        circuits = ProviderCircuits(
            providerIds: providers.ids, settings: configuration.circuitBreaker, metrics: metrics, clock: configuration.clock)
        photoProviderOrder = configuration.photoProviderOrder
        photoBytes = configuration.photoBytes
        decryptedTokenLifetime = configuration.decryptedTokenLifetime
    }

    /// A value as the profile routes serve it: fresh, or from the cache after its provider
    /// failed (then `staleAge` says how old it is, for the `Age` and `Warning` headers).
    public struct Served<Value: Sendable>: Sendable {
        /// The profile or photo.
        public var value: Value
        /// Seconds since the value was fetched, when served stale; `nil` when fresh.
        public var staleAge: Int?
    }

    /// A photo as `/photo` serves it: whole from the cache, or streaming from the provider.
    public enum PhotoAnswer: Sendable {
        /// The whole image with its `ETag`, from the cache.
        case stored(Photo)
        /// A transfer whose head has arrived; its body streams to every caller.
        case downloading(PhotoDownload)
    }

    /// A photo ready to serve, with a strong `ETag`: from the provider's validator, else from
    /// its bytes (`ProviderPhoto.entityTag`).
    public struct Photo: Sendable {
        /// The image bytes, in the form `GatewayConfiguration.photoBytes` keeps them.
        public var bytes: any PhotoBytes
        /// The provider's image content type.
        public var contentType: String
        /// Its tag (`ProviderPhoto.entityTag`): from the provider's validator the same for a
        /// streamed and a cached answer; from the bytes, which only a cached answer carries.
        public var etag: String
    }

    /// Counts photo bytes sent to a caller (`gatehouse_photo_bytes_total`).
    public func countPhotoBytes(_ count: Int) {
        metrics.photoBytes(count)
    }

    /// The unified profile of an enabled account.
    public func me(uid: String) async throws -> UnifiedProfile {
        try await accounts.unifiedProfile(for: try await enabledAccount(uid))
    }

    /// Any account's unified profile, disabled ones included (internal services and admins),
    /// its photo URLs naming the account.
    public func profile(uid: String) async throws -> UnifiedProfile {
        guard let account = try await storage.account(uid: uid) else { throw GatehouseError.userNotFound() }
        return try await accounts.unifiedProfile(for: account, reader: .service)
    }

    /// The provider's profile fetched live with the stored token (cached for the configured
    /// lifetime; `refresh` bypasses the cache); the stored snapshot is updated on every fetch.
    ///
    /// The link is read first (from the account cache, which a change drops on every
    /// instance) and its identity is part of the cache key: a provider's profile is never
    /// served once that provider is unlinked, or the account deleted, anywhere.
    public func providerProfile(uid: String, providerId: String, refresh: Bool = false) async throws -> Served<ProviderProfile> {
        _ = try await enabledAccount(uid)
        let linked = try await link(uid: uid, providerId: providerId)
        let key = "\(uid)|\(providerId)|\(linked.federatedId)"
        return try await servingStale(profileCache, key: key) {
            try await profileCache.value(for: key, bypass: refresh) {
                try await self.fetchProviderProfile(uid: uid, providerId: providerId)
            }
        } stale: {
            $0
        }
    }

    private func fetchProviderProfile(uid: String, providerId: String) async throws -> ProviderProfile {
        var link = try await link(uid: uid, providerId: providerId)
        let snapshot = try link.profile()
        let provider = try providers.provider(providerId)
        var profile = try await circuits.run(providerId, caller: uid) {
            try await withFreshTokens(link, provider, for: "profile") { try await provider.fetchProfile(tokens: $0, previous: snapshot) }
        }
        guard profile.federatedId == link.federatedId else {
            throw GatehouseError.providerReauthRequired(providerId)
        }
        // The tenant is a fact of the link (the ID token's `tid` at sign-in); Graph's /me does
        // not repeat it.
        if profile.tenantId == nil { profile.tenantId = snapshot.tenantId }
        // Some proofs exist only at sign-in (Microsoft's xms_edov is an ID-token claim): an
        // address verified then stays verified while the provider still reports the same one,
        // unless the provider's answer itself says it is not (userinfo's `email_verified`).
        if !profile.emailVerified, let email = profile.email,
            snapshot.emailVerified, snapshot.email?.lowercased() == email.lowercased(),
            !provider.statesEmailVerification(in: profile)
        {
            profile.emailVerified = true
        }
        // Twice at most: a verified address another account took since it was read is found
        // taken by the write; the link is then read again from the store (the one above may
        // come from the account cache) and the address kept unverified.
        var stored = snapshot
        for attempt in 0..<2 {
            profile = try await accounts.keepingEmailsUnique(profile, for: link.uid, recorded: link.verifiedEmail)
            // The snapshot only: tokens are written by refreshes and sign-ins alone, so a refresh or
            // a key rotation that ran during this call is never undone by stale tokens. An unchanged
            // profile writes nothing (nor drops the account from the instances' caches); it is
            // compared typed with the stored one (decoded once), since encoding it on every live
            // fetch was a tenth of that route's CPU (perf, release build).
            let verifiedEmail = EmailAddress.verified(of: profile)
            guard profile != stored || verifiedEmail != link.verifiedEmail else { break }
            let updated = WebhookEvent.account(
                .accountUpdated, uid: link.uid, at: clock.now(), ["changes": .array([.string("profile")]), "providerId": .string(link.providerId)])
            do {
                try await accounts.events.recording([updated]) {
                    try await storage.updateLinkProfile(
                        providerId: link.providerId, federatedId: link.federatedId, uid: link.uid,
                        profileJSON: try ProfileSnapshot.encode(profile), verifiedEmail: verifiedEmail, at: clock.now(),
                        exclusiveEmail: accounts.oneAccountPerEmail)
                }
            } catch StorageError.linkGone {
                // Unlinked during the call: nothing stored, no event; the answer is what the
                // provider said while the identity was still linked.
            } catch StorageError.changedMeanwhile {
                guard attempt == 0 else {
                    throw GatehouseError(
                        code: .storageUnavailable, detail: "The linked address changed twice while the profile was written; try again.",
                        retryAfter: 1)
                }
                guard let fresh = try await storage.link(providerId: link.providerId, federatedId: link.federatedId), fresh.uid == link.uid
                else { break }
                link = fresh
                stored = try fresh.profile()
                continue
            }
            break
        }
        return profile
    }

    /// The photo of the given provider, or by default of the first linked provider with one
    /// (in the configured preference order, then in link order). Cached by user, provider and
    /// size within the byte budget; `refresh` bypasses the cache. A miss answers as soon as
    /// the provider's head has arrived, with the transfer that concurrent misses share.
    /// The key names the linked identities the photo may come from, as the account cache has
    /// them: once one is unlinked (on any instance), its photo is never served again.
    public func photo(uid: String, providerId: String?, size: Int?, refresh: Bool = false) async throws -> Served<PhotoAnswer> {
        _ = try await enabledAccount(uid)
        let links = try await storage.links(uid: uid)
        let sources: String
        if let providerId {
            guard let linked = links.first(where: { $0.providerId == providerId }) else {
                _ = try providers.provider(providerId)
                throw GatehouseError.providerNotLinked(providerId)
            }
            sources = linked.federatedId
        } else {
            sources = links.map { $0.providerId + "=" + $0.federatedId }.joined(separator: ",")
        }
        let key = "\(uid)|\(providerId ?? "*")|\(size ?? 0)|\(sources)"
        if !refresh, let photo = await photoCache.fresh(for: key) { return Served(value: .stored(photo)) }
        return try await servingStale(photoCache, key: key) {
            // A source that failed a moment ago fails again without being called.
            if !refresh, let failure = await photoFailures.fresh(for: key) { throw failure }
            let download = photoDownloads.join(key) { download in
                // Its own task: the transfer outlives any one caller and fills the cache.
                Task { await runDownload(download, key: key, uid: uid, providerId: providerId, size: size, refresh: refresh) }
            }
            _ = try await download.head()
            // Joined just as it ended (before it left the running set): answer whole, tagged.
            if let photo = download.completed { return .stored(photo) }
            return .downloading(download)
        } stale: {
            .stored($0)
        }
    }

    private func runDownload(_ download: PhotoDownload, key: String, uid: String, providerId: String?, size: Int?, refresh: Bool) async {
        do {
            let cache = photoCache
            let keep = photoBytes
            let photo = try await fetchPhoto(uid: uid, providerId: providerId, size: size, refresh: refresh, into: download) {
                chunks, contentType, etag in
                // An unchanged image (same tag, same bytes: a tag without a provider validator
                // could hide a change) keeps the bytes already kept, so callers of every
                // transfer of it share one copy however many refreshes overlap.
                if let kept = await cache.stored(for: key), kept.etag == etag, kept.bytes.equals(chunks) {
                    await cache.insert(kept, for: key)
                    return kept
                }
                let whole = Photo(bytes: keep(chunks), contentType: contentType, etag: etag)
                await cache.insert(whole, for: key)
                return whole
            }
            download.end(.success(photo))
        } catch {
            if let failure = error as? GatehouseError, failure.code == .photoUnavailable { await photoFailures.insert(failure, for: key) }
            download.end(.failure(error))
        }
        photoDownloads.remove(key, download)
    }

    /// Runs `load`; when its provider or photo host is failing (`upstream-unavailable`, the open
    /// breaker included, or `photo-unavailable`), answers with the cache's last value for
    /// `key` instead, if it still has one.
    private func servingStale<Cached, Value>(
        _ cache: ExpiringCache<Cached>, key: String, _ load: () async throws -> Value, stale wrap: (Cached) -> Value
    ) async throws -> Served<Value> {
        do {
            return Served(value: try await load())
        } catch let error as GatehouseError where error.code == .upstreamUnavailable || error.code == .photoUnavailable {
            guard let stale = await cache.stale(for: key) else { throw error }
            return Served(value: wrap(stale.value), staleAge: Int(stale.age))
        }
    }

    /// Links in photo preference order: the providers named in `order` first (in that order),
    /// then the others in link order.
    static func photoCandidates(_ links: [ProviderLinkRecord], order: [String]) -> [ProviderLinkRecord] {
        let rank = { (link: ProviderLinkRecord) in order.firstIndex(of: link.providerId) ?? Int.max }
        // Enumerated so that equal ranks keep link order (the sort is not stable).
        return links.enumerated().sorted { (rank($0.element), $0.offset) < (rank($1.element), $1.offset) }.map(\.element)
    }

    /// Opens the preferred candidate's photo and receives it into `download`. A photo from the
    /// provider itself (Graph's) is received under the provider's breaker until the last byte,
    /// so a transfer failing half-way counts; one from a public photo URL (an avatar host, an
    /// OpenID `picture`) only until its head, since that host is not the provider. Without a
    /// provider asked for, a candidate that fails before a caller was given its head (no photo
    /// there now, a dead grant, its provider failing) leaves the photo to the next one; when
    /// none has one, the first failure other than `no-photo` is the answer. A candidate's
    /// `photo-unavailable` is remembered under its own key (as if asked for by name), so the
    /// next miss passes over it at once instead of waiting for it again (unless `refresh`).
    private func fetchPhoto(
        uid: String, providerId: String?, size: Int?, refresh: Bool, into download: PhotoDownload,
        whole: @escaping @Sendable (_ chunks: [[UInt8]], _ contentType: String, _ etag: String) async -> Photo
    ) async throws -> Photo {
        let links = try await storage.links(uid: uid)
        let candidates = providerId.map { id in links.filter { $0.providerId == id } } ?? Self.photoCandidates(links, order: photoProviderOrder)
        if let providerId, candidates.isEmpty { throw GatehouseError.providerNotLinked(providerId) }
        var passed: GatehouseError?
        for link in candidates {
            let profile = try link.profile()
            guard profile.photoSourceURL != nil else { continue }
            let provider = try providers.provider(link.providerId)
            // The key `photo(uid:providerId:size:)` gives this candidate asked for by name.
            let ownKey = "\(uid)|\(link.providerId)|\(size ?? 0)|\(link.federatedId)"
            if providerId == nil, !refresh, let failure = await photoFailures.fresh(for: ownKey) {
                if passed == nil || passed?.code == .noPhoto { passed = failure }
                continue
            }
            do {
                let opened = try await circuits.run(link.providerId, caller: uid) { () -> OpenedPhoto in
                    let source = try await withFreshTokens(link, provider, for: "photo") { tokens in
                        try await Self.userPhoto(link.providerId) { try await provider.fetchPhoto(profile: profile, tokens: tokens, size: size) }
                    }
                    if source.fromPublicURL { return .publicSource(source) }
                    return .received(
                        try await Self.userPhoto(link.providerId) {
                            try await download.receive(source, providerId: link.providerId, whole: whole)
                        })
                }
                switch opened {
                case .received(let photo): return photo
                case .publicSource(let source): return try await download.receive(source, providerId: link.providerId, whole: whole)
                }
            } catch let error as GatehouseError where providerId == nil && !download.headDelivered {
                if error.code == .photoUnavailable { await photoFailures.insert(error, for: ownKey) }
                if passed == nil || passed?.code == .noPhoto { passed = error }
            }
        }
        throw passed ?? GatehouseError.noPhoto()
    }

    /// Runs a step of opening or receiving a provider's photo. A photo larger than the gateway
    /// takes (Graph's, which users upload themselves) says nothing of the provider: it is
    /// `photo-unavailable`, which no breaker counts and which is remembered for this photo like
    /// any photo failure. A token refresh around it keeps its own errors.
    private static func userPhoto<T>(_ providerId: String, _ step: () async throws -> T) async throws -> T {
        do {
            return try await step()
        } catch let error as GatehouseError where error.situation == .tooLarge {
            throw GatehouseError.photoUnavailable(providerId, cause: "the photo is larger than GATEHOUSE_MAX_PHOTO_BYTES")
        }
    }

    /// A photo the provider's breaker has settled: received whole from the provider, or a
    /// public photo URL's answer whose body is still to come.
    private enum OpenedPhoto: Sendable {
        case received(Photo)
        case publicSource(ProviderPhoto)
    }

    /// Runs `call` with the link's tokens, refreshing them first when they have expired, or
    /// once after the provider rejected them (then retrying once), unless the same call
    /// (`callName`) refused a grant's token as soon as such a refresh had got it, less than
    /// `refusalRefreshInterval` ago. A refused refresh marks the link dead:
    /// `provider-reauth-required` until the user signs in with it again. With
    /// `refreshesThroughBreaker` (a caller the provider's breaker does not already wrap: the
    /// passthrough, the token route), each refresh goes through that breaker as the link's
    /// user, so a failing token endpoint is left alone for a while.
    func withFreshTokens<T: Sendable>(
        _ link: ProviderLinkRecord, _ provider: any IdentityProvider, for callName: String, refreshesThroughBreaker: Bool = false,
        _ call: @Sendable (ProviderTokens) async throws -> T
    ) async throws -> T {
        var tokens = try await openTokens(link)
        if tokens.reauthRequired == true { throw GatehouseError.providerReauthRequired(link.providerId) }
        if let expiresAt = tokens.expiresAt, expiresAt < clock.now().timeIntervalSince1970 + 30, tokens.refreshToken != nil {
            tokens = try await refresh(link, provider, failed: tokens, throughBreaker: refreshesThroughBreaker)
        }
        do {
            return try await call(tokens)
        } catch let error as GatehouseError where error.code == .providerReauthRequired && tokens.refreshToken != nil {
            let key = link.providerId + "|" + link.federatedId + "|" + callName
            if let last = refusedAfterRefresh.value(for: key), clock.now().timeIntervalSince(last) < Self.refusalRefreshInterval {
                // Other tokens stored since this call read them (another request's refresh, a
                // sign-in) are tried once: that needs no call to the token endpoint. A store that
                // cannot be read leaves the refusal as it is.
                if let current = try? await storage.link(providerId: link.providerId, federatedId: link.federatedId), current.uid == link.uid,
                    let stored = try? await openTokens(current), stored.reauthRequired != true, stored.accessToken != tokens.accessToken
                {
                    return try await call(stored)
                }
                metrics.tokenRefresh(providerId: link.providerId, outcome: "held-back")
                throw error
            }
            let fresh = try await refresh(link, provider, failed: tokens, throughBreaker: refreshesThroughBreaker)
            do {
                return try await call(fresh)
            } catch let again as GatehouseError where again.code == .providerReauthRequired {
                refusedAfterRefresh.insert(clock.now(), for: key)
                throw again
            }
        }
    }

    /// `refresh(_:_:failed:)`, through the provider's breaker when `throughBreaker`.
    private func refresh(
        _ link: ProviderLinkRecord, _ provider: any IdentityProvider, failed: ProviderTokens, throughBreaker: Bool
    ) async throws -> ProviderTokens {
        guard throughBreaker else { return try await refresh(link, provider, failed: failed) }
        return try await circuits.run(link.providerId, caller: link.uid) { try await refresh(link, provider, failed: failed) }
    }

    /// Refreshes unless another request already did (the stored access token changed).
    private func refresh(_ link: ProviderLinkRecord, _ provider: any IdentityProvider, failed: ProviderTokens) async throws -> ProviderTokens {
        let storage = self.storage
        let key = "\(link.providerId)|\(link.federatedId)"
        // Single flight in this process, then the store's lock across instances; whoever comes
        // second finds the rotated tokens already stored and uses them.
        return try await refresher.refreshed(key: key) {
            try await storage.withLock("refresh|" + key) {
                try await self.refreshLocked(link, provider, failed: failed)
            }
        }
    }

    /// The refresh itself, under the lock: re-reads the stored tokens first.
    private func refreshLocked(_ link: ProviderLinkRecord, _ provider: any IdentityProvider, failed: ProviderTokens) async throws -> ProviderTokens {
        guard let current = try await storage.link(providerId: link.providerId, federatedId: link.federatedId), current.uid == link.uid else {
            throw GatehouseError.providerReauthRequired(link.providerId)
        }
        var stored = try await openTokens(current)
        guard stored.reauthRequired != true else { throw GatehouseError.providerReauthRequired(link.providerId) }
        // The new tokens replace exactly the ones read above (compare and set): should a
        // sign-in, or another instance whose lock lease ran out, have stored newer ones during
        // the provider call, theirs stay. The caller still gets the tokens it was answered.
        var read = current.sealedTokens
        let grant = "\(current.providerId)|\(current.federatedId)"
        if let kept = unwrittenTokens.value(for: grant) {
            if kept.replacing == read {
                // An earlier refresh's tokens the store could not take: the grant's live ones.
                stored = kept.tokens
                if let written = try? await write(kept.tokens, of: current, replacing: read) {
                    unwrittenTokens.remove(grant)
                    read = written
                }
            } else {
                unwrittenTokens.remove(grant)  // the store has other tokens since (a sign-in)
            }
        }
        // Tokens another refresh stored (or kept) meanwhile serve the call, unless they have
        // expired too: kept tokens may have waited for a write longer than they live.
        let expired = stored.expiresAt.map { $0 < clock.now().timeIntervalSince1970 + 30 } ?? false
        if stored.accessToken != failed.accessToken, !(expired && stored.refreshToken != nil) {
            metrics.tokenRefresh(providerId: link.providerId, outcome: "reused")
            return stored
        }
        do {
            let fresh = try await provider.refresh(stored)
            let replaced: Bool
            do {
                replaced = try await writeRefreshed(fresh, of: current, replacing: read)
            } catch {
                // The provider has answered (and may have spent the refresh token the store
                // holds): the tokens are kept for the grant's next refresh, and serve this call.
                unwrittenTokens.insert((read, fresh), for: grant)
                logger.error(
                    "provider tokens not written; kept in memory until a write succeeds",
                    metadata: ["provider.id": "\(current.providerId)", "error.type": "\(type(of: error))"])
                metrics.tokenRefresh(providerId: link.providerId, outcome: "unwritten")
                return fresh
            }
            unwrittenTokens.remove(grant)
            metrics.tokenRefresh(providerId: link.providerId, outcome: replaced ? "ok" : "superseded")
            return fresh
        } catch let error as GatehouseError where error.code == .providerReauthRequired {
            metrics.tokenRefresh(providerId: link.providerId, outcome: "dead-grant")
            var dead = stored
            dead.reauthRequired = true
            // Once per dead grant: the event goes with the write that marks it, which only one
            // refresh wins (compare and set).
            let sealedDead = try await vault.seal(dead, providerId: current.providerId, federatedId: current.federatedId)
            let event = WebhookEvent.account(.grantReauthRequired, uid: current.uid, at: clock.now(), ["providerId": .string(current.providerId)])
            _ = try await accounts.events.recording([event]) {
                try await storage.replaceSealedTokens(
                    providerId: current.providerId, federatedId: current.federatedId, expected: read, with: sealedDead)
            }
            throw error
        } catch {
            metrics.tokenRefresh(providerId: link.providerId, outcome: "failed")
            throw error
        }
    }

    /// Writes `tokens` over the sealed tokens `replacing` (compare and set): the sealed form
    /// written, or `nil` when the store holds other tokens now.
    private func write(_ tokens: ProviderTokens, of link: ProviderLinkRecord, replacing: String) async throws -> String? {
        let sealed = try await vault.seal(tokens, providerId: link.providerId, federatedId: link.federatedId)
        let replaced = try await storage.replaceSealedTokens(
            providerId: link.providerId, federatedId: link.federatedId, expected: replacing, with: sealed)
        return replaced ? sealed : nil
    }

    /// `write` for a refresh's answer, tried `tokenWriteAttempts` times (a store's brief
    /// failure must not lose tokens the provider will not give again); whether they replaced
    /// the ones read.
    private func writeRefreshed(_ tokens: ProviderTokens, of link: ProviderLinkRecord, replacing: String) async throws -> Bool {
        var attempt = 1
        while true {
            do {
                return try await write(tokens, of: link, replacing: replacing) != nil
            } catch  where attempt < Self.tokenWriteAttempts && !Task.isCancelled {
                try? await Task.sleep(for: .milliseconds(100 * attempt * attempt))
                attempt += 1
            }
        }
    }

    /// The state of each linked provider's stored grant (for operators: never the tokens).
    public func grants(uid: String) async throws -> [GrantState] {
        var states: [GrantState] = []
        for link in try await storage.links(uid: uid) {
            states.append(GrantState(providerId: link.providerId, tokens: try await openTokens(link), now: clock.now()))
        }
        return states
    }

    func enabledAccount(_ uid: String) async throws -> AccountRecord {
        guard let account = try await storage.account(uid: uid) else { throw GatehouseError.userNotFound() }
        if account.disabled { throw GatehouseError.userDisabled() }
        return account
    }

    func link(uid: String, providerId: String) async throws -> ProviderLinkRecord {
        guard let link = try await storage.links(uid: uid).first(where: { $0.providerId == providerId }) else {
            _ = try providers.provider(providerId)
            throw GatehouseError.providerNotLinked(providerId)
        }
        return link
    }

    /// A link whose tokens no longer open (a removed key) needs a new sign-in, not a 500; a
    /// store that cannot be read stays a storage error. Links come from the account cache,
    /// which another process's key rotation (`gatehouse keys` on a SQLite file) cannot reach:
    /// tokens that do not open are read from the store once more before giving up.
    private func openTokens(_ link: ProviderLinkRecord) async throws -> ProviderTokens {
        if let tokens = try await openedTokens(link) { return tokens }
        if let stored = try await storage.link(providerId: link.providerId, federatedId: link.federatedId), stored.uid == link.uid,
            stored.sealedTokens != link.sealedTokens, let tokens = try await openedTokens(stored)
        {
            return tokens
        }
        throw GatehouseError.providerReauthRequired(link.providerId)
    }

    /// The link's tokens, or `nil` when they do not open.
    private func openedTokens(_ link: ProviderLinkRecord) async throws -> ProviderTokens? {
        let now = clock.now()
        if decryptedTokenLifetime > 0, let known = openedTokenSets.value(for: link.sealedTokens),
            now.timeIntervalSince(known.openedAt) < decryptedTokenLifetime
        {
            return known.tokens
        }
        do {
            let tokens = try await vault.tokens(of: link)
            if decryptedTokenLifetime > 0 { openedTokenSets.insert((tokens, now), for: link.sealedTokens) }
            return tokens
        } catch TokenVault.VaultError.unreadable {
            return nil
        } catch is DecodingError {
            return nil
        }
    }
}
