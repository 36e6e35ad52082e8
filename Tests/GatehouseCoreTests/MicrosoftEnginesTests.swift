import CurlClient
import Logging
import Testing

@testable import GatehouseCore

/// The Microsoft provider's engines (discovery and keys) per tenant: how many are kept, and
/// which are never given up.
@Suite("Microsoft tenant engines")
struct MicrosoftEnginesTests {
    static let allowed = "b7d3e1a2-5c4f-4e6a-9d8b-1f2e3d4c5b6a"

    /// Engines over a client that is never asked: creating an engine calls nothing.
    static func engines(_ http: CurlHTTPClient) -> MicrosoftProvider.Engines {
        let configuration = MicrosoftConfiguration(
            clientID: "client", clientSecret: "secret", tenant: "common", allowedTenants: [allowed.uppercased()],
            loginBaseURL: "http://127.0.0.1:1")
        let logger = Logger(label: "test")
        return MicrosoftProvider.Engines(
            configuration: configuration, http: UpstreamHTTP(client: http, providerId: "microsoft.com", timeout: .seconds(5)),
            developmentMode: true, clock: SystemClock(), health: ProviderHealth(logger: logger), logger: logger)
    }

    @Test("an allow-list set after the configuration was made is kept lower-cased, as tokens' tid are")
    func allowListSetLaterIsLowerCased() {
        var configuration = MicrosoftConfiguration(clientID: "client", clientSecret: "secret")
        configuration.allowedTenants = [Self.allowed.uppercased()]
        #expect(configuration.allowedTenants == [Self.allowed])
        #expect(configuration.permittedTenants == [Self.allowed])
        // A GUID is ASCII: fullwidth digits look alike but are no tenant id.
        #expect(MicrosoftTenants.isGUID(Self.allowed.uppercased()))
        #expect(!MicrosoftTenants.isGUID("\u{FF10}" + Self.allowed.dropFirst()))
    }

    @Test("64 tenants named by callers are kept, the least recently used given up first; the configured and allow-listed tenants never")
    func leastRecentlyUsedGoesFirst() async {
        let http = CurlHTTPClient(configuration: .init())
        defer { http.shutdown() }
        let engines = Self.engines(http)
        _ = await engines.engine("COMMON")
        _ = await engines.engine(Self.allowed)
        _ = await engines.engine("first.example")
        for index in 0..<63 { _ = await engines.engine("t\(index).example") }
        // 64 places taken; using the first again makes t0 the least recently used.
        _ = await engines.engine("First.Example")
        _ = await engines.engine("t63.example")
        #expect(await engines.keeps("first.example"))
        #expect(await !engines.keeps("t0.example"))
        #expect(await engines.keeps("t1.example"))
        #expect(await engines.keeps("t63.example"))
        for index in 100..<300 { _ = await engines.engine("t\(index).example") }
        #expect(await engines.keeps("common"))
        #expect(await engines.keeps(Self.allowed))
        #expect(await !engines.keeps("first.example"))
        #expect(await !engines.keeps("t235.example"))
        #expect(await engines.keeps("t236.example"))
        #expect(await engines.keeps("t299.example"))
        // A forgotten tenant loses its place; the configured one cannot.
        await engines.forget("t299.example")
        await engines.forget("common")
        #expect(await !engines.keeps("t299.example"))
        #expect(await engines.keeps("common"))
    }
}
