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
        let registered = try await withInProcessGateway { _, gatehouse in
            Set(GatehouseServer.routes(for: gatehouse, metrics: ServerMetrics(), demoPage: true).1.routes.map { "\($0.method) \($0.path)" })
        }
        #expect(registered == documented)
        #expect(registered.count >= 10)
    }

    @Test("the problem document's code enum is exactly GatehouseError.Code")
    func problemCodesMatchSpec() throws {
        let specURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../OpenAPI/openapi.yaml")
        let spec = try #require(try Yams.load(yaml: String(contentsOf: specURL, encoding: .utf8)) as? [String: Any])
        let schemas = try #require((spec["components"] as? [String: Any])?["schemas"] as? [String: Any])
        let problem = try #require(
            schemas.values.compactMap { $0 as? [String: Any] }.first { ($0["required"] as? [String])?.contains("code") == true })
        let code = try #require((problem["properties"] as? [String: Any])?["code"] as? [String: Any])
        let documented = Set(try #require(code["enum"] as? [String]))
        #expect(documented == Set(GatehouseError.Code.allCases.map(\.rawValue)))
    }
}
