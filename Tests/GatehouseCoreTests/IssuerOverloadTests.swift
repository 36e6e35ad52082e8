import CurlClient
import Foundation
import Logging
import Testing

@testable import GatehouseCore

/// An issuer's metadata fetch the gateway cannot make because its calls out are all taken.
@Suite("Issuer metadata when the gateway's calls out are taken")
struct IssuerOverloadTests {
    @Test("a JWKS fetch refused for want of a slot starts no cooldown: the next token's keys are fetched at once, not refused for 30 s")
    func refusedFetchStartsNoCooldown() async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let http = CurlHTTPClient(configuration: .init(timeout: SilentListener.held, maxTransfers: 1, maxWaitingTransfers: 0))
        defer { http.shutdown() }
        // An issuer that refuses connections: a fetch that is made fails as unreachable.
        let cache = IssuerMetadataCache(
            configuration: .emulatorIssuer(baseURL: "http://127.0.0.1:1", clientID: "client", clientSecret: "secret"),
            http: UpstreamHTTP(client: http, providerId: "oidc.test", timeout: .seconds(5)), developmentMode: true,
            logger: Logger(label: "test"))
        let holding = try await listener.hold(http)
        let refused = await #expect(throws: GatehouseError.self) { try await cache.keys(for: "key-1") }
        #expect(refused?.code == .upstreamUnavailable && refused?.situation == .overloaded, "\(String(describing: refused))")
        holding.cancel()
        _ = await holding.result

        let fetched = await #expect(throws: GatehouseError.self) { try await cache.keys(for: "key-1") }
        #expect(fetched?.code == .upstreamUnavailable && fetched?.situation != .overloaded, "\(String(describing: fetched))")
        #expect(http.load.refused == 1)
    }
}
