import Foundation
import Testing

@testable import GatehouseCore

/// When a session's user authenticated at the provider, read from the ID token the provider sent.
@Suite("Authentication time")
struct AuthenticationTimeTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)

    /// Claims decoded as a provider's token carries them.
    static func claims(iat: Double, authTime: Double?) throws -> IDTokenClaims {
        var object: [String: Any] = ["iss": "https://idp.example", "sub": "s", "aud": "a", "exp": iat + 3600, "iat": iat]
        if let authTime { object["auth_time"] = authTime }
        return try JSONDecoder().decode(IDTokenClaims.self, from: JSONSerialization.data(withJSONObject: object))
    }

    @Test("a redirect's token: as long before its arrival as auth_time is before iat, whatever the provider's clock says")
    func readAgainstTheTokensOwnIssue() throws {
        // The provider's clock an hour behind the gateway's: only the difference counts.
        let providerNow = Self.now.timeIntervalSince1970 - 3600
        #expect(
            SignInService.authenticationTime(try Self.claims(iat: providerNow, authTime: providerNow - 600), receivedAt: Self.now)
                == Self.now.addingTimeInterval(-600))
        #expect(SignInService.authenticationTime(try Self.claims(iat: providerNow, authTime: providerNow + 5), receivedAt: Self.now) == Self.now)
        #expect(SignInService.authenticationTime(try Self.claims(iat: providerNow, authTime: nil), receivedAt: Self.now) == Self.now)
        #expect(SignInService.authenticationTime(nil, receivedAt: Self.now) == Self.now)
    }

    @Test("a session records a time every store and token can hold: never later than its sign-in, nor more than a year before it")
    func aRecordedTimeIsBounded() throws {
        let year = SignInService.oldestAuthentication
        for reported in [-1e13, -1e300, 0, Self.now.timeIntervalSince1970 - 2 * year] {
            #expect(
                SignInService.sessionAuthenticationTime(Date(timeIntervalSince1970: reported), now: Self.now) == Self.now.addingTimeInterval(-year))
        }
        for reported in [1e13, 1e300, Self.now.timeIntervalSince1970 + 60] {
            #expect(SignInService.sessionAuthenticationTime(Date(timeIntervalSince1970: reported), now: Self.now) == Self.now)
        }
        #expect(SignInService.sessionAuthenticationTime(Self.now.addingTimeInterval(-600), now: Self.now) == Self.now.addingTimeInterval(-600))
        #expect(SignInService.sessionAuthenticationTime(nil, now: Self.now) == Self.now)
        // An iat far past auth_time reads as far back, and is bounded the same way.
        let read = SignInService.authenticationTime(try Self.claims(iat: 1e15, authTime: -1e15), receivedAt: Self.now)
        #expect(SignInService.sessionAuthenticationTime(read, now: Self.now) == Self.now.addingTimeInterval(-year))
    }
}
