/// The parts of an OpenID Provider's metadata (Discovery 1.0 §3) the gateway uses.
public struct DiscoveryDocument: Sendable, Codable, Equatable {
    /// Must equal the configured issuer exactly.
    public var issuer: String
    /// Where the browser is sent.
    public var authorizationEndpoint: String
    /// Where codes are redeemed.
    public var tokenEndpoint: String
    /// The userinfo endpoint, when the provider has one.
    public var userinfoEndpoint: String?
    /// The JWK Set.
    public var jwksURI: String
    /// Supported ID-token algorithms.
    public var idTokenSigningAlgValuesSupported: [String]?
    /// Supported token-endpoint client authentication methods.
    public var tokenEndpointAuthMethodsSupported: [String]?
    /// RFC 9207: the provider adds `iss` to its authorization responses.
    public var authorizationResponseIssParameterSupported: Bool?

    enum CodingKeys: String, CodingKey {
        case issuer
        case authorizationEndpoint = "authorization_endpoint"
        case tokenEndpoint = "token_endpoint"
        case userinfoEndpoint = "userinfo_endpoint"
        case jwksURI = "jwks_uri"
        case idTokenSigningAlgValuesSupported = "id_token_signing_alg_values_supported"
        case tokenEndpointAuthMethodsSupported = "token_endpoint_auth_methods_supported"
        case authorizationResponseIssParameterSupported = "authorization_response_iss_parameter_supported"
    }
}
