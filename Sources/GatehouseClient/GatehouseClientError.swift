import Foundation

/// What went wrong, typed: a problem document's stable `code`, or a failure before one.
public enum GatehouseClientError: Error, Sendable, Equatable {
    /// The gateway answered with a problem document.
    case problem(Problem)
    /// An operation needs a signed-in client (no credentials yet, or signed out).
    case notSignedIn
    /// The URL the app was called back with is not the sign-in's return address, or has no result.
    case invalidCallback
    /// A caller's argument the client refuses before any request.
    case invalidArgument(String)
    /// The gateway answered something that is neither the expected answer nor a problem
    /// document: a redirect among them, which the client never follows (`baseURL` must be the
    /// gateway's public URL itself).
    case unexpectedAnswer(status: Int)
}

/// An RFC 9457 problem document as the gateway sends it.
public struct Problem: Sendable, Equatable {
    /// The stable code; switch on it.
    public var code: ProblemCode
    /// The HTTP status.
    public var status: Int
    /// A short summary of the code.
    public var title: String
    /// What happened in this case.
    public var detail: String
    /// Seconds to wait before retrying (`Retry-After`), when the gateway said.
    public var retryAfter: Int?
    /// Extra string members (`providerId`, `email`, `pendingToken`, …).
    public var extensions: [String: String]

    /// A problem as the gateway would send it (an app's tests stand in for the gateway with one).
    public init(code: ProblemCode, status: Int, title: String, detail: String, retryAfter: Int? = nil, extensions: [String: String] = [:]) {
        self.code = code
        self.status = status
        self.title = title
        self.detail = detail
        self.retryAfter = retryAfter
        self.extensions = extensions
    }
}

/// The gateway's problem codes (OpenAPI `Problem.code`); a code this version does not know
/// arrives as `.other`.
public enum ProblemCode: Sendable, Hashable {
    /// `account-exists-with-different-credential`
    case accountExistsWithDifferentCredential
    /// `credential-already-in-use`
    case credentialAlreadyInUse
    /// `email-already-in-use` (`Problem.extensions`: `email`)
    case emailAlreadyInUse
    /// `id-token-expired`
    case idTokenExpired
    /// `internal`
    case `internal`
    /// `insufficient-provider-scope`
    case insufficientProviderScope
    /// `invalid-argument`
    case invalidArgument
    /// `invalid-custom-parameter`
    case invalidCustomParameter
    /// `invalid-id-token`
    case invalidIDToken
    /// `invalid-idp-response`
    case invalidIdPResponse
    /// `invalid-pending-token`
    case invalidPendingToken
    /// `invalid-refresh-token`
    case invalidRefreshToken
    /// `invalid-result`
    case invalidResult
    /// `invalid-return-to`
    case invalidReturnTo
    /// `invalid-state`
    case invalidState
    /// `link-confirmation-required`: a link started from the app names an identity
    /// (`Problem.extensions`: `providerId`, `federatedId`, `username`, `displayName`, `email`
    /// with `emailStatus` (`verified` or `unverified`), `tenantId`) for the app's user to confirm;
    /// `completeSignIn(callback:for:confirmingLink:)` answers.
    case linkConfirmationRequired
    /// `method-not-allowed`
    case methodNotAllowed
    /// `missing-or-invalid-nonce`
    case missingOrInvalidNonce
    /// `no-photo`
    case noPhoto
    /// `not-found`
    case notFound
    /// `not-ready`
    case notReady
    /// `operation-not-allowed`
    case operationNotAllowed
    /// `origin-not-allowed`
    case originNotAllowed
    /// `path-not-allowed`
    case pathNotAllowed
    /// `permission-denied`
    case permissionDenied
    /// `photo-unavailable`
    case photoUnavailable
    /// `provider-already-linked`
    case providerAlreadyLinked
    /// `provider-misconfigured`
    case providerMisconfigured
    /// `provider-not-linked`
    case providerNotLinked
    /// `provider-reauth-required`
    case providerReauthRequired
    /// `rate-limited`
    case rateLimited
    /// `requires-recent-login`
    case requiresRecentLogin
    /// `result-not-found`
    case resultNotFound
    /// `sign-in-cancelled`: the user chose Cancel on the gateway's consent page.
    case signInCancelled
    /// `sign-in-denied`: the app's own hook refused the sign-in; the problem's `message`
    /// is the hook's, for the app to show.
    case signInDenied
    /// `hook-unavailable`: the app's hook could not be asked; retry shortly.
    case hookUnavailable
    /// `storage-unavailable`
    case storageUnavailable
    /// `unauthenticated`
    case unauthenticated
    /// `unknown-provider`
    case unknownProvider
    /// `upstream-rate-limited`
    case upstreamRateLimited
    /// `upstream-unavailable`
    case upstreamUnavailable
    /// `user-disabled`
    case userDisabled
    /// `user-mismatch`
    case userMismatch
    /// `user-not-found`
    case userNotFound
    /// A code added to the gateway after this client.
    case other(String)

    /// The code of a wire value.
    public init(rawValue: String) {
        self = Self.known[rawValue] ?? .other(rawValue)
    }

    /// The wire value.
    public var rawValue: String {
        switch self {
        case .accountExistsWithDifferentCredential: "account-exists-with-different-credential"
        case .credentialAlreadyInUse: "credential-already-in-use"
        case .emailAlreadyInUse: "email-already-in-use"
        case .idTokenExpired: "id-token-expired"
        case .`internal`: "internal"
        case .insufficientProviderScope: "insufficient-provider-scope"
        case .invalidArgument: "invalid-argument"
        case .invalidCustomParameter: "invalid-custom-parameter"
        case .invalidIDToken: "invalid-id-token"
        case .invalidIdPResponse: "invalid-idp-response"
        case .invalidPendingToken: "invalid-pending-token"
        case .invalidRefreshToken: "invalid-refresh-token"
        case .invalidResult: "invalid-result"
        case .invalidReturnTo: "invalid-return-to"
        case .invalidState: "invalid-state"
        case .linkConfirmationRequired: "link-confirmation-required"
        case .methodNotAllowed: "method-not-allowed"
        case .missingOrInvalidNonce: "missing-or-invalid-nonce"
        case .noPhoto: "no-photo"
        case .notFound: "not-found"
        case .notReady: "not-ready"
        case .operationNotAllowed: "operation-not-allowed"
        case .originNotAllowed: "origin-not-allowed"
        case .pathNotAllowed: "path-not-allowed"
        case .permissionDenied: "permission-denied"
        case .photoUnavailable: "photo-unavailable"
        case .providerAlreadyLinked: "provider-already-linked"
        case .providerMisconfigured: "provider-misconfigured"
        case .providerNotLinked: "provider-not-linked"
        case .providerReauthRequired: "provider-reauth-required"
        case .rateLimited: "rate-limited"
        case .requiresRecentLogin: "requires-recent-login"
        case .resultNotFound: "result-not-found"
        case .signInCancelled: "sign-in-cancelled"
        case .signInDenied: "sign-in-denied"
        case .hookUnavailable: "hook-unavailable"
        case .storageUnavailable: "storage-unavailable"
        case .unauthenticated: "unauthenticated"
        case .unknownProvider: "unknown-provider"
        case .upstreamRateLimited: "upstream-rate-limited"
        case .upstreamUnavailable: "upstream-unavailable"
        case .userDisabled: "user-disabled"
        case .userMismatch: "user-mismatch"
        case .userNotFound: "user-not-found"
        case .other(let raw): raw
        }
    }

    /// Every code this client knows.
    public static let allKnown: [ProblemCode] = [
        .accountExistsWithDifferentCredential,
        .credentialAlreadyInUse,
        .emailAlreadyInUse,
        .idTokenExpired,
        .`internal`,
        .insufficientProviderScope,
        .invalidArgument,
        .invalidCustomParameter,
        .invalidIDToken,
        .invalidIdPResponse,
        .invalidPendingToken,
        .invalidRefreshToken,
        .invalidResult,
        .invalidReturnTo,
        .invalidState,
        .linkConfirmationRequired,
        .methodNotAllowed,
        .missingOrInvalidNonce,
        .noPhoto,
        .notFound,
        .notReady,
        .operationNotAllowed,
        .originNotAllowed,
        .pathNotAllowed,
        .permissionDenied,
        .photoUnavailable,
        .providerAlreadyLinked,
        .providerMisconfigured,
        .providerNotLinked,
        .providerReauthRequired,
        .rateLimited,
        .requiresRecentLogin,
        .resultNotFound,
        .signInCancelled,
        .signInDenied,
        .hookUnavailable,
        .storageUnavailable,
        .unauthenticated,
        .unknownProvider,
        .upstreamRateLimited,
        .upstreamUnavailable,
        .userDisabled,
        .userMismatch,
        .userNotFound,
    ]

    private static let known: [String: ProblemCode] = Dictionary(uniqueKeysWithValues: allKnown.map { ($0.rawValue, $0) })
}
