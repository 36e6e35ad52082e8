import Testing

@testable import GatehouseServer

/// Which answers are about a user (`Cache-Control: private`, `Vary: Cookie, Authorization`),
/// read by segments as the router reads paths.
@Suite("Per-user paths")
struct PerUserPathTests {
    @Test("/v1/me and /v1/users, with their sub-paths and any run of slashes, are per user; nothing else is")
    func perUser() {
        for path in ["/v1/me", "/v1/me/", "//v1/me", "/v1//me", "/v1/me/photo", "/v1/users", "/v1/users/abc/profile", "v1/me", "///v1///users//x"] {
            #expect(SecurityHeaders.isPerUser(path), "\(path)")
        }
        for path in [
            "", "/", "/v1", "/v1/", "/v1/mex", "/v1/m", "/v1/user", "/v2/me", "/v1/auth/github.com/start", "/healthz", "/me/v1", "/v1me", "/V1/ME",
            "/v1/%6De", "/v1/me\u{301}", "/v1/us\u{E9}rs",
        ] {
            #expect(!SecurityHeaders.isPerUser(path), "\(path)")
        }
    }
}
