import Testing

@testable import GatehouseServer

/// The provider API path a passthrough route takes from its request path: what follows the
/// route's prefix, cut where the router cuts, byte by byte.
@Suite("Provider API path of a passthrough request")
struct ProviderAPIPathTests {
    @Test("what follows the route's prefix, as it came: encodings, a query-free tail, a slash followed by a combining mark")
    func remainderAfterThePrefix() {
        let service = ProviderAPIRoutes.servicePrefixSegments
        let user = ProviderAPIRoutes.userPrefixSegments
        let cases: [(String, Int, String)] = [
            ("/v1/users/u1/providers/github.com/api/user/repos", service, "user/repos"),
            ("/v1/me/providers/github.com/api/user/repos", user, "user/repos"),
            ("/v1/users/u1/providers/microsoft.com/api/v1.0/me/messages/AAM%2Fx", service, "v1.0/me/messages/AAM%2Fx"),
            ("/v1/users/u1/providers/github.com/api/", service, ""),
            // A slash followed by a combining mark is still the separator the router saw: the
            // API path starts with the mark (which `APIPath` then judges), not one segment on.
            ("/v1/users/u1/providers/github.com/api/\u{301}user/repos", service, "\u{301}user/repos"),
            ("/v1/me/providers/github.com/api/user/\u{338}repos", user, "user/\u{338}repos"),
            // Fewer slashes than the prefix: no API path at all.
            ("/v1/users/u1/providers/github.com/api", service, ""),
        ]
        for (path, prefix, expected) in cases {
            let found = ProviderAPIRoutes.apiPath(of: path, after: prefix)
            #expect(Array(found.unicodeScalars) == Array(expected.unicodeScalars), "\(path)")
        }
    }
}
