import Foundation
import Testing

@testable import GatehouseCore

/// Decoding of ID-token claims as real providers send them.
@Suite struct IDTokenClaimsTests {
    func decode(_ json: String) throws -> IDTokenClaims {
        try JSONDecoder().decode(IDTokenClaims.self, from: Data(json.utf8))
    }

    @Test func audienceMayBeAStringOrAList() throws {
        #expect(try decode(#"{"iss":"i","sub":"s","aud":"one","exp":2,"iat":1}"#).audience == ["one"])
        #expect(try decode(#"{"iss":"i","sub":"s","aud":["one","two"],"exp":2,"iat":1}"#).audience == ["one", "two"])
    }

    @Test func emailVerifiedMayBeABooleanOrAString() throws {
        #expect(try decode(#"{"iss":"i","sub":"s","aud":"a","exp":2,"iat":1,"email_verified":true}"#).emailVerified == true)
        #expect(try decode(#"{"iss":"i","sub":"s","aud":"a","exp":2,"iat":1,"email_verified":"true"}"#).emailVerified == true)
        #expect(try decode(#"{"iss":"i","sub":"s","aud":"a","exp":2,"iat":1,"email_verified":"false"}"#).emailVerified == false)
        #expect(try decode(#"{"iss":"i","sub":"s","aud":"a","exp":2,"iat":1}"#).emailVerified == nil)
    }

    @Test func requiredClaimsAreRequired() {
        for missing in ["iss", "sub", "aud", "exp", "iat"] {
            var object: [String: Any] = ["iss": "i", "sub": "s", "aud": "a", "exp": 2, "iat": 1]
            object[missing] = nil
            let data = try! JSONSerialization.data(withJSONObject: object)
            #expect(throws: (any Error).self, "without \(missing)") { try JSONDecoder().decode(IDTokenClaims.self, from: data) }
        }
    }

    @Test func genericProviderIdsAreChecked() {
        #expect(OIDCProviderConfiguration.isGenericProviderId("oidc.corp"))
        #expect(OIDCProviderConfiguration.isGenericProviderId("oidc.my-idp_2"))
        #expect(!OIDCProviderConfiguration.isGenericProviderId("oidc."))
        #expect(!OIDCProviderConfiguration.isGenericProviderId("corp"))
        #expect(!OIDCProviderConfiguration.isGenericProviderId("oidc.a/b"))
    }
}
