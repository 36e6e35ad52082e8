import CurlClient
import Foundation
import GatehouseCore
import GatehouseSQLite
import Hummingbird
import HummingbirdTesting
import Logging

@testable import GatehouseServer

/// A gateway core over a throwaway SQLite file, driven through Hummingbird's in-process test
/// client: no socket, no emulator. For checks of the HTTP mapping alone (statuses, problem
/// documents, headers); flows that need a provider stay in the end-to-end suite. `logs`
/// captures the gateway's log lines. GitHub and
/// Microsoft are configured at a host that never resolves, and nothing here calls them.
func withInProcessGateway<T: Sendable>(
    gateway adjust: (inout GatewayConfiguration) -> Void = { _ in }, logs: LogSink? = nil, live: Bool = false,
    _ body: @Sendable (_ client: any TestClientProtocol, _ gatehouse: Gatehouse) async throws -> T
) async throws -> T {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-inprocess-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let http = CurlHTTPClient()
    defer { http.shutdown() }
    // `.invalid` never resolves (RFC 6761): nothing here may reach a provider.
    let unused = "https://idp.invalid"
    var configuration = GatewayConfiguration(
        publicURL: "https://gw.example", returnToAllowList: ["https://app.example.com/signed-in"],
        github: .emulator(baseURL: unused, clientID: "gh-client", clientSecret: "gh-secret"),
        microsoft: .emulator(baseURL: unused, clientID: "ms-client", clientSecret: "ms-secret"))
    configuration.photoBytes = PhotoBuffer.joining
    adjust(&configuration)
    let storage = try SQLiteStorage(path: folder + "/gatehouse.sqlite")
    try await storage.migrate()
    let logger = Logger(label: "gatehouse-inprocess") { label in
        guard let logs else { return SwiftLogNoOpLogHandler() }
        return JSONLogHandler(label: label, sink: logs)
    }
    let gatehouse = try Gatehouse(
        configuration: configuration, storage: storage, vault: try TokenVault(keys: [TokenVault.generateKey()], store: storage), http: http,
        logger: logger)
    let assembly = GatewayAssembly(gatehouse: gatehouse, metrics: ServerMetrics(), demoPage: false)
    let app = Application(router: GatehouseServer.router(for: assembly, logger: logger), logger: logger)
    return try await app.test(live ? .live : .router) { client in try await body(client, gatehouse) }
}

extension TestResponse {
    /// The body as a JSON object (a problem document, a profile).
    var json: [String: Any] {
        get throws {
            guard let object = try JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any] else {
                throw InProcessFailure("not a JSON object: \(String(buffer: body))")
            }
            return object
        }
    }

    /// The problem document's `code`, `nil` when the answer is not a problem document.
    var problemCode: String? {
        guard headers[.contentType] == "application/problem+json" else { return nil }
        return (try? json)?["code"] as? String
    }
}

/// A failed expectation about an answer's shape.
struct InProcessFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
