import Foundation

/// A code issued by an emulated OpenID Provider.
struct OIDCIssuedCode: Sendable {
    var issuer: String
    var clientID: String
    var redirectURI: String
    var subject: String
    var scopes: [String]
    var nonce: String?
    var codeChallenge: String?
    var codeChallengeMethod: String?
    var issuedAt: Date
}

/// An access or refresh token issued by an emulated OpenID Provider.
struct OIDCIssuedToken: Sendable {
    var issuer: String
    var clientID: String
    var subject: String
    var scopes: [String]
    var expired: Bool
    /// A refresh token: it refreshes and nothing else, as an access token only calls.
    var refresh = false
}

/// Ways the next answer of an issuer can be made wrong, for the gateway's rejection tests
/// (`POST /_emulator/oidc/tamper`).
enum TamperMode: String, Sendable, CaseIterable {
    case wrongIssuer = "wrong-iss"
    case wrongAudience = "wrong-aud"
    case extraAudience = "extra-aud"
    case expired
    /// The ID token claims to expire at the end of `Int`'s range, as no provider's does.
    case farExpiry = "far-expiry"
    /// Microsoft: the ID token (a work account's) is signed with the key Microsoft's common
    /// JWKS publishes for the personal-accounts tenant alone (its `issuer` names that tenant),
    /// as a key stolen from one issuer would sign for another.
    case otherTenantKey = "other-tenant-key"
    case badSignature = "bad-signature"
    case algNone = "alg-none"
    case hmacWithPublicKey = "hs256-public-key"
    case missingSubject = "missing-sub"
    case wrongNonce = "wrong-nonce"
    case missingNonce = "missing-nonce"
    case jkuHeader = "jku-header"
    /// The token's header names no `kid` (for an issuer whose JWKS has one key without one).
    case noKeyID = "no-kid"
    case jwkHeader = "jwk-header"
    case callbackIssuerWrong = "callback-iss-wrong"
    case callbackIssuerMissing = "callback-iss-missing"
    case userinfoSubjectMismatch = "userinfo-sub-mismatch"
    /// The ID token's `auth_time` is an hour old, as when a provider answers from its own
    /// session in the browser instead of asking for the credentials again.
    case staleAuthTime = "stale-auth-time"
    /// The ID token has no `auth_time`.
    case missingAuthTime = "missing-auth-time"
    /// Userinfo says the user's address is not verified (`email_verified: false`), as a
    /// provider does once it no longer vouches for it.
    case userinfoEmailUnverified = "userinfo-email-unverified"
}

/// Codes, tokens and pending tamper modes of the emulated OpenID Providers.
actor OIDCState {
    private var codes: [String: OIDCIssuedCode] = [:]
    private var tokens: [String: OIDCIssuedToken] = [:]
    private var tampers: [String: Set<TamperMode>] = [:]
    /// `picture` URLs set by the control path, by subject (a user who chose a hostile one).
    private var pictures: [String: String] = [:]

    /// Makes userinfo answer `url` as this subject's `picture`.
    func setPicture(_ url: String, subject: String) { pictures[subject] = url }

    /// The `picture` set for this subject, if any.
    func picture(subject: String) -> String? { pictures[subject] }

    func storeCode(_ code: String, _ issued: OIDCIssuedCode) { codes[code] = issued }

    /// Removes and returns the code: redeemable once, whatever the outcome.
    func redeemCode(_ code: String) -> OIDCIssuedCode? { codes.removeValue(forKey: code) }

    func storeToken(_ token: String, _ issued: OIDCIssuedToken) { tokens[token] = issued }

    func token(_ token: String) -> OIDCIssuedToken? { tokens[token] }

    /// Marks every access token as expired (refresh tokens keep working, so what follows is
    /// a refresh); returns how many.
    func expireAll() -> Int {
        let access = tokens.filter { !$0.value.refresh }.keys
        for key in access { tokens[key]?.expired = true }
        return access.count
    }

    func issuedTokens() -> [String] { Array(tokens.keys) }

    /// Arms `mode` for the issuer's next answer of that kind.
    func arm(_ mode: TamperMode, issuer: String) { tampers[issuer, default: []].insert(mode) }

    /// Consumes `mode` if it was armed for the issuer.
    func take(_ mode: TamperMode, issuer: String) -> Bool { tampers[issuer]?.remove(mode) != nil }

    /// Disarms everything.
    func clearTampers() { tampers.removeAll() }
}
