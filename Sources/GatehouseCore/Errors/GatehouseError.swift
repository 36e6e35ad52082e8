/// A failure the API reports as an RFC 9457 problem document with a stable `code`.
///
/// Details are written for the caller and never include a token, code, secret or cookie.
/// The core says *what* failed (`code`, `situation`); the HTTP layer chooses the status and
/// title, so nothing here knows about HTTP.
public struct GatehouseError: Error, Sendable, Codable, Equatable, CustomStringConvertible {
    /// Every stable code; the raw values are the kebab-case wire codes of problem documents.
    /// Code compares codes through this type, never as strings.
    public enum Code: String, Sendable, Codable, CaseIterable, CustomStringConvertible {
        /// The wire code, so logs and messages show what callers see.
        public var description: String { rawValue }

        /// `account-exists-with-different-credential`
        case accountExistsWithDifferentCredential = "account-exists-with-different-credential"
        /// `credential-already-in-use`
        case credentialAlreadyInUse = "credential-already-in-use"
        /// `email-already-in-use`
        case emailAlreadyInUse = "email-already-in-use"
        /// `hook-unavailable`
        case hookUnavailable = "hook-unavailable"
        /// `id-token-expired`
        case idTokenExpired = "id-token-expired"
        /// `internal`
        case `internal` = "internal"
        /// `insufficient-provider-scope`
        case insufficientProviderScope = "insufficient-provider-scope"
        /// `invalid-argument`
        case invalidArgument = "invalid-argument"
        /// `invalid-custom-parameter`
        case invalidCustomParameter = "invalid-custom-parameter"
        /// `invalid-id-token`
        case invalidIDToken = "invalid-id-token"
        /// `invalid-idp-response`
        case invalidIdPResponse = "invalid-idp-response"
        /// `invalid-pending-token`
        case invalidPendingToken = "invalid-pending-token"
        /// `invalid-refresh-token`
        case invalidRefreshToken = "invalid-refresh-token"
        /// `invalid-result`
        case invalidResult = "invalid-result"
        /// `invalid-return-to`
        case invalidReturnTo = "invalid-return-to"
        /// `invalid-state`
        case invalidState = "invalid-state"
        /// `link-confirmation-required`
        case linkConfirmationRequired = "link-confirmation-required"
        /// `method-not-allowed`
        case methodNotAllowed = "method-not-allowed"
        /// `missing-or-invalid-nonce`
        case missingOrInvalidNonce = "missing-or-invalid-nonce"
        /// `no-photo`
        case noPhoto = "no-photo"
        /// `not-found`
        case notFound = "not-found"
        /// `not-ready`
        case notReady = "not-ready"
        /// `operation-not-allowed`
        case operationNotAllowed = "operation-not-allowed"
        /// `origin-not-allowed`
        case originNotAllowed = "origin-not-allowed"
        /// `path-not-allowed`
        case pathNotAllowed = "path-not-allowed"
        /// `permission-denied`
        case permissionDenied = "permission-denied"
        /// `photo-unavailable`
        case photoUnavailable = "photo-unavailable"
        /// `provider-already-linked`
        case providerAlreadyLinked = "provider-already-linked"
        /// `provider-misconfigured`
        case providerMisconfigured = "provider-misconfigured"
        /// `provider-not-linked`
        case providerNotLinked = "provider-not-linked"
        /// `provider-reauth-required`
        case providerReauthRequired = "provider-reauth-required"
        /// `rate-limited`
        case rateLimited = "rate-limited"
        /// `requires-recent-login`
        case requiresRecentLogin = "requires-recent-login"
        /// `result-not-found`
        case resultNotFound = "result-not-found"
        /// `sign-in-cancelled`
        case signInCancelled = "sign-in-cancelled"
        /// `sign-in-denied`
        case signInDenied = "sign-in-denied"
        /// `storage-unavailable`
        case storageUnavailable = "storage-unavailable"
        /// `unauthenticated`
        case unauthenticated = "unauthenticated"
        /// `unknown-provider`
        case unknownProvider = "unknown-provider"
        /// `upstream-rate-limited`
        case upstreamRateLimited = "upstream-rate-limited"
        /// `upstream-unavailable`
        case upstreamUnavailable = "upstream-unavailable"
        /// `user-disabled`
        case userDisabled = "user-disabled"
        /// `user-mismatch`
        case userMismatch = "user-mismatch"
        /// `user-not-found`
        case userNotFound = "user-not-found"
    }

    /// Which of several situations a code stands for, where callers handle them alike but
    /// the protocol tells them apart (a refusal by policy from a hidden feature, a timeout from
    /// a bad answer).
    public enum Situation: String, Sendable, Codable, Equatable {
        /// The code's ordinary meaning.
        case usual
        /// Refused by the operator's policy for this caller (a tenant restriction).
        case refusedByPolicy
        /// A feature turned off on this gateway, answered as if it did not exist so that it
        /// reveals nothing (email-enumeration protection).
        case hiddenFeature
        /// A body is larger than the gateway accepts: the request's (`invalid-argument`, 413), or
        /// a provider's answer to what the caller asked for (`upstream-unavailable`, 502).
        case tooLarge
        /// The upstream did not answer in time.
        case timedOut
        /// The upstream cannot serve now and says so (a 503, an open circuit, a refusal to be
        /// retried later); a retry may succeed.
        case temporarilyUnavailable
        /// The upstream answered, refusing this request (a 4xx other than 401 and 429: a token
        /// it will not honour for this resource, an account it does not know; for a photo URL a
        /// user chose or shaped, any answer but a 5xx): it is up, so no breaker counts it, and
        /// what one caller's request draws never stops the others'.
        case refusedByUpstream
        /// The gateway itself had as many calls to upstreams in flight and waiting as it allows
        /// (`GATEHOUSE_UPSTREAM_CALLS`; `upstream-unavailable`, 503), or as it allows one user
        /// (`GATEHOUSE_UPSTREAM_CALLS_PER_USER`; `rate-limited`, 429): nothing was sent, no
        /// breaker counts it, and no failure is remembered; a retry in a moment may succeed.
        case overloaded
    }

    /// The stable code (`invalid-state`, `no-photo`, …).
    public var code: Code
    /// Which situation of the code occurred.
    public var situation: Situation
    /// What happened in this case.
    public var detail: String
    /// Extra members of the problem document (`providerId`, `email`, …).
    public var extensions: [String: String]
    /// Seconds to wait, sent as `Retry-After` (rate limits).
    public var retryAfter: Int?
    /// What really went wrong, for the log only (never in the problem document): an error
    /// that is deliberately uniform to callers keeps its cause here.
    public var logDetail: String?

    /// Creates an error.
    public init(
        code: Code, situation: Situation = .usual, detail: String, extensions: [String: String] = [:], retryAfter: Int? = nil
    ) {
        self.code = code
        self.situation = situation
        self.detail = detail
        self.extensions = extensions
        self.retryAfter = retryAfter
    }

    /// Decodes a stored error (a sign-in result's failure); one stored before situations
    /// existed is in its usual one.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        code = try container.decode(Code.self, forKey: .code)
        situation = try container.decodeIfPresent(Situation.self, forKey: .situation) ?? .usual
        detail = try container.decode(String.self, forKey: .detail)
        extensions = try container.decodeIfPresent([String: String].self, forKey: .extensions) ?? [:]
        retryAfter = try container.decodeIfPresent(Int.self, forKey: .retryAfter)
        logDetail = try container.decodeIfPresent(String.self, forKey: .logDetail)
    }

    /// `code: detail`, as a command line shows it.
    public var description: String { "\(code): \(detail)" }

    /// `invalid-argument`.
    public static func invalidArgument(_ detail: String) -> Self {
        Self(code: .invalidArgument, detail: detail)
    }
    /// `unknown-provider`.
    public static func unknownProvider(_ id: String) -> Self {
        Self(code: .unknownProvider, detail: "No provider \(id.truncated(toBytes: 64).debugDescription) is configured.")
    }
    /// `invalid-custom-parameter`.
    public static func invalidCustomParameter(_ name: String) -> Self {
        Self(
            code: .invalidCustomParameter,
            detail: "The parameter \(name.truncated(toBytes: 64).debugDescription) is reserved and cannot be set by the caller.")
    }
    /// `invalid-return-to`.
    public static func invalidReturnTo(_ detail: String) -> Self {
        Self(code: .invalidReturnTo, detail: detail)
    }
    /// `invalid-state`.
    public static func invalidState(_ detail: String) -> Self {
        Self(code: .invalidState, detail: detail)
    }
    /// `invalid-idp-response`.
    public static func invalidIdPResponse(_ detail: String) -> Self {
        Self(code: .invalidIdPResponse, detail: detail)
    }
    /// `operation-not-allowed`: refused in this `situation` (`.refusedByPolicy` for a
    /// caller the operator's policy keeps out, `.hiddenFeature` for a feature turned off).
    public static func operationNotAllowed(_ detail: String, situation: Situation = .usual) -> Self {
        Self(code: .operationNotAllowed, situation: situation, detail: detail)
    }
    /// `unauthenticated`: no valid session or bearer token.
    public static func unauthenticated() -> Self {
        Self(code: .unauthenticated, detail: "Sign in first: no valid session cookie or bearer token was sent.")
    }
    /// `user-not-found`.
    public static func userNotFound() -> Self {
        Self(code: .userNotFound, detail: "The account does not exist.")
    }
    /// `user-disabled`.
    public static func userDisabled() -> Self {
        Self(code: .userDisabled, detail: "The account has been disabled by an administrator.")
    }
    /// `no-photo`.
    public static func noPhoto() -> Self {
        Self(code: .noPhoto, detail: "The user has no profile photo at any linked provider.")
    }
    /// `provider-not-linked`.
    public static func providerNotLinked(_ providerId: String) -> Self {
        Self(
            code: .providerNotLinked, detail: "The account has no linked \(providerId.truncated(toBytes: 64).debugDescription) identity.",
            extensions: ["providerId": providerId.truncated(toBytes: 64)])
    }
    /// `photo-unavailable`: one answer whatever went wrong at a photo host (refused
    /// address, connection, TLS, status, type, size), so photo URLs cannot map a network;
    /// the cause is kept in `logDetail`.
    public static func photoUnavailable(_ providerId: String, cause: String) -> Self {
        var error = Self(
            code: .photoUnavailable, detail: "The photo could not be fetched from its source.",
            extensions: ["providerId": providerId])
        error.logDetail = cause
        return error
    }

    /// `path-not-allowed`: a passthrough call outside the operator's API policy, or a path
    /// that could leave the provider's API base.
    public static func pathNotAllowed(_ detail: String) -> Self {
        Self(code: .pathNotAllowed, detail: detail)
    }
    /// `insufficient-provider-scope`: the provider refused an allowed call because the stored
    /// grant lacks a scope; `missingScopes` (space-separated) says which to ask for with
    /// `mode=reauthenticate&scope=…`.
    public static func insufficientProviderScope(_ providerId: String, missing: [String]) -> Self {
        let named = missing.isEmpty ? "a scope the grant lacks" : missing.joined(separator: " ")
        return Self(
            code: .insufficientProviderScope,
            detail: "\(providerId) refused the call: the stored grant lacks \(named). Sign in again with mode=reauthenticate and the scope.",
            extensions: ["providerId": providerId, "missingScopes": missing.joined(separator: " ")])
    }
    /// `provider-reauth-required`.
    public static func providerReauthRequired(_ providerId: String) -> Self {
        Self(
            code: .providerReauthRequired, detail: "The stored \(providerId) grant is no longer valid; sign in with \(providerId) again.",
            extensions: ["providerId": providerId])
    }
    /// `upstream-unavailable`: a bad answer, or the `situation` (`.timedOut`,
    /// `.temporarilyUnavailable`).
    public static func upstreamUnavailable(_ providerId: String, situation: Situation = .usual, detail: String) -> Self {
        Self(code: .upstreamUnavailable, situation: situation, detail: detail, extensions: ["providerId": providerId])
    }
    /// `invalid-argument` in `.timedOut`: the caller's streamed request body did not arrive
    /// within the provider's timeout (408); the provider is not at fault.
    public static func requestBodyTimedOut() -> Self {
        Self(
            code: .invalidArgument, situation: .timedOut,
            detail: "The request body did not arrive in time: the gateway stopped waiting for the rest of it.")
    }

    /// Whether this is `requestBodyTimedOut()`: the caller's fault, with nothing heard from
    /// the provider.
    public var isRequestBodyTimeout: Bool { code == .invalidArgument && situation == .timedOut }

    /// `sign-in-cancelled`: the user chose Cancel on the gateway's page that asks whether an
    /// app may have the sign-in.
    public static func signInCancelled() -> Self {
        Self(code: .signInCancelled, detail: "The user cancelled the sign-in on the gateway's consent page; nothing was stored.")
    }

    /// `sign-in-denied`: the app's hook refused the sign-in; `message` is the hook's, for
    /// the page to show (plain text, at most 256 characters, no control characters).
    public static func signInDenied(message: String) -> Self {
        Self(code: .signInDenied, detail: message, extensions: ["message": message])
    }

    /// `hook-unavailable`: the app's hook could not be asked (down, slow, a malformed
    /// answer) and the gateway is configured to deny then; retry after `retryAfter` seconds
    /// (the rest of the hook breaker's open time when it is open). Nothing was stored.
    public static func hookUnavailable(_ event: String, retryAfter: Int = 1) -> Self {
        Self(
            code: .hookUnavailable, detail: "The app's \(event) hook could not be asked; nothing was stored. Retry shortly.",
            retryAfter: retryAfter)
    }

    /// `upstream-rate-limited`.
    public static func upstreamRateLimited(_ providerId: String, retryAfter: Int?) -> Self {
        // The provider's own Retry-After, passed on only when it is one (RFC 9110 §10.2.3: a
        // non-negative delay), and never more than a day.
        Self(
            code: .upstreamRateLimited, detail: "\(providerId) is rate-limiting the gateway; retry later.", extensions: ["providerId": providerId],
            retryAfter: retryAfter.flatMap { $0 >= 0 ? min($0, 86_400) : nil })
    }
    /// `invalid-id-token`: signature, issuer, audience or another claim is wrong.
    public static func invalidIdToken(_ detail: String) -> Self {
        Self(code: .invalidIDToken, detail: detail)
    }
    /// `id-token-expired`.
    public static func idTokenExpired() -> Self {
        Self(code: .idTokenExpired, detail: "The ID token has expired.")
    }
    /// `missing-or-invalid-nonce`.
    public static func missingOrInvalidNonce() -> Self {
        Self(
            code: .missingOrInvalidNonce, detail: "The ID token's nonce is missing or does not match the one of this sign-in.")
    }
    /// `not-found` for an unknown route.
    public static func notFound() -> Self {
        Self(code: .notFound, detail: "There is no such resource.")
    }
    /// `storage-unavailable`, retry after a second: the database is down or unreachable.
    public static func storageUnavailable() -> Self {
        Self(
            code: .storageUnavailable, detail: "The gateway cannot reach its database right now; retry shortly.", retryAfter: 1)
    }

    /// `account-exists-with-different-credential`: the verified email belongs to an account
    /// signed in with another provider; `pendingToken` links this credential once the user
    /// has signed in to that account.
    public static func accountExistsWithDifferentCredential(email: String, pendingToken: String) -> Self {
        Self(
            code: .accountExistsWithDifferentCredential,
            detail: "An account already uses this email address with another sign-in method: sign in with it, then link this provider.",
            extensions: ["email": email, "pendingToken": pendingToken])
    }

    /// `email-already-in-use`: the identity to link reports a verified email that another
    /// account holds (one account per verified email).
    public static func emailAlreadyInUse(email: String) -> Self {
        Self(
            code: .emailAlreadyInUse,
            detail: "Another account already uses this identity's verified email address: sign in to that account to link it there.",
            extensions: ["email": email])
    }

    /// `credential-already-in-use`: the identity is linked to another account.
    public static func credentialAlreadyInUse(pendingToken: String?) -> Self {
        Self(
            code: .credentialAlreadyInUse, detail: "This provider identity is already linked to another account.",
            extensions: pendingToken.map { ["pendingToken": $0] } ?? [:])
    }

    /// `link-confirmation-required`: a link held for an app waits for the app's user to confirm
    /// the identity it names (any local user can reach a loopback page, and any page can hand a
    /// scheme's callback to the app, so the result it received may carry someone else's: that
    /// of whoever opened the start URL first). Nothing was written;
    /// the result stays for `confirm_link`. The identity's text is the provider's, shown as
    /// plain text (no control, format or bidirectional characters); `emailStatus` says whether
    /// the provider vouches for `email` (`verified` or `unverified`: words, not a string
    /// `"false"` a script would read as true), which an app must not present as proof otherwise.
    public static func linkConfirmationRequired(_ profile: ProviderProfile) -> Self {
        var identity = ["providerId": profile.providerId, "federatedId": profile.federatedId]
        identity["email"] = profile.email
        identity["emailStatus"] = profile.email == nil ? nil : (profile.emailCountsAsVerified ? "verified" : "unverified")
        identity["displayName"] = profile.displayName
        identity["username"] = profile.username
        identity["tenantId"] = profile.tenantId
        return Self(
            code: .linkConfirmationRequired,
            detail: "Show the user the identity this link would add; redeem the result again with confirm_link true (or false to cancel).",
            extensions: identity.mapValues { $0.displayable(characters: 256, bytes: 1_024) })
    }

    /// `provider-already-linked`: the account has this provider with another identity.
    public static func providerAlreadyLinked(_ providerId: String) -> Self {
        Self(
            code: .providerAlreadyLinked, detail: "The account is already linked to another \(providerId) identity; unlink it first.",
            extensions: ["providerId": providerId])
    }

    /// `requires-recent-login`.
    public static func requiresRecentLogin(window: Int) -> Self {
        requiresRecentLogin(
            detail:
                "This operation needs a sign-in within the last \(window) seconds (counted from the authentication at the provider, where its ID token says when that was): re-authenticate first."
        )
    }

    /// `requires-recent-login` with its own explanation.
    public static func requiresRecentLogin(detail: String) -> Self {
        Self(code: .requiresRecentLogin, detail: detail)
    }

    /// `user-mismatch`: a re-authentication or pending credential belongs to another user.
    public static func userMismatch(_ detail: String) -> Self {
        Self(code: .userMismatch, detail: detail)
    }

    /// `invalid-result`: a bound result redeemed without its verifier, or with another one.
    public static func invalidResult(_ detail: String) -> Self {
        Self(code: .invalidResult, detail: detail)
    }

    /// The one-time result is unknown, expired or was fetched already.
    public static func resultNotFound() -> Self {
        Self(
            code: .resultNotFound,
            detail:
                "No result matches this id (and verifier): it is unknown, expired (results live 60 s; a held link, ten minutes), already fetched, or bound to another verifier."
        )
    }

    /// `invalid-pending-token`.
    public static func invalidPendingToken() -> Self {
        Self(
            code: .invalidPendingToken, detail: "The pending token is unknown, expired (they live 10 minutes) or was already used.")
    }

    /// `invalid-refresh-token`.
    public static func invalidRefreshToken() -> Self {
        Self(
            code: .invalidRefreshToken, detail: "The refresh token is unknown, expired, revoked or was already used; sign in again.")
    }

    /// `rate-limited`, with the seconds to wait.
    public static func rateLimited(retryAfter: Int) -> Self {
        Self(
            code: .rateLimited, detail: "Too many requests from this client; retry later.",
            retryAfter: retryAfter)
    }

    /// `origin-not-allowed`: a cookie-authenticated change, or a bound sign-in's start, from a
    /// page of another origin.
    public static func originNotAllowed(
        _ detail: String = "Requests that change state with the session cookie must come from an allowed origin."
    ) -> Self {
        Self(code: .originNotAllowed, detail: detail)
    }

    /// `internal`: details stay in the log (by request id), never in the answer.
    public static func internalError() -> Self {
        Self(code: .`internal`, detail: "The gateway failed to handle the request; the log has the details.")
    }
}
