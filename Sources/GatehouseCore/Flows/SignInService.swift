import Foundation
import Logging

/// The browser redirect flow: start → provider → callback → one-time result (design §2, §4).
public struct SignInService: Sendable {
    let configuration: GatewayConfiguration
    let providers: ProviderRegistry
    let storage: any GatehouseStorage
    let accounts: AccountService
    let tokens: GatewayTokenService
    let returnToPolicy: ReturnToPolicy
    /// Where completed sign-ins are counted.
    var metrics = GatehouseMetrics.disabled

    /// The answer to `start`.
    public struct Start: Sendable {
        /// Where to send the browser.
        public var authorizationURL: String
        /// The transaction cookie value (reused when the browser already had one, so
        /// several tabs can sign in at once).
        public var bindingValue: String
    }

    /// The answer to a callback whose state was valid.
    public struct Completion: Sendable {
        /// `return_to#gatehouse_result=<id>`.
        public var redirectURL: String
        /// A new session cookie value when the sign-in succeeded.
        public var sessionValue: String?
        /// Instead of a redirect: the page that asks the user whether a native or desktop app
        /// may have the sign-in (`redirectURL` is empty then).
        public var consent: ConsentRequest?
    }

    /// Validates the request, stores the transaction and builds the provider's authorize URL.
    /// `link` and `reauthenticate` need the signed-in account and its session (`signedIn`),
    /// which the flow then lives no longer than. `fromElsewhere`: the browser shows that the
    /// start leaves a page that is not an allowed one; a web sign-in bound to a result
    /// challenge is then refused (`origin-not-allowed`).
    public func start(
        providerId: String, query: [(String, String)], existingBinding: String?, signedIn: FlowOwner?, fromElsewhere: Bool = false,
        logger: Logger
    ) async throws -> Start {
        let provider = try providers.provider(providerId)
        let parameters = Dictionary(query, uniquingKeysWith: { first, _ in first })
        guard let returnTo = parameters["return_to"] else {
            throw GatehouseError.invalidReturnTo("return_to is required.")
        }
        let returnKind = try returnToPolicy.check(returnTo)
        let mode = try SignInMode(parameter: parameters["mode"])
        let uid = try await checkMode(mode, providerId: provider.id, signedInUid: signedIn?.uid)
        // An app's scheme or loopback port can be claimed by another app on the device (RFC
        // 8252 §8.1): its result must be bound, whatever the web setting says.
        let resultChallenge = try ResultBinding.challenge(
            parameters["result_challenge"], required: configuration.requireResultBinding || returnKind.isNative)
        // A bound result goes to whoever holds the verifier. Started by another site's page with
        // its own challenge, a provider that approves silently would complete the user's
        // sign-in in their browser, and a result id leaked from the return page (an open
        // redirect, a script, a log) would give that site the user's tokens. A native return
        // stops at the consent page instead, which names the app and the account.
        if fromElsewhere, resultChallenge != nil, returnKind == .web {
            throw GatehouseError.originNotAllowed(
                "A sign-in whose result is bound (result_challenge) starts from an allowed page, and this one came from another: the page must send its origin as Referer (the default Referrer-Policy does; no-referrer does not), or start with fetch and Accept: application/json."
            )
        }
        var custom = try CustomParameters.forwardable(from: query)
        if mode == .reauthenticate { custom = try Self.reauthenticationParameters(custom, provider: provider) }
        var scopes = provider.defaultScopes
        for extra in try Self.extraScopes(parameters["scope"]) where !scopes.contains(extra) { scopes.append(extra) }

        let binding = existingBinding.flatMap { $0.count == 43 && Base64URL.decode($0) != nil ? $0 : nil } ?? SecureRandom.token()
        let state = SecureRandom.token()
        let nonce = SecureRandom.token()
        let pkce = PKCE()
        let redirectURI = "\(configuration.publicURL)/v1/auth/\(provider.id)/callback"
        // Built first: when discovery is down, nothing is stored for a flow that cannot start.
        let redirect = try await provider.authorizationRedirect(
            for: AuthorizationRequest(
                redirectURI: redirectURI, state: state, nonce: nonce, codeChallenge: pkce.challenge, scopes: scopes, customParameters: custom))
        let now = configuration.clock.now()
        try await storage.insertTransaction(
            SignInTransaction(
                stateHash: SecureRandom.digest(state), bindingHash: SecureRandom.digest(binding), providerId: provider.id,
                codeVerifier: pkce.verifier, nonce: nonce, returnTo: returnTo, mode: mode, redirectURI: redirectURI,
                providerContext: redirect.context, uid: uid, sessionFamilyId: uid == nil ? nil : signedIn?.sessionFamilyId, createdAt: now,
                expiresAt: now.addingTimeInterval(configuration.transactionLifetime), resultChallenge: resultChallenge))
        logger.info("sign-in started", metadata: ["provider.id": "\(provider.id)", "signin.mode": "\(mode)"])
        return Start(authorizationURL: redirect.url, bindingValue: binding)
    }

    /// Handles the provider's redirect back. An unknown, replayed, expired or unbound state
    /// throws `invalid-state` before anything is sent to the provider.
    public func callback(
        providerId: String, parameters: [String: String], binding: String?, client: SignInClient, logger: Logger
    ) async throws -> Completion {
        let provider = try providers.provider(providerId)
        guard let state = parameters["state"], !state.isEmpty else {
            throw GatehouseError.invalidState("The callback has no state.")
        }
        guard state.utf8.count <= 512 else {
            throw GatehouseError.invalidState("The callback's state is longer than any state this gateway issues.")
        }
        guard let binding, !binding.isEmpty, binding.utf8.count <= 512 else {
            throw GatehouseError.invalidState("The sign-in was not started in this browser (no transaction cookie).")
        }
        guard
            let transaction = try await storage.takeTransaction(
                stateHash: SecureRandom.digest(state), bindingHash: SecureRandom.digest(binding))
        else {
            throw GatehouseError.invalidState("The state is unknown, already used, or bound to another browser.")
        }
        guard transaction.expiresAt > configuration.clock.now() else {
            throw GatehouseError.invalidState("The sign-in took too long; start again.")
        }
        guard transaction.providerId == provider.id else {
            // Mix-up defence: a state issued for one provider never completes at another's callback.
            throw GatehouseError.invalidState("The state belongs to another provider's sign-in.")
        }
        // The allow-list may have changed since the start (a restart with new settings): an
        // address taken off it gets no result, not even a failure.
        guard let returnKind = returnToPolicy.kind(of: transaction.returnTo) else {
            throw refusedReturn(providerId: provider.id, mode: transaction.mode, logger: logger)
        }

        let outcome: StoredResult
        var sessionValue: String?
        let mode = transaction.mode
        do {
            if let error = parameters["error"] {
                throw GatehouseError.invalidIdPResponse("The provider returned \(error.truncated(toBytes: 64).debugDescription) instead of a code.")
            }
            guard let code = parameters["code"], !code.isEmpty else {
                throw GatehouseError.invalidIdPResponse("The provider's callback has no code.")
            }
            // Before the code is spent: a flow whose session ended (signed out everywhere, say)
            // asks the provider nothing, nor a link whose session is no longer a recent login.
            try await requireLiveSession(transaction.sessionFamilyId, linking: mode == .link)
            let completed = try await provider.completeSignIn(
                CallbackParameters(
                    code: code, codeVerifier: transaction.codeVerifier, redirectURI: transaction.redirectURI, nonce: transaction.nonce,
                    issuer: parameters["iss"], context: transaction.providerContext))
            let received = configuration.clock.now()
            let authenticatedAt = Self.sessionAuthenticationTime(
                Self.authenticationTime(completed.idTokenClaims, receivedAt: received), now: received)
            if mode == .reauthenticate {
                try Self.requireFreshAuthentication(
                    completed.idTokenClaims, authenticatedAt: authenticatedAt, provider: provider, startedAt: transaction.createdAt)
            }
            // An app's return: nothing is stored until the user says the app may have it.
            if returnKind != .web {
                let consent = try await holdForConsent(completed, authenticatedAt: authenticatedAt, transaction: transaction, binding: binding)
                return Completion(redirectURL: "", sessionValue: nil, consent: consent)
            }
            let origin = SignInOrigin(
                client: client, flow: .redirect, returnTo: transaction.returnTo, native: false, idTokenClaims: completed.idTokenClaims?.all,
                authenticatedAt: authenticatedAt)
            let established = try await establish(
                completed, providerId: provider.id, mode: mode, uid: transaction.uid, startedBy: transaction.sessionFamilyId, origin: origin,
                logger: logger)
            // A native app holds the gateway's tokens from the result; a cookie would land in
            // the system browser, where nothing uses it.
            if returnKind == .web { sessionValue = established.session?.value }
            // A re-authentication replaces the session that started it once its result is
            // redeemed (a page's bearer session; a browser's cookie session the callback's new
            // cookie has replaced already).
            outcome = .answer(
                try established.result.tokenlessAnswer(), familyId: established.session?.familyId,
                replaces: mode == .reauthenticate ? transaction.sessionFamilyId : nil)
            metrics.signIn(providerId: provider.id, mode: mode, outcome: "ok")
        } catch let error as GatehouseError {
            logger.notice("sign-in failed", metadata: ["provider.id": "\(provider.id)", "signin.mode": "\(mode)", "error.code": "\(error.code)"])
            metrics.signIn(providerId: provider.id, mode: mode, outcome: error.code.rawValue)
            outcome = .failure(error)
        }

        let redirect = try await deliver(outcome, returnTo: transaction.returnTo, challenge: transaction.resultChallenge)
        return Completion(redirectURL: redirect, sessionValue: sessionValue)
    }

    /// The refusal of a sign-in whose `return_to` is no longer on the allow-list, counted and
    /// logged as a failed sign-in: an operator sees how many sign-ins under way a change of
    /// the allow-list ended (instances whose lists differ during a rolling restart among them).
    func refusedReturn(providerId: String, mode: SignInMode, logger: Logger) -> GatehouseError {
        let error = GatehouseError.invalidReturnTo(
            "This sign-in's return_to is no longer on the gateway's allow-list; start again from the app.")
        logger.notice(
            "sign-in failed", metadata: ["provider.id": "\(providerId)", "signin.mode": "\(mode)", "error.code": "\(error.code)"])
        metrics.signIn(providerId: providerId, mode: mode, outcome: error.code.rawValue)
        return error
    }

    /// The `scope` parameter's tokens, each checked (ASCII, no space or quote, at most 128).
    static func extraScopes(_ parameter: String?) throws -> [String] {
        try (parameter ?? "").split(separator: " ").map(String.init).map { extra in
            guard extra.count <= 128, extra.allSatisfy({ $0.isASCII && !$0.isWhitespace && $0 != "\"" && $0 != "\\" }) else {
                throw GatehouseError.invalidArgument("scope contains an invalid scope token.")
            }
            return extra
        }
    }

    /// Stores `outcome` as a one-time result (bound to `challenge`) and answers where the
    /// browser goes: `return_to#gatehouse_result=<id>`, and for a desktop app's loopback return
    /// `return_to?gatehouse_result=<id>#gatehouse_result=<id>` (`&` when it has a query
    /// already): its listener reads the request a browser sends, which never carries the
    /// fragment (RFC 8252 §7.3 returns the code in the query too), while a page the listener
    /// serves may still read it from the fragment.
    /// A held link lives as long as a consent page (ten minutes): its app may first have to show
    /// the identity to its user and wait for an answer (`link-confirmation-required`).
    func deliver(_ outcome: StoredResult, returnTo: String, challenge: String?, resultID: String = SecureRandom.token()) async throws -> String {
        var lifetime = configuration.resultLifetime
        if case .heldLink = outcome { lifetime = max(lifetime, Self.consentLifetime) }
        try await storage.insertResult(
            idHash: ResultBinding.storageKey(resultID: resultID, challenge: challenge), payload: try JSONCoding.encoder().encode(outcome),
            expiresAt: configuration.clock.now().addingTimeInterval(lifetime))
        let base = returnTo.split(separator: "#", maxSplits: 1).first.map(String.init) ?? returnTo
        guard returnToPolicy.kind(of: returnTo) == .loopback else { return "\(base)#gatehouse_result=\(resultID)" }
        return "\(base)\(base.contains("?") ? "&" : "?")gatehouse_result=\(resultID)#gatehouse_result=\(resultID)"
    }

    /// `POST /v1/auth/idtoken`: signs in with an ID token obtained elsewhere, validated exactly
    /// like the code flow's. A bare access token is refused: the gateway cannot check whom
    /// it was issued to (providers.md §5).
    public func signIn(
        providerId: String, idToken: String?, rawNonce: String?, accessToken: String?, mode: SignInMode = .signIn, signedIn: FlowOwner? = nil,
        client: SignInClient = .unknown, logger: Logger
    ) async throws -> (result: SignInResult, session: String?) {
        let provider = try providers.provider(providerId)
        let uid = try await checkMode(mode, providerId: provider.id, signedInUid: signedIn?.uid)
        guard let idToken, !idToken.isEmpty else {
            if accessToken != nil {
                throw GatehouseError.operationNotAllowed(
                    "\(provider.id) sign-in needs an ID token: the audience of a bare access token cannot be verified.")
            }
            throw GatehouseError.invalidArgument("idToken is required.")
        }
        if let rawNonce, rawNonce.isEmpty || rawNonce.utf8.count > 512 {
            throw GatehouseError.invalidArgument("rawNonce must be 1 to 512 bytes.")
        }
        // Adding or confirming a sign-in method with a token obtained elsewhere needs proof
        // that the token was minted for this request: its nonce.
        if mode != .signIn, rawNonce == nil { throw GatehouseError.missingOrInvalidNonce() }
        do {
            let completed = try await provider.signIn(idToken: idToken, rawNonce: rawNonce)
            if let claims = completed.idTokenClaims { try await accept(claims, idToken: idToken, mode: mode) }
            // A token obtained elsewhere may have waited: its authentication is the time it says.
            let origin = SignInOrigin(
                client: client, flow: .idToken, idTokenClaims: completed.idTokenClaims?.all,
                authenticatedAt: completed.idTokenClaims.map {
                    Self.sessionAuthenticationTime(Date(timeIntervalSince1970: $0.authTime ?? $0.issuedAt), now: configuration.clock.now())
                })
            let established: (result: SignInResult, session: NewSession?)
            var issued: GatewayTokenService.Issued?
            do {
                do {
                    // The session and its first refresh token commit together: a failure leaves
                    // neither (nor the session's account.signed-in event).
                    established = try await establish(
                        completed, providerId: provider.id, mode: mode, uid: uid, startedBy: uid == nil ? nil : signedIn?.sessionFamilyId,
                        issuing: true, origin: origin, logger: logger)
                } catch StorageError.sessionGone {
                    throw try await sessionEnded(
                        uid: uid,
                        otherwise: GatehouseError(
                            code: .storageUnavailable,
                            detail: "The sign-in's session was ended as it was written (its user signed out everywhere meanwhile); retry.",
                            retryAfter: 1))
                }
                issued = established.session?.issued
            } catch let error as GatehouseError
                where [.hookUnavailable, .signInDenied, .storageUnavailable].contains(error.code) && completed.idTokenClaims != nil
            {
                // The hooks are asked before anything is written: the token signed nobody in,
                // and the app may present it again (once the hook answers, say) instead of
                // asking its user to sign in at the provider anew. A write that found what it
                // read changed twice answers "retry" too (storage-unavailable).
                try? await storage.releaseToken(hash: Self.replayKey(idToken))
                throw error
            } catch let error where !(error is GatehouseError) && completed.idTokenClaims != nil {
                // The store failed part-way (a 503, or a 500): the app got no session and will
                // present the token again, which spent would be refused for good. What was
                // written meanwhile (an account, a session nobody holds) is what the retry's
                // sign-in finds or leaves to expire.
                try? await storage.releaseToken(hash: Self.replayKey(idToken))
                throw error
            }
            metrics.signIn(providerId: provider.id, mode: mode, outcome: "ok")
            return (established.result.with(issued), established.session?.value)
        } catch let error as GatehouseError where error.code == .invalidIDToken {
            logger.notice("sign-in failed", metadata: ["provider.id": "\(provider.id)", "error.code": "\(error.code)"])
            metrics.signIn(providerId: provider.id, mode: mode, outcome: GatehouseError.Code.invalidIdPResponse.rawValue)
            // Same wording as Firebase: a token the gateway cannot accept is an invalid IdP response.
            throw GatehouseError.invalidIdPResponse(error.detail)
        } catch let error as GatehouseError {
            logger.notice("sign-in failed", metadata: ["provider.id": "\(provider.id)", "error.code": "\(error.code)"])
            metrics.signIn(providerId: provider.id, mode: mode, outcome: error.code.rawValue)
            throw error
        }
    }

    /// An ID token posted to the gateway signs in once: its hash is remembered (across
    /// instances) until it expires. Linking and re-authentication also need a recent
    /// authentication at the provider (`auth_time`, else `iat`, within the recent-login window).
    private func accept(_ claims: IDTokenClaims, idToken: String, mode: SignInMode) async throws {
        let now = configuration.clock.now()
        if mode != .signIn {
            let authenticated = Date(timeIntervalSince1970: claims.authTime ?? claims.issuedAt)
            guard now.timeIntervalSince(authenticated) <= configuration.recentLoginWindow else {
                throw GatehouseError.invalidIdToken(
                    "Linking or re-authenticating needs an ID token from a sign-in within the last \(Int(configuration.recentLoginWindow)) seconds.")
            }
        }
        let expiry = Date(timeIntervalSince1970: claims.expiresAt).addingTimeInterval(120)
        guard try await storage.spendToken(hash: Self.replayKey(idToken), expiresAt: expiry) else {
            throw GatehouseError.invalidIdToken("This ID token was already used to sign in; ask the provider for a new one.")
        }
    }

    /// The key an ID token is spent under: the digest of what its signature signs (the header
    /// and payload as sent), not of the whole token. The same token written another way (a
    /// signature whose last character differs in bits that decode to nothing, padding
    /// appended, ECDSA's other valid `s`) still verifies, and must still be spent; the signed
    /// part cannot change without the signature failing.
    static func replayKey(_ idToken: String) -> String {
        let bytes = idToken.utf8
        let dot = UInt8(ascii: ".")
        guard let first = bytes.firstIndex(of: dot), let second = bytes[bytes.index(after: first)...].firstIndex(of: dot) else {
            return SecureRandom.digest(idToken)
        }
        return SecureRandom.digest(String(idToken[..<second]))
    }

    /// A new session: the cookie value (shown once) and its stored record.
    struct NewSession {
        let value: String
        let record: SessionRecord
        /// Its tokens, when they were written with it (`establish`'s `issuing`).
        var issued: GatewayTokenService.Issued?
        var familyId: String { record.familyId }
    }

    /// Throws `invalid-state` when the session that started a link or re-authentication
    /// (`familyId`) has ended since: signed out (everywhere), revoked, or its account disabled
    /// or deleted. Whoever held that session (a stolen cookie or token) cannot finish a flow
    /// they started before the owner ended it. A check, not a lock: a sign-out that lands
    /// while the hooks are asked about the flow does not stop its write. With `linking`, also
    /// `requires-recent-login` once that session's authentication is older than the
    /// recent-login window.
    func requireLiveSession(_ familyId: String?, linking: Bool = false) async throws {
        guard let familyId else { return }
        let now = configuration.clock.now()
        guard let session = try await storage.session(familyId: familyId, now: now) else {
            throw GatehouseError.invalidState("The session that started this flow has ended; sign in again.")
        }
        // Adding a sign-in method needs a recent login when the provider answers, not only at
        // the start: a flow lives ten minutes, which would extend the window by as much.
        if linking, now.timeIntervalSince(session.authenticatedAt) > configuration.recentLoginWindow {
            throw GatehouseError.requiresRecentLogin(window: Int(configuration.recentLoginWindow))
        }
    }

    /// The `uid` a mode needs: none for `signin`; for `link` and `reauthenticate` the signed-in
    /// account (and for `reauthenticate`, one already linked to this provider).
    func checkMode(_ mode: SignInMode, providerId: String, signedInUid: String?) async throws -> String? {
        guard mode != .signIn else { return nil }
        guard let signedInUid else { throw GatehouseError.unauthenticated() }
        if mode == .reauthenticate, try await !storage.links(uid: signedInUid).contains(where: { $0.providerId == providerId }) {
            throw GatehouseError.providerNotLinked(providerId)
        }
        return signedInUid
    }

    /// Account, session and result of a validated provider sign-in, by mode: `signin` and
    /// `reauthenticate` start a new session (a fresh `auth_time`, a new id: no fixation);
    /// `link` changes the account only. A flow started by a session (`startedBy`, its family)
    /// is written only while that session lives. With `issuing`, the session's tokens are
    /// minted first and its first refresh token written in the session's transaction.
    func establish(
        _ completed: ProviderSignIn, providerId: String, mode: SignInMode, uid: String?, startedBy: String? = nil, issuing: Bool = false,
        origin: SignInOrigin, logger: Logger
    ) async throws -> (result: SignInResult, session: NewSession?) {
        try await requireLiveSession(startedBy)
        let profile = completed.profile
        let signIn: AccountService.SignIn
        switch (mode, uid) {
        case (.link, let uid?): signIn = try await accounts.link(uid: uid, profile: profile, tokens: completed.tokens, origin: origin)
        case (.reauthenticate, let uid?):
            signIn = try await accounts.reauthenticate(uid: uid, profile: profile, tokens: completed.tokens, origin: origin)
        default: signIn = try await accounts.signIn(profile: profile, tokens: completed.tokens, origin: origin)
        }
        var session: NewSession?
        if mode != .link {
            let value = SecureRandom.token()
            let now = configuration.clock.now()
            var record = SessionRecord(
                idHash: SecureRandom.digest(value), uid: signIn.account.uid, createdAt: now,
                expiresAt: now.addingTimeInterval(configuration.sessionLifetime), signInProvider: providerId,
                claims: signIn.sessionClaims?.stored, authenticatedAt: Self.sessionAuthenticationTime(origin.authenticatedAt, now: now))
            // Written with the session, in its transaction: the sign-in costs no second commit.
            record.firstUse = SessionUse(at: now, clientAddress: origin.client.address, userAgent: origin.client.userAgent)
            var issued: GatewayTokenService.Issued?
            var firstToken: NewRefreshToken?
            if issuing { (issued, firstToken) = try await tokens.prepareIssue(for: record) }
            let signedIn = WebhookEvent.account(
                .accountSignedIn, uid: signIn.account.uid, at: now,
                ["providerId": .string(providerId), "mode": .string(mode.rawValue), "isNewUser": .bool(signIn.isNewUser)])
            do {
                // A re-authentication that answers its tokens at once (by ID token) replaces the
                // session that asked for it in the same commit: kept, the old tokens would outlive
                // the app's sign-out, which ends only the session it holds.
                let ending = mode == .reauthenticate && issuing ? startedBy : nil
                try await accounts.events.recording([signedIn]) {
                    try await storage.insertSession(record, firstRefreshToken: firstToken, ending: ending)
                }
            } catch StorageError.changedMeanwhile {
                // Disabled or deleted while the sign-in was under way (the hook was asked).
                guard try await storage.account(uid: record.uid) == nil else { throw GatehouseError.userDisabled() }
                throw GatehouseError.userNotFound()
            }
            session = NewSession(value: value, record: record, issued: issued)
        }
        logger.info(
            "sign-in completed",
            metadata: [
                "provider.id": "\(providerId)", "signin.mode": "\(mode)", "user.id": "\(signIn.account.uid)",
                "user.new": .stringConvertible(signIn.isNewUser),
            ])
        let result = SignInResult(
            user: signIn.profile, isNewUser: signIn.isNewUser, providerId: providerId,
            additionalUserInfo: .init(profile: profile.rawUserInfo, username: profile.username),
            operationType: mode.operationType)
        return (result, session)
    }

    /// The one-time result as its JSON answer (a `SignInResult`, encoded once: the bytes kept
    /// sealed for a retry are the ones answered, so a retry answers byte for byte the same), or
    /// the stored failure thrown as an error. A bound result is found only with the verifier of
    /// its flow's `result_challenge`, so a stolen id alone redeems nothing and the result stays
    /// for its owner. A link held for an app answers `link-confirmation-required` (naming the
    /// identity) until `confirmLink` says whether its user recognised it: `true` writes it,
    /// `false` cancels it.
    public func resultJSON(
        id: String, verifier: String?, confirmLink: Bool? = nil, client: SignInClient = .unknown, logger: Logger
    ) async throws -> Data {
        let challenge = try verifier.map(ResultBinding.challenge(forVerifier:))
        if challenge == nil, configuration.requireResultBinding {
            throw GatehouseError.invalidResult(
                "result_verifier is required: the verifier whose SHA-256 the sign-in's start sent as result_challenge.")
        }
        guard ResultBinding.isResultID(id) else { throw GatehouseError.resultNotFound() }
        let key = ResultBinding.storageKey(resultID: id, challenge: challenge)
        // With a verifier, "unknown", "already fetched" and "bound to another verifier" look
        // the same from here: the stored key is derived from both.
        let now = configuration.clock.now()
        let found = try Self.read(try await storage.result(idHash: key, now: now))
        guard case .pending(.heldLink)? = found else {
            return try await redeem(found, key: key, challenge: challenge, now: now, confirmLink: confirmLink, client: client, logger: logger)
        }
        // A held link's answers (confirm, cancel, a retry) are taken one at a time, each reading
        // the result afresh: a cancel racing a confirm cannot answer 403 while the link is written.
        let storage = self.storage
        let clock = configuration.clock
        return try await storage.withLock("held-link|" + key) {
            // The time read afresh: the wait for the lock may have been long.
            let now = clock.now()
            return try await self.redeem(
                try Self.read(try await storage.result(idHash: key, now: now)), key: key, challenge: challenge, now: now,
                confirmLink: confirmLink, client: client, logger: logger)
        }
    }

    /// A stored result as read: redeemed (its sealed answer) or pending (decoded, once).
    private enum ReadResult {
        case redeemed(sealedAnswer: String)
        case pending(StoredResult)
    }

    /// `state` with a pending result decoded; `nil` when there is none.
    private static func read(_ state: StoredResultState?) throws -> ReadResult? {
        switch state {
        case nil: nil
        case .redeemed(let sealedAnswer): .redeemed(sealedAnswer: sealedAnswer)
        case .pending(let payload): .pending(try JSONCoding.decoder().decode(StoredResult.self, from: payload))
        }
    }

    /// `resultJSON` for the result `found` under `key`. Read first, taken last: the session and
    /// tokens are prepared before the result is consumed, and the result leaves the store in
    /// the same transaction as the refresh token arrives, so a store error at any step leaves
    /// the result redeemable.
    private func redeem(
        _ found: ReadResult?, key: String, challenge: String?, now: Date, confirmLink: Bool?, client: SignInClient, logger: Logger
    ) async throws -> Data {
        let stored: StoredResult
        switch found {
        case nil: throw GatehouseError.resultNotFound()
        case .redeemed(let sealedAnswer):
            // A retry of a redemption whose answer was lost: the same answer, same tokens.
            return try await tokens.vault.open(sealedAnswer, context: Self.answerContext(key))
        case .pending(let result): stored = result
        }
        let tokenless: Data
        let familyId: String?
        var replaces: String?
        switch stored {
        case .success(let result, let family): (tokenless, familyId) = (try result.tokenlessAnswer(), family)
        case .answer(let answer, let family, let replaced): (tokenless, familyId, replaces) = (answer, family, replaced)
        case .failure(let error):
            guard
                try await storage.takeResult(
                    idHash: key, now: now, redemption: ResultRedemption(refreshToken: nil, sealedAnswer: nil, retryUntil: now))
            else { throw GatehouseError.resultNotFound() }
            throw error
        case .heldLink(let sealed):
            // Held only for a bound (native) result; one without a verifier redeems nothing.
            guard challenge != nil else { throw GatehouseError.resultNotFound() }
            do {
                let held = try await openHeldLink(sealed, key: key)
                // A link whose session has ended is not put to the user, nor one for an
                // address taken off the allow-list since.
                // The recent-login window held when the provider answered (`callback`); the
                // app's user then weighs the identity it names for as long as the link is held.
                try await requireLiveSession(held.sessionFamilyId)
                guard returnToPolicy.kind(of: held.returnTo) != nil else {
                    throw refusedReturn(providerId: held.providerId, mode: held.mode, logger: logger)
                }
                if confirmLink == false { throw cancelled(held, by: "the app", logger: logger) }
                // The result may carry the identity of whoever opened the start URL first: any
                // local user reaches a loopback page, and any page can hand a scheme's callback
                // to the app waiting for it. So the app's user confirms the identity it names.
                if confirmLink != true {
                    throw GatehouseError.linkConfirmationRequired(held.profile)
                }
                (tokenless, familyId) = (try await complete(held, client: client, logger: logger).answer, nil)
            } catch let error as GatehouseError where error.code == .linkConfirmationRequired {
                throw error  // nothing written, nothing consumed: the result waits for the app's answer
            } catch let error as GatehouseError where error.retryAfter == nil {
                // Refused (the identity is another account's, the hook denied, the app
                // cancelled): answered once, like a stored failure. A store error or a retryable
                // refusal (the hook could not be asked) leaves the result to be fetched again.
                guard
                    try await storage.takeResult(
                        idHash: key, now: now, redemption: ResultRedemption(refreshToken: nil, sealedAnswer: nil, retryUntil: now))
                else { throw GatehouseError.resultNotFound() }
                throw error
            }
        }
        // Tokens are minted now, once: the stored result never held a usable credential.
        var prepared: (GatewayTokenService.Issued, NewRefreshToken)?
        var uid: String?
        if let familyId {
            guard let session = try await storage.session(familyId: familyId, now: now) else { throw GatehouseError.invalidRefreshToken() }
            prepared = try await tokens.prepareIssue(for: session)
            uid = session.uid
        }
        let answer = try SignInResult.answer(tokenless, adding: prepared?.0)
        // Only a bound result keeps its answer for a retry: an unbound id may have leaked.
        let window = challenge == nil ? 0 : configuration.refreshRetryWindow
        let sealedAnswer = window > 0 ? try await tokens.vault.seal(answer, context: Self.answerContext(key)) : nil
        // A re-authentication's session replaces the app's that started it in the same commit
        // that hands the app the new one's tokens: kept, the old tokens would outlive the app's
        // sign-out, which ends only the session it holds.
        let redemption = ResultRedemption(
            refreshToken: prepared?.1, sealedAnswer: sealedAnswer, retryUntil: now.addingTimeInterval(window), endsSession: replaces)
        do {
            // Someone else redeemed it meanwhile: one winner, as before.
            guard try await storage.takeResult(idHash: key, now: now, redemption: redemption) else { throw GatehouseError.resultNotFound() }
        } catch StorageError.sessionGone {
            // Ended since it was read above: answered as an ended session read there is.
            throw try await sessionEnded(uid: uid, otherwise: .invalidRefreshToken())
        }
        return answer
    }

    /// The answer to a sign-in whose session ended before its first refresh token was stored:
    /// the account was disabled or deleted meanwhile, or else `otherwise` (its user signed
    /// out everywhere).
    private func sessionEnded(uid: String?, otherwise: GatehouseError) async throws -> GatehouseError {
        guard let uid else { return otherwise }
        guard let account = try await storage.account(uid: uid) else { return .userNotFound() }
        return account.disabled ? .userDisabled() : otherwise
    }

    /// The vault context of a redeemed result's kept answer: bound to the result's key.
    static func answerContext(_ key: String) -> String {
        "signin-result|\(key)"
    }
}
