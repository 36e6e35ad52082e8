/// One emulated OpenID Provider: where it lives on the emulator's port and how it differs
/// from the standard (providers.md §3 for Yahoo, §6 for a standard issuer).
struct OIDCIssuerSpec: Sendable {
    /// The key used on the control path (`oidc`, `yahoo`).
    let name: String
    /// The provider id the gateway uses for it (`oidc.emulator`, `yahoo.com`).
    let providerId: String
    /// The path prefix, which is also the issuer's path (`/oidc`).
    let prefix: String
    /// Paths under the prefix.
    let authorizePath: String
    let tokenPath: String
    let userinfoPath: String
    let jwksPath: String
    /// The ID-token signing algorithm (`RS256` or `ES256`).
    let algorithm: String
    /// RFC 9207 `iss` in authorization responses.
    let issParameter: Bool
    /// Yahoo's upper-case error codes instead of RFC 6749's.
    let yahooErrors: Bool

    /// The standard issuer of `oidc.emulator`.
    static let generic = OIDCIssuerSpec(
        name: "oidc", providerId: "oidc.emulator", prefix: "/oidc", authorizePath: "/authorize", tokenPath: "/token",
        userinfoPath: "/userinfo", jwksPath: "/jwks", algorithm: "RS256", issParameter: true, yahooErrors: false)

    /// Yahoo: `request_auth`, `get_token`, `/openid/v1/userinfo`, `/openid/v1/certs`, ES256.
    static let yahoo = OIDCIssuerSpec(
        name: "yahoo", providerId: "yahoo.com", prefix: "/yahoo", authorizePath: "/oauth2/request_auth", tokenPath: "/oauth2/get_token",
        userinfoPath: "/openid/v1/userinfo", jwksPath: "/openid/v1/certs", algorithm: "ES256", issParameter: false, yahooErrors: true)

    /// Every emulated OpenID Provider.
    static let all = [generic, yahoo]

    /// The issuer URL as seen by a client that reached the emulator at `base`.
    func issuer(base: String) -> String { base + prefix }
}
