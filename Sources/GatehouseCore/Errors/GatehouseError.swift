/// A failure the API reports as an RFC 9457 problem document with a stable `code`.
///
/// Details are written for the caller and never include a token, code, secret or cookie.
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
        /// `id-token-expired`
        case idTokenExpired = "id-token-expired"
        /// `internal`
        case `internal` = "internal"
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

    /// The stable code (`invalid-state`, `no-photo`, …).
    public var code: Code
    /// The HTTP status.
    public var status: Int
    /// A short, fixed summary of the code.
    public var title: String
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
    public init(code: Code, status: Int, title: String, detail: String, extensions: [String: String] = [:], retryAfter: Int? = nil) {
        self.code = code
        self.status = status
        self.title = title
        self.detail = detail
        self.extensions = extensions
        self.retryAfter = retryAfter
    }

    /// `code: detail`, as a command line shows it.
    public var description: String { "\(code): \(detail)" }

    /// 400 `invalid-argument`.
    public static func invalidArgument(_ detail: String) -> Self {
        Self(code: .invalidArgument, status: 400, title: "Invalid argument", detail: detail)
    }
    /// 404 `unknown-provider`.
    public static func unknownProvider(_ id: String) -> Self {
        Self(code: .unknownProvider, status: 404, title: "Unknown provider", detail: "No provider \(id.prefix(64).debugDescription) is configured.")
    }
    /// 400 `invalid-custom-parameter`.
    public static func invalidCustomParameter(_ name: String) -> Self {
        Self(
            code: .invalidCustomParameter, status: 400, title: "Invalid custom parameter",
            detail: "The parameter \(name.prefix(64).debugDescription) is reserved and cannot be set by the caller.")
    }
    /// 400 `invalid-return-to`.
    public static func invalidReturnTo(_ detail: String) -> Self {
        Self(code: .invalidReturnTo, status: 400, title: "Invalid return_to", detail: detail)
    }
    /// 400 `invalid-state`.
    public static func invalidState(_ detail: String) -> Self {
        Self(code: .invalidState, status: 400, title: "Invalid state", detail: detail)
    }
    /// 400 `invalid-idp-response`.
    public static func invalidIdPResponse(_ detail: String) -> Self {
        Self(code: .invalidIdPResponse, status: 400, title: "Invalid identity provider response", detail: detail)
    }
    /// 400 `operation-not-allowed`.
    public static func operationNotAllowed(_ detail: String, status: Int = 400) -> Self {
        Self(code: .operationNotAllowed, status: status, title: "Operation not allowed", detail: detail)
    }
    /// 401 `unauthenticated`: no valid session or bearer token.
    public static func unauthenticated() -> Self {
        Self(code: .unauthenticated, status: 401, title: "Not signed in", detail: "Sign in first: no valid session cookie or bearer token was sent.")
    }
    /// 404 `user-not-found`.
    public static func userNotFound() -> Self {
        Self(code: .userNotFound, status: 404, title: "User not found", detail: "The account does not exist.")
    }
    /// 403 `user-disabled`.
    public static func userDisabled() -> Self {
        Self(code: .userDisabled, status: 403, title: "User disabled", detail: "The account has been disabled by an administrator.")
    }
    /// 404 `no-photo`.
    public static func noPhoto() -> Self {
        Self(code: .noPhoto, status: 404, title: "No photo", detail: "The user has no profile photo at any linked provider.")
    }
    /// 404 `provider-not-linked`.
    public static func providerNotLinked(_ providerId: String) -> Self {
        Self(
            code: .providerNotLinked, status: 404, title: "Provider not linked",
            detail: "The account has no linked \(providerId.prefix(64).debugDescription) identity.",
            extensions: ["providerId": String(providerId.prefix(64))])
    }
    /// 502 `photo-unavailable`: one answer whatever went wrong at a photo host (refused
    /// address, connection, TLS, status, type, size), so photo URLs cannot map a network;
    /// the cause is kept in `logDetail`.
    public static func photoUnavailable(_ providerId: String, cause: String) -> Self {
        var error = Self(
            code: .photoUnavailable, status: 502, title: "Photo unavailable", detail: "The photo could not be fetched from its source.",
            extensions: ["providerId": providerId])
        error.logDetail = cause
        return error
    }

    /// 409 `provider-reauth-required`.
    public static func providerReauthRequired(_ providerId: String) -> Self {
        Self(
            code: .providerReauthRequired, status: 409, title: "Provider re-authentication required",
            detail: "The stored \(providerId) grant is no longer valid; sign in with \(providerId) again.", extensions: ["providerId": providerId])
    }
    /// 502/503/504 `upstream-unavailable`.
    public static func upstreamUnavailable(_ providerId: String, status: Int = 502, detail: String) -> Self {
        Self(code: .upstreamUnavailable, status: status, title: "Upstream unavailable", detail: detail, extensions: ["providerId": providerId])
    }
    /// 429 `upstream-rate-limited`.
    public static func upstreamRateLimited(_ providerId: String, retryAfter: Int?) -> Self {
        Self(
            code: .upstreamRateLimited, status: 429, title: "Upstream rate limited",
            detail: "\(providerId) is rate-limiting the gateway; retry later.", extensions: ["providerId": providerId], retryAfter: retryAfter)
    }
    /// 401 `invalid-id-token`: signature, issuer, audience or another claim is wrong.
    public static func invalidIdToken(_ detail: String) -> Self {
        Self(code: .invalidIDToken, status: 401, title: "Invalid ID token", detail: detail)
    }
    /// 401 `id-token-expired`.
    public static func idTokenExpired() -> Self {
        Self(code: .idTokenExpired, status: 401, title: "ID token expired", detail: "The ID token has expired.")
    }
    /// 400 `missing-or-invalid-nonce`.
    public static func missingOrInvalidNonce() -> Self {
        Self(
            code: .missingOrInvalidNonce, status: 400, title: "Missing or invalid nonce",
            detail: "The ID token's nonce is missing or does not match the one of this sign-in.")
    }
    /// 404 `not-found` for an unknown route.
    public static func notFound() -> Self {
        Self(code: .notFound, status: 404, title: "Not found", detail: "There is no such resource.")
    }
    /// 503 `storage-unavailable` with `Retry-After`: the database is down or unreachable.
    public static func storageUnavailable() -> Self {
        Self(
            code: .storageUnavailable, status: 503, title: "Storage unavailable",
            detail: "The gateway cannot reach its database right now; retry shortly.", retryAfter: 1)
    }

    /// 409 `account-exists-with-different-credential`: the verified email belongs to an account
    /// signed in with another provider; `pendingToken` links this credential once the user
    /// has signed in to that account.
    public static func accountExistsWithDifferentCredential(email: String, pendingToken: String) -> Self {
        Self(
            code: .accountExistsWithDifferentCredential, status: 409, title: "Account exists with a different credential",
            detail: "An account already uses this email address with another sign-in method: sign in with it, then link this provider.",
            extensions: ["email": email, "pendingToken": pendingToken])
    }

    /// 409 `credential-already-in-use`: the identity is linked to another account.
    public static func credentialAlreadyInUse(pendingToken: String?) -> Self {
        Self(
            code: .credentialAlreadyInUse, status: 409, title: "Credential already in use",
            detail: "This provider identity is already linked to another account.",
            extensions: pendingToken.map { ["pendingToken": $0] } ?? [:])
    }

    /// 409 `provider-already-linked`: the account has this provider with another identity.
    public static func providerAlreadyLinked(_ providerId: String) -> Self {
        Self(
            code: .providerAlreadyLinked, status: 409, title: "Provider already linked",
            detail: "The account is already linked to another \(providerId) identity; unlink it first.", extensions: ["providerId": providerId])
    }

    /// 401 `requires-recent-login`.
    public static func requiresRecentLogin(window: Int) -> Self {
        requiresRecentLogin(detail: "This operation needs a sign-in within the last \(window) seconds: re-authenticate first.")
    }

    /// 401 `requires-recent-login` with its own explanation.
    public static func requiresRecentLogin(detail: String) -> Self {
        Self(code: .requiresRecentLogin, status: 401, title: "Recent login required", detail: detail)
    }

    /// 400 `user-mismatch`: a re-authentication or pending credential belongs to another user.
    public static func userMismatch(_ detail: String) -> Self {
        Self(code: .userMismatch, status: 400, title: "User mismatch", detail: detail)
    }

    /// 400 `invalid-result`: a bound result redeemed without its verifier, or with another one.
    public static func invalidResult(_ detail: String) -> Self {
        Self(code: .invalidResult, status: 400, title: "Invalid sign-in result", detail: detail)
    }

    /// The one-time result is unknown, expired or was fetched already.
    public static func resultNotFound() -> Self {
        Self(
            code: .resultNotFound, status: 404, title: "Unknown result",
            detail:
                "No result matches this id (and verifier): it is unknown, expired (results live 60 s), already fetched, or bound to another verifier."
        )
    }

    /// 400 `invalid-pending-token`.
    public static func invalidPendingToken() -> Self {
        Self(
            code: .invalidPendingToken, status: 400, title: "Invalid pending token",
            detail: "The pending token is unknown, expired (they live 10 minutes) or was already used.")
    }

    /// 401 `invalid-refresh-token`.
    public static func invalidRefreshToken() -> Self {
        Self(
            code: .invalidRefreshToken, status: 401, title: "Invalid refresh token",
            detail: "The refresh token is unknown, expired, revoked or was already used; sign in again.")
    }

    /// 429 `rate-limited`.
    public static func rateLimited(retryAfter: Int) -> Self {
        Self(
            code: .rateLimited, status: 429, title: "Too many requests", detail: "Too many requests from this client; retry later.",
            retryAfter: retryAfter)
    }

    /// 403 `origin-not-allowed`: a cookie-authenticated change from a page of another origin.
    public static func originNotAllowed() -> Self {
        Self(
            code: .originNotAllowed, status: 403, title: "Origin not allowed",
            detail: "Requests that change state with the session cookie must come from an allowed origin.")
    }

    /// 500 `internal`: details stay in the log (by request id), never in the answer.
    public static func internalError() -> Self {
        Self(code: .`internal`, status: 500, title: "Internal error", detail: "The gateway failed to handle the request; the log has the details.")
    }
}
