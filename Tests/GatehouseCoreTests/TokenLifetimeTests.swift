import CurlClient
import Foundation
import Logging
import Testing

@testable import GatehouseCore

/// What a token endpoint's `expires_in` makes of an access token's expiry, whatever number a
/// broken or hostile endpoint sends.
@Suite("Provider token lifetimes")
struct TokenLifetimeTests {
    /// A clock standing still at `now`.
    struct FixedClock: GatehouseClock {
        let instant: Date
        func now() -> Date { instant }
    }

    @Test(
        "expires_in is kept within 60 s and a year; absent, infinite or not a number gives no expiry; whole numbers outside Int64 read as no integer")
    func hostileLifetimes() async throws {
        let now = 1_800_000_000.0
        #expect(ProviderTokens.expiry(expiresIn: 3600, now: now) == now + 3600)
        #expect(ProviderTokens.expiry(expiresIn: -5, now: now) == now + 60)
        #expect(ProviderTokens.expiry(expiresIn: 0, now: now) == now + 60)
        #expect(ProviderTokens.expiry(expiresIn: 1e19, now: now) == now + 365 * 86400)
        #expect(ProviderTokens.expiry(expiresIn: .infinity, now: now) == nil)
        #expect(ProviderTokens.expiry(expiresIn: .nan, now: now) == nil)
        #expect(ProviderTokens.expiry(expiresIn: nil, now: now) == nil)
        #expect(JSONValue.number(1e19).integerValue == nil)
        #expect(JSONValue.number(-1e19).integerValue == nil)
        #expect(JSONValue.number(2.5).integerValue == nil)
        #expect(JSONValue.number(42).integerValue == 42)
    }

    @Test("an OpenID token endpoint answering expires_in 1e19 or -1e19 gets tokens expiring within the bounds, not a crash")
    func oidcTokenAnswers() async throws {
        let http = CurlHTTPClient()
        defer { http.shutdown() }
        let clock = FixedClock(instant: Date(timeIntervalSince1970: 1_800_000_000))
        let provider = OIDCProvider(
            configuration: .emulatorIssuer(baseURL: "http://127.0.0.1:1", clientID: "client", clientSecret: "secret"),
            http: UpstreamHTTP(client: http, providerId: "oidc.test", timeout: .seconds(5)), developmentMode: true, clock: clock,
            logger: Logger(label: "test"))
        let start = clock.instant.timeIntervalSince1970
        for (expiresIn, expected) in [(1e19, start + 365 * 86400), (-1e19, start + 60), (900, start + 900)] {
            let answer = try JSONValue.parse(Data(#"{"access_token":"at","token_type":"Bearer","expires_in":\#(expiresIn)}"#.utf8))
            #expect(provider.tokens(from: answer, accessToken: "at", previous: nil).expiresAt == expected, "\(expiresIn)")
        }
    }
}
