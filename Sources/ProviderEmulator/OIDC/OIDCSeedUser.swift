/// An account at an emulated OpenID Provider.
public struct OIDCSeedUser: Sendable {
    /// `oidc` or `yahoo` (the issuer spec's name).
    public var issuer: String
    /// The `sub` (Yahoo: a 26-character GUID).
    public var subject: String
    /// The `login_hint` that auto-approves this user.
    public var hint: String
    /// `name`.
    public var name: String
    /// `given_name`.
    public var givenName: String
    /// `family_name`.
    public var familyName: String
    /// `email`.
    public var email: String
    /// `email_verified`.
    public var emailVerified: Bool
    /// Whether `picture` is present.
    public var hasPicture: Bool
    /// A BCP 47 locale.
    public var locale: String
    /// Traits listed at `/_emulator/users`.
    public var traits: [String]
}

extension SeededUsers {
    /// The emulated OpenID Providers' accounts.
    public static let oidc: [OIDCSeedUser] = [
        OIDCSeedUser(
            issuer: "oidc", subject: "248289761001", hint: "olive@oidc.example", name: "Olive Oidc", givenName: "Olive", familyName: "Oidc",
            email: "olive@oidc.example", emailVerified: true, hasPicture: true, locale: "en-GB", traits: ["verified-email", "photo"]),
        OIDCSeedUser(
            issuer: "oidc", subject: "248289761002", hint: "otto@oidc.example", name: "Otto Unverified", givenName: "Otto",
            familyName: "Unverified", email: "otto@oidc.example", emailVerified: false, hasPicture: false, locale: "de-DE",
            traits: ["unverified-email", "no-photo"]),
        OIDCSeedUser(
            issuer: "yahoo", subject: "UQIDWJNWVNQD4GXZ5NGMZUSTQ4", hint: "yuki@yahoo.example", name: "Yuki Yahoo", givenName: "Yuki",
            familyName: "Yahoo", email: "yuki@yahoo.example", emailVerified: true, hasPicture: true, locale: "en-US",
            traits: ["verified-email", "photo"]),
        OIDCSeedUser(
            issuer: "yahoo", subject: "DKZCPIB7ZJZTWRC5A3W4Y5N3M4", hint: "yan@yahoo.example", name: "Yan Unverified", givenName: "Yan",
            familyName: "Unverified", email: "yan@yahoo.example", emailVerified: false, hasPicture: false, locale: "fr-FR",
            traits: ["unverified-email", "no-photo"]),
        OIDCSeedUser(
            issuer: "oidc", subject: "248289761003", hint: "sam@oidc.example", name: "Sam Shared", givenName: "Sam", familyName: "Shared",
            email: "Sam.Shared@Example.com", emailVerified: true, hasPicture: true, locale: "en-GB",
            traits: ["shared-email", "verified-email", "photo"]),
        OIDCSeedUser(
            issuer: "yahoo", subject: "SAMSHAREDUNVERIFIEDYAHOO00", hint: "sam@yahoo.example", name: "Sam Unverified", givenName: "Sam",
            familyName: "Unverified", email: "sam.shared@example.com", emailVerified: false, hasPicture: false, locale: "en-GB",
            traits: ["shared-email-unverified", "unverified-email", "no-photo"]),
    ]
}

extension OIDCSeedUser {
    /// The generic issuer's generated load users, for benchmarks that need many distinct
    /// accounts: `load-N@oidc.example` (N from 1 to 100 000) signs in as subject `load-N`,
    /// verified email, no picture. Never listed in the picker or at `/_emulator/users`.
    static func load(hint: String) -> OIDCSeedUser? {
        guard hint.hasSuffix("@oidc.example") else { return nil }
        return load(subject: String(hint.dropLast("@oidc.example".count)))
    }

    /// The load user with this subject (`load-N`), if it is one.
    static func load(subject: String) -> OIDCSeedUser? {
        guard subject.hasPrefix("load-"), let number = Int(subject.dropFirst(5)), (1...100_000).contains(number),
            subject == "load-\(number)"
        else { return nil }
        return OIDCSeedUser(
            issuer: "oidc", subject: subject, hint: "\(subject)@oidc.example", name: "Load Tester \(number)", givenName: "Load",
            familyName: "Tester \(number)", email: "\(subject)@oidc.example", emailVerified: true, hasPicture: false, locale: "en-GB",
            traits: ["generated", "verified-email", "no-photo"])
    }
}
