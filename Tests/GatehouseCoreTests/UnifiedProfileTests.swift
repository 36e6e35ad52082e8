import Foundation
import Testing

@testable import GatehouseCore

/// Normalization of several providers' profiles into the one unified profile (design §3).
@Suite struct UnifiedProfileTests {
    let account = AccountRecord(
        uid: "u1", createdAt: Date(timeIntervalSince1970: 1_700_000_000), lastSignInAt: Date(timeIntervalSince1970: 1_700_000_100))

    @Test func verifiedEmailWinsOverAnEarlierUnverifiedOne() {
        let profiles = [
            ProviderProfile(providerId: "github.com", federatedId: "1", username: "octo", email: "old@unverified.example"),
            ProviderProfile(
                providerId: "oidc.x", federatedId: "s", displayName: "Ada", givenName: "Ada", email: "ada@verified.example", emailVerified: true,
                photoSourceURL: "https://idp.example/p.png"),
        ]
        let unified = UnifiedProfile.build(account: account, profiles: profiles, photoBaseURL: "http://gw/v1/me/photo")
        #expect(unified.email == "ada@verified.example")
        #expect(unified.emailVerified)
        #expect(unified.displayName == "Ada")
        #expect(unified.photoURL == "http://gw/v1/me/photo")
        #expect(unified.providers.map(\.providerId) == ["github.com", "oidc.x"])
        #expect(unified.providers[0].photoURL == nil)
        #expect(unified.providers[1].photoURL == "http://gw/v1/me/photo?provider=oidc.x")
    }

    @Test func anUnverifiedEmailIsNeverShownAsVerified() {
        let unified = UnifiedProfile.build(
            account: account, profiles: [ProviderProfile(providerId: "github.com", federatedId: "1", email: "x@example.com")],
            photoBaseURL: "http://gw/v1/me/photo")
        #expect(unified.email == "x@example.com")
        #expect(!unified.emailVerified)
        #expect(unified.photoURL == nil)
    }

    @Test(
        "an address a provider vouches for but one account per verified email could never hold (a trailing dot, a space inside) is not shown verified: in the profile, its provider's entry, hooks or a link's confirmation"
    )
    func unmatchableAddressesAreNotVerified() {
        for address in ["octocat@github.com.", "octocat @github.com", "octocat@@github.com", "@github.com"] {
            let unified = UnifiedProfile.build(
                account: account,
                profiles: [ProviderProfile(providerId: "oidc.loose", federatedId: "s", email: address, emailVerified: true)],
                photoBaseURL: "http://gw/p")
            #expect(unified.email == address && !unified.emailVerified, "\(address)")
            #expect(unified.providers.first?.emailVerified == false, "\(address)")
            // Hooks and a link's confirmation say the same as the profile.
            let loose = ProviderProfile(providerId: "oidc.loose", federatedId: "s", email: address, emailVerified: true)
            #expect(!HookRequest.Profile(loose).emailVerified, "\(address)")
            #expect(GatehouseError.linkConfirmationRequired(loose).extensions["emailStatus"] == "unverified", "\(address)")
        }
        // One in another case or with white space around it is held in its normalized form: verified.
        let padded = UnifiedProfile.build(
            account: account,
            profiles: [ProviderProfile(providerId: "oidc.x", federatedId: "s", email: " Ada@Example.COM", emailVerified: true)],
            photoBaseURL: "http://gw/p")
        #expect(padded.emailVerified)
    }

    @Test func everyKeyIsPresentEvenWhenNull() throws {
        let unified = UnifiedProfile.build(
            account: account, profiles: [ProviderProfile(providerId: "github.com", federatedId: "1")], photoBaseURL: "http://gw/p")
        let object = try #require(JSONSerialization.jsonObject(with: JSONCoding.encoder().encode(unified)) as? [String: Any])
        for key in ["uid", "displayName", "givenName", "familyName", "email", "emailVerified", "photoURL", "locale", "providers"] {
            #expect(object.keys.contains(key), "missing \(key)")
        }
        #expect(object["email"] is NSNull)
        // The provider's photo source (which may carry a token-bearing URL) is never exposed.
        let text = String(decoding: try JSONCoding.encoder().encode(unified), as: UTF8.self)
        #expect(!text.contains("photoSourceURL"))
    }
}
