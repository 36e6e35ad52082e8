import Foundation
import Testing

@testable import GatehouseCore

/// The gateway's own ID token claims as they are encoded for signing.
@Suite struct GatewayIDTokenClaimsTests {
    @Test(
        "custom claims stored before a name was reserved never reach a token: a reserved name in any case, the gateway's own, gatehouse…; others do"
    )
    func reservedCustomNamesAreLeftOut() throws {
        var claims = GatewayIDTokenClaims(
            iss: "https://gw.example", aud: "app", sub: "u1", iat: 1_800_000_000, exp: 1_800_003_600, authTime: 1_800_000_000,
            signInProvider: "github.com", identities: [:], email: "a@example.com", emailVerified: true, name: "A", sid: "f1")
        claims.custom = [
            "preferred_username": .string("root"), "Phone_Number_Verified": .bool(true), "sub": .string("someone-else"),
            "gatehouse_admin": .bool(true), "role": .string("viewer"),
        ]
        let object = try #require(try JSONSerialization.jsonObject(with: JSONEncoder().encode(claims)) as? [String: Any])
        #expect(object["role"] as? String == "viewer")
        #expect(object["sub"] as? String == "u1")
        for name in ["preferred_username", "Phone_Number_Verified", "gatehouse_admin"] {
            #expect(object[name] == nil, "\(name)")
        }
    }
}
