import CurlClient
import Foundation
import GatehouseCore
import GatehouseServer
import Testing
import Yams

/// The server's routes and `OpenAPI/openapi.yaml` describe the same operations.
@Suite("OpenAPI document")
struct OpenAPIRoutesTests {
    @Test("every registered route is in the spec and every spec operation is registered")
    func routesMatchSpec() async throws {
        let specURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../OpenAPI/openapi.yaml")
        let spec = try #require(try Yams.load(yaml: String(contentsOf: specURL, encoding: .utf8)) as? [String: Any])
        let paths = try #require(spec["paths"] as? [String: Any])
        var documented = Set<String>()
        for (path, item) in paths {
            for method in (item as? [String: Any])?.keys ?? [:].keys where ["get", "post", "put", "patch", "delete"].contains(method) {
                documented.insert("\(method.uppercased()) \(path)")
            }
        }
        // No server is needed: the route table is built from an assembled core.
        let client = CurlHTTPClient()
        defer { client.shutdown() }
        let gatehouse = try Gatehouse(
            configuration: GatewayConfiguration(publicURL: "https://gw.example", returnToAllowList: []),
            storage: try GatehouseSQLiteStorageForSpec.make(), vault: try TokenVault(keys: [TokenVault.generateKey()]), http: client)
        let registered = Set(
            GatehouseServer.routes(for: gatehouse, metrics: ServerMetrics(), demoPage: true).1.routes.map { "\($0.method) \($0.path)" })
        #expect(registered == documented)
        #expect(registered.count >= 10)
    }
}
