import Foundation
import GatehouseCore
import HTTPTypes
import Hummingbird

/// The HTTP side of the core's errors: the status and title of each code (and situation) are
/// chosen here, so the core never names a status. Thrown past a route, `ProblemMapping`
/// renders it; Hummingbird would too, through `HTTPResponseError`.
extension GatehouseError: HTTPResponseError {
    /// The status of this code in this situation.
    public var status: HTTPResponse.Status {
        switch (code, situation) {
        case (.operationNotAllowed, .refusedByPolicy): .forbidden
        case (.operationNotAllowed, .hiddenFeature): .notFound
        case (.invalidArgument, .tooLarge): .contentTooLarge
        case (.invalidArgument, .timedOut): .requestTimeout
        case (.upstreamUnavailable, .timedOut): .gatewayTimeout
        case (.upstreamUnavailable, .temporarilyUnavailable), (.upstreamUnavailable, .overloaded): .serviceUnavailable
        default: Self.usualStatus(code)
        }
    }

    /// A short, fixed summary of the code (the problem document's `title`).
    public var title: String {
        switch (code, situation) {
        case (.invalidArgument, .tooLarge): "Request too large"
        case (.invalidArgument, .timedOut): "Request body too slow"
        default: Self.usualTitle(code)
        }
    }

    /// The problem document as the answer to `request`.
    public func response(from request: Request, context: some RequestContext) throws -> Response { problemResponse() }

    /// The RFC 9457 problem document (`type`, `title`, `status`, `detail`, `code`, extensions)
    /// as a response, with `Retry-After` when set; `status` replaces the code's usual one (the
    /// token endpoint's `invalid_grant` is a 400 whatever the code), in the status line and the
    /// document alike.
    func problemResponse(status: HTTPResponse.Status? = nil) -> Response {
        let status = status ?? self.status
        let data = problemDocument(requestID: RequestScope.current?.id, status: status)
        var response = Response.whole(
            status: status, fields: [.contentType: "application/problem+json", .cacheControl: "no-store"], body: ByteBuffer(data: data))
        if let retryAfter { response.headers[.retryAfter] = String(retryAfter) }
        return response
    }

    /// The problem document's JSON, carrying `requestID` when there is one (and `status` when
    /// the answer's is not the code's usual one).
    func problemDocument(requestID: String?, status: HTTPResponse.Status? = nil) -> Data {
        var object: [String: Any] = [
            "type": "urn:gatehouse:problem:\(code)", "title": title, "status": (status ?? self.status).code, "detail": detail, "code": code.rawValue,
        ]
        for (key, value) in extensions { object[key] = value }
        if let requestID { object["requestId"] = requestID }
        return (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
    }

    /// The status of a code in its usual situation. Exhaustive, so a new code cannot be added
    /// without choosing its status.
    private static func usualStatus(_ code: Code) -> HTTPResponse.Status {
        switch code {
        // invalid-refresh-token is RFC 6749 §5.2's invalid_grant: 400.
        case .invalidArgument, .invalidCustomParameter, .invalidReturnTo, .invalidState, .invalidIdPResponse, .operationNotAllowed,
            .missingOrInvalidNonce, .userMismatch, .invalidResult, .invalidPendingToken, .invalidRefreshToken:
            .badRequest
        case .unauthenticated, .invalidIDToken, .idTokenExpired, .requiresRecentLogin: .unauthorized
        case .userDisabled, .permissionDenied, .originNotAllowed, .pathNotAllowed, .insufficientProviderScope, .signInCancelled,
            .signInDenied:
            .forbidden
        case .unknownProvider, .userNotFound, .noPhoto, .providerNotLinked, .notFound, .resultNotFound: .notFound
        case .methodNotAllowed: .methodNotAllowed
        case .accountExistsWithDifferentCredential, .credentialAlreadyInUse, .emailAlreadyInUse, .providerAlreadyLinked,
            .providerReauthRequired, .linkConfirmationRequired:
            .conflict
        case .rateLimited, .upstreamRateLimited: .tooManyRequests
        case .internal: .internalServerError
        case .photoUnavailable, .upstreamUnavailable: .badGateway
        case .storageUnavailable, .providerMisconfigured, .notReady, .hookUnavailable: .serviceUnavailable
        }
    }

    /// The title of each code in its usual situation; exhaustive, like the status.
    private static func usualTitle(_ code: Code) -> String {
        switch code {
        case .accountExistsWithDifferentCredential: "Account exists with a different credential"
        case .credentialAlreadyInUse: "Credential already in use"
        case .emailAlreadyInUse: "Email already in use"
        case .hookUnavailable: "Hook unavailable"
        case .idTokenExpired: "ID token expired"
        case .`internal`: "Internal error"
        case .insufficientProviderScope: "Insufficient provider scope"
        case .invalidArgument: "Invalid argument"
        case .invalidCustomParameter: "Invalid custom parameter"
        case .invalidIDToken: "Invalid ID token"
        case .invalidIdPResponse: "Invalid identity provider response"
        case .invalidPendingToken: "Invalid pending token"
        case .invalidRefreshToken: "Invalid refresh token"
        case .invalidResult: "Invalid sign-in result"
        case .invalidReturnTo: "Invalid return_to"
        case .invalidState: "Invalid state"
        case .linkConfirmationRequired: "Link confirmation required"
        case .methodNotAllowed: "Method not allowed"
        case .missingOrInvalidNonce: "Missing or invalid nonce"
        case .noPhoto: "No photo"
        case .notFound: "Not found"
        case .notReady: "Not ready"
        case .operationNotAllowed: "Operation not allowed"
        case .originNotAllowed: "Origin not allowed"
        case .pathNotAllowed: "Path not allowed"
        case .permissionDenied: "Permission denied"
        case .photoUnavailable: "Photo unavailable"
        case .providerAlreadyLinked: "Provider already linked"
        case .providerMisconfigured: "Provider misconfigured"
        case .providerNotLinked: "Provider not linked"
        case .providerReauthRequired: "Provider re-authentication required"
        case .rateLimited: "Too many requests"
        case .requiresRecentLogin: "Recent login required"
        case .resultNotFound: "Unknown result"
        case .signInCancelled: "Sign-in cancelled"
        case .signInDenied: "Sign-in denied"
        case .storageUnavailable: "Storage unavailable"
        case .unauthenticated: "Not signed in"
        case .unknownProvider: "Unknown provider"
        case .upstreamRateLimited: "Upstream rate limited"
        case .upstreamUnavailable: "Upstream unavailable"
        case .userDisabled: "User disabled"
        case .userMismatch: "User mismatch"
        case .userNotFound: "User not found"
        }
    }
}

extension Response {
    /// A JSON response from an `Encodable` value, never cached.
    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        json(body: ByteBuffer(data: try JSONCoding.encoder().encode(value)), status: status)
    }

    /// A JSON response with a body already encoded, never cached.
    static func json(body: ByteBuffer, status: HTTPResponse.Status = .ok) -> Response {
        whole(status: status, fields: [.contentType: "application/json", .cacheControl: "no-store"], body: body)
    }
}
