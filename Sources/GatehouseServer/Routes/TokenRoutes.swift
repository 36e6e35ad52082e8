import Foundation
import GatehouseCore
import HTTPTypes
import Hummingbird

/// The gateway as a token issuer: `POST /v1/token` (refresh-token grant), the JWK Set and
/// the OpenID configuration that let anyone verify gateway ID tokens.
struct TokenRoutes {
    /// The token endpoint's path: its problems carry RFC 6749's `error` (`oauthError`, applied
    /// by `ProblemMapping` to whatever failed).
    static let path = "/v1/token"
    let gatehouse: Gatehouse
    let browser: BrowserPolicy

    func register(into table: inout RouteTable) {
        let tokens = gatehouse.tokens
        let browser = self.browser
        let configuration = gatehouse.configuration

        table.add(.post, Self.path) { request, context in try await refresh(request, context) }

        /// `POST /v1/token` (RFC 6749 §6): the refresh-token grant.
        @Sendable func refresh(_ request: Request, _ context: GatehouseRequestContext) async throws -> Response {
            try await browser.limit("token", request, context)
            var request = request
            let body = String(buffer: try await request.collectBody(upTo: 8 << 10))
            // RFC 6749 §6 form encoding; a JSON body is accepted too.
            var parameters: [String: String] = [:]
            if request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true {
                guard let object = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any] else {
                    throw GatehouseError.invalidArgument("The body must be a JSON object.")
                }
                for (key, value) in object { if let text = value as? String { parameters[key] = text } }
            } else {
                for (key, value) in FormEncoding.decode(body) where parameters[key] == nil { parameters[key] = value }
            }
            guard parameters["grant_type"] == "refresh_token" else {
                var error = GatehouseError.invalidArgument("grant_type must be refresh_token.")
                error.extensions["error"] = "unsupported_grant_type"
                throw error
            }
            guard let refreshToken = parameters["refresh_token"], !refreshToken.isEmpty else {
                throw GatehouseError.invalidArgument("refresh_token is required.")
            }
            let issued = try await tokens.refresh(refreshToken, client: browser.signInClient(request, context))
            var response = try Response.json(TokenAnswer(issued))
            response.headers[.cacheControl] = "no-store"
            response.headers[HTTPField.Name("Pragma")!] = "no-cache"
            return response
        }

        table.add(.get, "/.well-known/jwks.json") { _, _ in
            var response = try Response.json(["keys": try await tokens.keys.jwks()])
            // No longer than a new key waits before it signs (`SigningKeyRing.jwksMaxAge`): a
            // verifier's cached copy never lacks the key of a token it is shown.
            response.headers[.cacheControl] = "public, max-age=\(tokens.keys.jwksMaxAge)"
            return response
        }

        table.add(.get, "/.well-known/openid-configuration") { _, _ in
            var response = try Response.json(
                OpenIDConfiguration(
                    issuer: configuration.publicURL, jwks_uri: "\(configuration.publicURL)/.well-known/jwks.json",
                    token_endpoint: "\(configuration.publicURL)/v1/token", response_types_supported: ["id_token"],
                    subject_types_supported: ["public"], id_token_signing_alg_values_supported: ["ES256"],
                    grant_types_supported: ["refresh_token"],
                    claims_supported: [
                        "iss", "aud", "sub", "iat", "exp", "auth_time", "sign_in_provider", "identities", "email", "email_verified", "name", "sid",
                    ]))
            response.headers[.cacheControl] = "public, max-age=3600"
            return response
        }
    }

    /// A refresh error as RFC 6749 §5.2 words it, in the problem document: `error`
    /// (`invalid_grant` for a refresh token that is unknown, spent, expired or revoked;
    /// `unsupported_grant_type`; `invalid_request`; `temporarily_unavailable` when nothing could
    /// be rotated and a retry may succeed; `server_error` for the gateway's own failure, whose
    /// retry may succeed too: RFC 6749 §4.1.2.1's names, which OAuth clients also read here)
    /// and `error_description`, beside `code` and `detail`.
    static func oauthError(_ error: GatehouseError) -> GatehouseError {
        var error = error
        if error.extensions["error"] == nil {
            switch error.code {
            case .invalidRefreshToken, .userDisabled: error.extensions["error"] = "invalid_grant"
            case .storageUnavailable, .rateLimited: error.extensions["error"] = "temporarily_unavailable"
            case .internal: error.extensions["error"] = "server_error"
            default: error.extensions["error"] = "invalid_request"
            }
        }
        error.extensions["error_description"] = error.detail
        return error
    }

    /// Whether a request's path is the token endpoint's as the router matches it: empty
    /// segments (`/v1/token/`, `//v1/token`) reach the same route.
    static func isTokenPath(_ path: String) -> Bool {
        path.split(separator: "/").elementsEqual(["v1", "token"])
    }

    /// The status of a token endpoint's error: RFC 6749 §5.2 answers `invalid_grant` with 400,
    /// whatever made the grant unusable (a disabled account among them, elsewhere a 403).
    static func oauthStatus(_ error: GatehouseError) -> HTTPResponse.Status {
        error.extensions["error"] == "invalid_grant" ? .badRequest : error.status
    }

    /// `POST /v1/token`'s answer (RFC 6749 §5.1 plus OpenID Connect's `id_token`): the ID token
    /// is also the access token of this API. The camel-case members of earlier versions stay
    /// beside them (`idToken`, `refreshToken`, `expiresIn`, `tokenType`).
    struct TokenAnswer: Encodable {
        let access_token: String
        let id_token: String
        let refresh_token: String
        let expires_in: Int
        let token_type = "Bearer"
        let idToken: String
        let refreshToken: String
        let expiresIn: Int
        let tokenType = "Bearer"

        init(_ issued: GatewayTokenService.Issued) {
            access_token = issued.idToken
            id_token = issued.idToken
            refresh_token = issued.refreshToken
            expires_in = issued.expiresIn
            idToken = issued.idToken
            refreshToken = issued.refreshToken
            expiresIn = issued.expiresIn
        }
    }

    /// The discovery document (OpenID Connect Discovery 1.0 member names).
    struct OpenIDConfiguration: Encodable {
        let issuer: String
        let jwks_uri: String
        let token_endpoint: String
        let response_types_supported: [String]
        let subject_types_supported: [String]
        let id_token_signing_alg_values_supported: [String]
        let grant_types_supported: [String]
        let claims_supported: [String]
    }
}
