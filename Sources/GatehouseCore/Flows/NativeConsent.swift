import Foundation
import Logging

/// What the consent page shows: a native or desktop app is about to receive a sign-in.
///
/// Without proof of a native client's identity, an authorization must not complete without the
/// user (RFC 8252 §8.6): any program on the device can start its own flow with its own
/// `result_challenge` and a loopback or scheme return, and a provider that approves silently
/// (the user approved Gatehouse before) would hand it the user's session. So an app's return
/// stops at a page of the gateway's own origin that names the app and the account, and only
/// the user's Continue — a POST bound to the browser's transaction cookie and to a one-time
/// token in the page — stores anything.
public struct ConsentRequest: Sendable, Equatable {
    /// The one-time token the page posts back (with the transaction cookie).
    public var token: String
    /// The app's display name (`GATEHOUSE_APP_NAMES`), or `nil` when none was registered.
    public var appName: String?
    /// The app's return address (`com.example.app:/oauth2redirect`, `http://127.0.0.1:53124/callback`).
    public var returnTo: String
    /// The account at the provider: its email, else its name or username.
    public var account: String
    /// For a link or a re-authentication, the gateway account it is for: its verified email,
    /// else its uid. A start URL handed to someone else would otherwise add *their* identity to
    /// the sender's account without the page saying whose account that is; an unverified
    /// address or a display name is whatever the sender gave their own account, so it could
    /// name the receiver.
    public var targetAccount: String?
    /// The provider signed in with.
    public var providerId: String
    /// Sign-in, link or re-authentication.
    public var mode: SignInMode
}

/// A provider sign-in held until the user answers the consent page: sealed with the token
/// vault (it holds the provider's tokens), stored as a one-time entry of the results table.
struct PendingConsent: Codable {
    var providerId: String
    var mode: SignInMode
    var uid: String?
    /// The session that started a link or re-authentication (`SignInTransaction.sessionFamilyId`);
    /// `nil` for a sign-in, and absent from one held by an earlier version.
    var sessionFamilyId: String?
    var returnTo: String
    var resultChallenge: String?
    var profile: ProviderProfile
    var tokens: ProviderTokens
    /// The provider's ID token claims, for the hooks.
    var idTokenClaims: [String: JSONValue]?
    /// When the user authenticated at the provider (`SignInService.authenticationTime`, at the
    /// callback); absent from one held by an earlier version.
    var authenticatedAt: Date?
}

extension SignInService {
    /// How long the consent page can be answered.
    public static let consentLifetime: TimeInterval = 600

    /// The store key of a pending consent: the page's token and the browser's transaction
    /// cookie together, so neither alone answers it.
    static func consentKey(token: String, binding: String) -> String {
        SecureRandom.digest("consent|\(token)|\(binding)")
    }

    /// The vault context of a pending consent, bound to its key.
    static func consentContext(_ key: String) -> String {
        "signin-consent|\(key)"
    }

    /// Holds a completed provider sign-in for an app's return and describes the page to show.
    /// Nothing of the account, its links or sessions is written yet.
    func holdForConsent(
        _ completed: ProviderSignIn, authenticatedAt: Date, transaction: SignInTransaction, binding: String
    ) async throws -> ConsentRequest {
        let token = SecureRandom.token()
        let key = Self.consentKey(token: token, binding: binding)
        let pending = PendingConsent(
            providerId: transaction.providerId, mode: transaction.mode, uid: transaction.uid,
            sessionFamilyId: transaction.sessionFamilyId, returnTo: transaction.returnTo,
            resultChallenge: transaction.resultChallenge, profile: completed.profile, tokens: completed.tokens,
            idTokenClaims: completed.idTokenClaims?.all, authenticatedAt: authenticatedAt)
        let sealed = try await tokens.vault.seal(try JSONCoding.encoder().encode(pending), context: Self.consentContext(key))
        try await storage.insertResult(
            idHash: key, payload: Data(sealed.utf8), expiresAt: configuration.clock.now().addingTimeInterval(Self.consentLifetime))
        let profile = completed.profile
        var target: String?
        if let uid = transaction.uid, let account = try await storage.account(uid: uid) {
            let unified = try await accounts.unifiedProfile(for: account)
            target = unified.emailVerified ? unified.email ?? uid : uid
        }
        return ConsentRequest(
            token: token, appName: appName(for: transaction.returnTo), returnTo: transaction.returnTo,
            account: profile.email ?? profile.displayName ?? profile.username ?? profile.federatedId, targetAccount: target,
            providerId: transaction.providerId, mode: transaction.mode)
    }

    /// The display name configured for the allow-list entry that admits `returnTo`.
    func appName(for returnTo: String) -> String? {
        configuration.appNames.sorted { $0.key < $1.key }.first { ReturnToPolicy(allowList: [$0.key]).kind(of: returnTo) != nil }?.value
    }

    /// The user's answer on the consent page: `proceed` completes the sign-in (account, link,
    /// session, as the callback would have) and sends the browser to the app with the result;
    /// Cancel stores nothing and sends the app the result `403 sign-in-cancelled`. Answered
    /// once; an unknown, answered, expired or foreign (another browser's) token is `invalid-state`.
    /// `browserSession` is the family of the session the answering browser's cookie names:
    /// a re-authentication started by another session (the app's, through its start URL)
    /// replaces that one when the app redeems the result; one the browser's own session
    /// started leaves it, since its replacement goes to the app, not to the browser.
    public func answerConsent(
        token: String, binding: String?, proceed: Bool, browserSession: String? = nil, client: SignInClient, logger: Logger
    ) async throws -> Completion {
        guard let binding, !binding.isEmpty, binding.utf8.count <= 512, !token.isEmpty, token.utf8.count <= 128 else {
            throw GatehouseError.invalidState("The consent page was not answered from the browser that signed in.")
        }
        let key = Self.consentKey(token: token, binding: binding)
        let now = configuration.clock.now()
        guard case .pending(let payload)? = try await storage.result(idHash: key, now: now),
            try await storage.takeResult(idHash: key, now: now, redemption: ResultRedemption(refreshToken: nil, sealedAnswer: nil, retryUntil: now))
        else {
            throw GatehouseError.invalidState("This sign-in is unknown, already answered, expired, or was started in another browser.")
        }
        let pending = try JSONCoding.decoder().decode(
            PendingConsent.self, from: try await tokens.vault.open(String(decoding: payload, as: UTF8.self), context: Self.consentContext(key)))
        guard returnToPolicy.kind(of: pending.returnTo) != nil else {
            throw refusedReturn(providerId: pending.providerId, mode: pending.mode, logger: logger)
        }
        let outcome: StoredResult
        let resultID = SecureRandom.token()
        if proceed, pending.mode == .link {
            do {
                // Written when the app redeems the result with its verifier
                // (`StoredResult.heldLink`), and only held while the session that started it lives.
                try await requireLiveSession(pending.sessionFamilyId)
                let key = ResultBinding.storageKey(resultID: resultID, challenge: pending.resultChallenge)
                outcome = .heldLink(
                    sealed: try await tokens.vault.seal(try JSONCoding.encoder().encode(pending), context: Self.heldLinkContext(key)))
                logger.info("link held for the app", metadata: ["provider.id": "\(pending.providerId)"])
            } catch let error as GatehouseError {
                outcome = .failure(error)
            }
        } else if proceed {
            do {
                let (answer, familyId) = try await complete(pending, client: client, logger: logger)
                let replaces = pending.mode == .reauthenticate && pending.sessionFamilyId != browserSession ? pending.sessionFamilyId : nil
                outcome = .answer(answer, familyId: familyId, replaces: replaces)
            } catch let error as GatehouseError {
                outcome = .failure(error)
            }
        } else {
            outcome = .failure(cancelled(pending, by: "the user", logger: logger))
        }
        let redirect = try await deliver(outcome, returnTo: pending.returnTo, challenge: pending.resultChallenge, resultID: resultID)
        return Completion(redirectURL: redirect, sessionValue: nil)
    }

    /// The vault context of a held link, bound to its result's key.
    static func heldLinkContext(_ key: String) -> String {
        "signin-held-link|\(key)"
    }

    /// The sign-in a held link (`StoredResult.heldLink`) holds, opened with its result's key.
    func openHeldLink(_ sealed: String, key: String) async throws -> PendingConsent {
        try JSONCoding.decoder().decode(PendingConsent.self, from: try await tokens.vault.open(sealed, context: Self.heldLinkContext(key)))
    }

    /// Counts and logs a held sign-in cancelled by `who` (the user on the consent page, the app
    /// answering a held link): the error its result answers.
    func cancelled(_ pending: PendingConsent, by who: String, logger: Logger) -> GatehouseError {
        logger.info(
            "sign-in cancelled", metadata: ["provider.id": "\(pending.providerId)", "signin.mode": "\(pending.mode)", "cancelled.by": "\(who)"])
        metrics.signIn(providerId: pending.providerId, mode: pending.mode, outcome: GatehouseError.Code.signInCancelled.rawValue)
        return .signInCancelled()
    }

    /// Completes a held sign-in (account, link, session, as the callback would have), counted
    /// and logged like one: its tokenless answer and its session's family, if one began. The
    /// hooks hear `client`: the consent page's browser, or the app redeeming a held link.
    func complete(_ pending: PendingConsent, client: SignInClient, logger: Logger) async throws -> (answer: Data, familyId: String?) {
        do {
            let established = try await establish(
                ProviderSignIn(tokens: pending.tokens, profile: pending.profile), providerId: pending.providerId, mode: pending.mode,
                uid: pending.uid, startedBy: pending.sessionFamilyId,
                origin: SignInOrigin(
                    client: client, flow: .redirect, returnTo: pending.returnTo, native: true, idTokenClaims: pending.idTokenClaims,
                    authenticatedAt: pending.authenticatedAt),
                logger: logger)
            metrics.signIn(providerId: pending.providerId, mode: pending.mode, outcome: "ok")
            return (try established.result.tokenlessAnswer(), established.session?.familyId)
        } catch let error as GatehouseError {
            logger.notice(
                "sign-in failed",
                metadata: ["provider.id": "\(pending.providerId)", "signin.mode": "\(pending.mode)", "error.code": "\(error.code)"])
            metrics.signIn(providerId: pending.providerId, mode: pending.mode, outcome: error.code.rawValue)
            throw error
        }
    }
}
