import Foundation
import JWTKit

/// The claims of an ID token the gateway reads. Decoding is tolerant of what real providers
/// send (`email_verified` as a string, `aud` as a string or an array); every check is made
/// by `IDTokenValidator`, not here.
public struct IDTokenClaims: JWTPayload, Equatable {
    /// `iss`.
    public var issuer: String
    /// `sub`.
    public var subject: String
    /// `aud`, always as a list.
    public var audience: [String]
    /// `azp`.
    public var authorizedParty: String?
    /// `exp`, seconds since 1970.
    public var expiresAt: Double
    /// `iat`, seconds since 1970.
    public var issuedAt: Double
    /// `nbf`, seconds since 1970.
    public var notBefore: Double?
    /// `nonce`.
    public var nonce: String?
    /// `email`.
    public var email: String?
    /// `email_verified`.
    public var emailVerified: Bool?
    /// `name`.
    public var name: String?
    /// `given_name`.
    public var givenName: String?
    /// `family_name`.
    public var familyName: String?
    /// `preferred_username`.
    public var preferredUsername: String?
    /// `picture`.
    public var picture: String?
    /// `locale`.
    public var locale: String?
    /// Microsoft's tenant id (`tid`).
    public var tenantId: String?
    /// Microsoft's object id (`oid`), the stable user id in that tenant.
    public var objectId: String?
    /// Microsoft's `xms_edov`: the tenant verified the domain of `email`.
    public var emailDomainOwnerVerified: Bool?
    /// `auth_time`: when the user last authenticated at the provider, if it says.
    public var authTime: Double?
    /// Every claim as sent (the hooks are told them); not encoded.
    public var all: [String: JSONValue] = [:]

    enum CodingKeys: String, CodingKey {
        case issuer = "iss"
        case subject = "sub"
        case audience = "aud"
        case authorizedParty = "azp"
        case expiresAt = "exp"
        case issuedAt = "iat"
        case notBefore = "nbf"
        case nonce, email, name, picture, locale
        case emailVerified = "email_verified"
        case givenName = "given_name"
        case familyName = "family_name"
        case preferredUsername = "preferred_username"
        case tenantId = "tid"
        case objectId = "oid"
        case emailDomainOwnerVerified = "xms_edov"
        case authTime = "auth_time"
    }

    /// Decodes the claims; `iss`, `sub`, `aud`, `exp` and `iat` are required (Core §2).
    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        issuer = try c.decode(String.self, forKey: .issuer)
        subject = try c.decode(String.self, forKey: .subject)
        if let single = try? c.decode(String.self, forKey: .audience) {
            audience = [single]
        } else {
            audience = try c.decode([String].self, forKey: .audience)
        }
        authorizedParty = try c.decodeIfPresent(String.self, forKey: .authorizedParty)
        expiresAt = try c.decode(Double.self, forKey: .expiresAt)
        issuedAt = try c.decode(Double.self, forKey: .issuedAt)
        notBefore = try c.decodeIfPresent(Double.self, forKey: .notBefore)
        authTime = try? c.decodeIfPresent(Double.self, forKey: .authTime)
        nonce = try c.decodeIfPresent(String.self, forKey: .nonce)
        email = try? c.decodeIfPresent(String.self, forKey: .email)
        if let flag = try? c.decodeIfPresent(Bool.self, forKey: .emailVerified) {
            emailVerified = flag
        } else if let text = try? c.decodeIfPresent(String.self, forKey: .emailVerified) {
            emailVerified = text.lowercased() == "true"
        }
        name = try? c.decodeIfPresent(String.self, forKey: .name)
        givenName = try? c.decodeIfPresent(String.self, forKey: .givenName)
        familyName = try? c.decodeIfPresent(String.self, forKey: .familyName)
        preferredUsername = try? c.decodeIfPresent(String.self, forKey: .preferredUsername)
        picture = try? c.decodeIfPresent(String.self, forKey: .picture)
        locale = try? c.decodeIfPresent(String.self, forKey: .locale)
        tenantId = try? c.decodeIfPresent(String.self, forKey: .tenantId)
        objectId = try? c.decodeIfPresent(String.self, forKey: .objectId)
        if let flag = try? c.decodeIfPresent(Bool.self, forKey: .emailDomainOwnerVerified) {
            emailDomainOwnerVerified = flag
        } else if let text = try? c.decodeIfPresent(String.self, forKey: .emailDomainOwnerVerified) {
            emailDomainOwnerVerified = text == "true" || text == "1"
        }
        all = (try? [String: JSONValue](from: decoder)) ?? [:]
    }

    /// Encodes the claims (used by tests and the emulator-free unit checks).
    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(issuer, forKey: .issuer)
        try c.encode(subject, forKey: .subject)
        try c.encode(audience, forKey: .audience)
        try c.encodeIfPresent(authorizedParty, forKey: .authorizedParty)
        try c.encode(expiresAt, forKey: .expiresAt)
        try c.encode(issuedAt, forKey: .issuedAt)
        try c.encodeIfPresent(notBefore, forKey: .notBefore)
        try c.encodeIfPresent(authTime, forKey: .authTime)
        try c.encodeIfPresent(nonce, forKey: .nonce)
        try c.encodeIfPresent(email, forKey: .email)
        try c.encodeIfPresent(emailVerified, forKey: .emailVerified)
        try c.encodeIfPresent(name, forKey: .name)
        try c.encodeIfPresent(givenName, forKey: .givenName)
        try c.encodeIfPresent(familyName, forKey: .familyName)
        try c.encodeIfPresent(preferredUsername, forKey: .preferredUsername)
        try c.encodeIfPresent(picture, forKey: .picture)
        try c.encodeIfPresent(locale, forKey: .locale)
        try c.encodeIfPresent(tenantId, forKey: .tenantId)
        try c.encodeIfPresent(objectId, forKey: .objectId)
        try c.encodeIfPresent(emailDomainOwnerVerified, forKey: .emailDomainOwnerVerified)
    }

    /// jwt-kit calls this after the signature check; the claim rules live in `IDTokenValidator`
    /// so that each failure maps to its own error code.
    public func verify(using algorithm: some JWTAlgorithm) throws {}
}
