import Foundation
import Testing

@testable import GatehouseCore

/// The standard claims of an ID token and a userinfo answer, as one provider profile.
@Suite("OpenID profile mapping")
struct OIDCProfileMapperTests {
    static func claims(_ json: String) throws -> IDTokenClaims {
        try JSONDecoder().decode(IDTokenClaims.self, from: Data(json.utf8))
    }

    static let idToken = """
        {"iss": "https://idp.example", "sub": "u-1", "aud": "gatehouse", "exp": 2000000000, "iat": 1900000000,
         "name": "From Token", "picture": "https://idp.example/token.png", "email": "token@example.com",
         "email_verified": true, "locale": "fr"}
        """

    @Test("userinfo wins member by member; the ID token fills in what userinfo leaves out")
    func userinfoWins() throws {
        let info = try JSONValue.parse(
            Data(
                #"{"sub": "u-1", "name": "From Userinfo", "email": "info@example.com", "email_verified": false, "zoneinfo": "Europe/Paris", "locale": null}"#
                    .utf8))
        let profile = OIDCProfileMapper.profile(providerId: "oidc", claims: try Self.claims(Self.idToken), userInfo: info)

        #expect(profile.displayName == "From Userinfo")
        #expect(profile.photoSourceURL == "https://idp.example/token.png")
        // A member userinfo sends as null is kept as null, and the field falls back to the token.
        #expect(profile.locale == "fr")
        #expect(profile.email == "info@example.com")
        // The flag belongs to the source of the email: userinfo's, which says false.
        #expect(!profile.emailVerified)
        #expect(
            profile.rawUserInfo
                == .object([
                    "sub": .string("u-1"), "name": .string("From Userinfo"), "email": .string("info@example.com"),
                    "email_verified": .bool(false), "zoneinfo": .string("Europe/Paris"),
                    "picture": .string("https://idp.example/token.png"), "locale": .null,
                ]))
    }

    @Test("the ID token's claims alone, its email verified when it says so")
    func claimsAlone() throws {
        let profile = OIDCProfileMapper.profile(providerId: "oidc", claims: try Self.claims(Self.idToken), userInfo: nil)

        #expect(profile.federatedId == "u-1")
        #expect(profile.displayName == "From Token")
        #expect(profile.email == "token@example.com")
        #expect(profile.emailVerified)
        #expect(
            profile.rawUserInfo
                == .object([
                    "sub": .string("u-1"), "name": .string("From Token"), "email": .string("token@example.com"),
                    "email_verified": .bool(true), "picture": .string("https://idp.example/token.png"), "locale": .string("fr"),
                ]))
    }

    @Test("a refreshed profile (userinfo alone) keeps the answer's members exactly")
    func userinfoAlone() throws {
        let info = try JSONValue.parse(
            Data(#"{"sub": "u-1", "email": "info@example.com", "email_verified": "true", "groups": ["a", "b"]}"#.utf8))
        let profile = OIDCProfileMapper.profile(providerId: "oidc", subject: "u-1", claims: nil, userInfo: info)

        #expect(profile.rawUserInfo == info)
        #expect(profile.email == "info@example.com")
        #expect(profile.emailVerified)
        #expect(profile.displayName == nil)
    }
}
