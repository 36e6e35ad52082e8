import CurlClient
import Foundation
import GatehouseCore
import Testing

/// The API reference page at `/docs` (`GATEHOUSE_API_DOCS_FILE`): off by default, served
/// whole from the file named at start under a policy that runs no script, and a file that
/// cannot be served stops `serve` instead of answering half a page.
@Suite("API reference page")
struct APIReferencePageTests {
    static let page = "<!doctype html><html lang=\"en\"><title>Gatehouse API</title><h1>Gatehouse API</h1><p>GET /v1/me — é</p></html>"

    @Test("off by default: /docs is not served")
    func offByDefault() async throws {
        try await withDeployment { deployment in
            let answer = try await deployment.client.execute(OutboundRequest(url: "\(deployment.gatewayURL)/docs"))
            #expect(answer.status == 404)
        }
    }

    @Test(
        "GATEHOUSE_API_DOCS_FILE: serve answers the file at /docs, no script allowed, ETag and 304; a missing or empty file stops serve naming the setting"
    )
    func servedFromTheFile() async throws {
        try await withEmulatorAndFolder("gatehouse-docs") { emulatorURL, folder in
            try Data(Self.page.utf8).write(to: URL(fileURLWithPath: "\(folder)/api.html"))
            try Data().write(to: URL(fileURLWithPath: "\(folder)/empty.html"))
            let serve = try await ServeProcess.start(
                name: "docs", database: nil, emulatorURL: emulatorURL, key: TokenVault.generateKey(), folder: folder,
                extra: ["GATEHOUSE_API_DOCS_FILE": "\(folder)/api.html"])
            defer { serve.process.stop() }
            let client = CurlHTTPClient()
            let answer = try await client.execute(OutboundRequest(url: "\(serve.url)/docs"))
            #expect(answer.status == 200)
            #expect(answer.bodyText == Self.page)
            #expect(answer.headers["content-type"] == "text/html; charset=utf-8")
            let policy = try #require(answer.headers["content-security-policy"])
            #expect(policy.contains("default-src 'none'") && !policy.contains("script-src"), "\(policy)")
            let etag = try #require(answer.headers["etag"])
            let again = try await client.execute(OutboundRequest(url: "\(serve.url)/docs", headers: ["If-None-Match": etag]))
            #expect(again.status == 304 && again.body.isEmpty)
            // Compared weakly, as RFC 9110 says: a compressing proxy's W/ tag and * match too.
            for tag in ["W/\(etag)", "\"other\", \(etag)", "*"] {
                let revalidated = try await client.execute(OutboundRequest(url: "\(serve.url)/docs", headers: ["If-None-Match": tag]))
                #expect(revalidated.status == 304, "\(tag)")
            }
            let changed = try await client.execute(OutboundRequest(url: "\(serve.url)/docs", headers: ["If-None-Match": "\"other\""]))
            #expect(changed.status == 200)

            try FileManager.default.createDirectory(atPath: "\(folder)/folder.html", withIntermediateDirectories: false)
            for (file, message) in [
                ("missing.html", "cannot read GATEHOUSE_API_DOCS_FILE"), ("folder.html", "not a readable file"),
                ("empty.html", "is empty or not UTF-8"),
            ] {
                do {
                    let refused = try await ServeProcess.start(
                        name: "docs-\(file)", database: nil, emulatorURL: emulatorURL, key: TokenVault.generateKey(), folder: folder,
                        extra: ["GATEHOUSE_API_DOCS_FILE": "\(folder)/\(file)"])
                    refused.process.stop()
                    Issue.record("serve started with GATEHOUSE_API_DOCS_FILE=\(file)")
                } catch let error as FlowError {
                    #expect(error.description.contains(message), "\(error)")
                }
            }
        }
    }
}
