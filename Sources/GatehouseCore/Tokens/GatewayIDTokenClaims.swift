import Foundation
import JWTKit

/// The claims of a gateway ID token (design §2): who the user is, how and when they signed
/// in, and the session (`sid`) whose revocation ends the token early.
public struct GatewayIDTokenClaims: JWTPayload, Equatable {
    /// The gateway's public URL.
    public var iss: String
    /// The configured audience.
    public var aud: String
    /// The account uid.
    public var sub: String
    /// Issued at (seconds since 1970).
    public var iat: Int
    /// Expires at (seconds since 1970).
    public var exp: Int
    /// When the user last signed in (re-authentication moves it).
    public var authTime: Int
    /// The provider of that sign-in.
    public var signInProvider: String
    /// Linked providers and their federated ids.
    public var identities: [String: [String]]
    /// The unified profile's email, if any.
    public var email: String?
    /// Whether that email is verified.
    public var emailVerified: Bool
    /// The unified profile's display name, if any.
    public var name: String?
    /// The session (refresh-token family) the token belongs to.
    public var sid: String
    /// The account's custom claims and the session's claims, as top-level claims. A reserved
    /// name (`CustomClaims.isReserved`: the ones above among them) is left out, also when it
    /// was stored before it was reserved. Not decoded.
    public var custom: [String: JSONValue] = [:]

    enum CodingKeys: String, CodingKey {
        case iss, aud, sub, iat, exp, email, name, sid, identities
        case authTime = "auth_time"
        case signInProvider = "sign_in_provider"
        case emailVerified = "email_verified"
    }

    /// A claim name of the custom claims.
    private struct CustomKey: CodingKey {
        let stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// Encodes absent `email` and `name` as missing claims, and the custom claims beside the
    /// gateway's own.
    public func encode(to encoder: any Encoder) throws {
        if !custom.isEmpty {
            var extra = encoder.container(keyedBy: CustomKey.self)
            for (name, value) in custom where !CustomClaims.isReserved(name) {
                try extra.encode(value, forKey: CustomKey(stringValue: name))
            }
        }
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(iss, forKey: .iss)
        try c.encode(aud, forKey: .aud)
        try c.encode(sub, forKey: .sub)
        try c.encode(iat, forKey: .iat)
        try c.encode(exp, forKey: .exp)
        try c.encode(authTime, forKey: .authTime)
        try c.encode(signInProvider, forKey: .signInProvider)
        try c.encode(identities, forKey: .identities)
        try c.encodeIfPresent(email, forKey: .email)
        try c.encode(emailVerified, forKey: .emailVerified)
        try c.encodeIfPresent(name, forKey: .name)
        try c.encode(sid, forKey: .sid)
    }

    /// Time and audience checks happen in `GatewayTokenService.verify`, which knows the
    /// configuration and the clock.
    public func verify(using algorithm: some JWTAlgorithm) throws {}
}
