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
        let foundProblem = schemas.values.compactMap { $0 as? [String: Any] }.first { ($0["required"] as? [String])?.contains("code") == true }
        let problem = try #require(foundProblem)
        let code = try #require((problem["properties"] as? [String: Any])?["code"] as? [String: Any])
        let documented = Set(try #require(code["enum"] as? [String]))
        #expect(documented == Set(GatehouseError.Code.allCases.map(\.rawValue)))
    }

    @Test(
        "every error the server can answer has an example under its status (Problem<status>) whose status, title and type are what the server renders; every operation documents 500"
    )
    func problemExamplesMatchServer() throws {
        let specURL = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../OpenAPI/openapi.yaml")
        let spec = try #require(try Yams.load(yaml: String(contentsOf: specURL, encoding: .utf8)) as? [String: Any])
        let responses = try #require((spec["components"] as? [String: Any])?["responses"] as? [String: Any])
        // What the server answers: every code in every situation (most fall back to the usual status).
        let situations: [GatehouseError.Situation] = [.usual, .refusedByPolicy, .hiddenFeature, .tooLarge, .timedOut, .temporarilyUnavailable]
        var rendered: [String: (title: String, status: Int)] = [:]
        for code in GatehouseError.Code.allCases {
            for situation in situations {
                let error = GatehouseError(code: code, situation: situation, detail: "x")
                rendered["\(error.status.code) \(code.rawValue)"] = (error.title, error.status.code)
            }
        }
        var documented: [String: [String: Any]] = [:]
        for (name, response) in responses where name.hasPrefix("Problem") {
            let content = (response as? [String: Any])?["content"] as? [String: Any]
            let examples = ((content?["application/problem+json"] as? [String: Any])?["examples"] as? [String: Any]) ?? [:]
            for example in examples.values {
                let value = try #require((example as? [String: Any])?["value"] as? [String: Any])
                let code = try #require(value["code"] as? String)
                #expect(name == "Problem\(value["status"] as? Int ?? 0)", "\(code) is filed under \(name)")
                documented["\(value["status"] as? Int ?? 0) \(code)"] = value
            }
        }
        #expect(
            Set(documented.keys) == Set(rendered.keys),
            "missing: \(Set(rendered.keys).subtracting(documented.keys).sorted()), extra: \(Set(documented.keys).subtracting(rendered.keys).sorted())"
        )
        for (key, value) in documented {
            guard let server = rendered[key] else { continue }
            #expect(value["title"] as? String == server.title, "\(key): \(value["title"] ?? "") vs \(server.title)")
            #expect(value["type"] as? String == "urn:gatehouse:problem:\(key.split(separator: " ")[1])")
        }
        let paths = try #require(spec["paths"] as? [String: Any])
        for (path, item) in paths {
            for (method, operation) in (item as? [String: Any]) ?? [:] where ["get", "post", "put", "patch", "delete"].contains(method) {
                let answers = ((operation as? [String: Any])?["responses"] as? [String: Any]) ?? [:]
                #expect(answers["500"] != nil, "\(method) \(path) does not document 500")
            }
        }
    }
}
