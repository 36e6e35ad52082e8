import CurlClient
import Foundation
import GatehouseCore
import Testing

/// Issue #19: one request followed through the log, the core's lines and upstream failures included.
@Suite("Request tracing")
struct RequestTracingTests {
    /// The captured lines (JSON objects) that carry `id`.
    static func lines(_ deployment: TestDeployment, id: String) -> [[String: Any]] {
        deployment.logs.lines.compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
            .filter { $0["request.id"] as? String == id }
    }

    @Test("the core's lines (sign-in started) and an upstream failure carry the request's id, as do the answer and its problem document")
    func coreAndUpstreamLinesCarryTheId() async throws {
        // The test's client stands for the deployment's proxy, whose ids are adopted.
        try await withDeployment(gateway: { $0.trustedProxies = ["127.0.0.1"] }) { deployment in
            var browser = Browser(deployment)
            _ = try await browser.complete(login: "octocat")
            let start = try await browser.send(
                "\(deployment.gatewayURL)/v1/auth/github.com/start?return_to=\(FormEncoding.escape(TestDeployment.returnTo))&result_challenge=\(String(repeating: "c", count: 43))",
                headers: ["X-Request-Id": "trace-start-1"])
            #expect(start.headers["x-request-id"] == "trace-start-1")
            let started = Self.lines(deployment, id: "trace-start-1").filter { $0["message"] as? String == "sign-in started" }
            #expect(started.count == 1)
            // One request id per line: not Hummingbird's own counter beside it.
            let holds = started.allSatisfy { $0["hb.request.id"] == nil }
            #expect(holds, "\(started)")

            _ = try await deployment.control("faults", #"{"endpoint": "GET /github-api/user", "status": 500, "body": "{}"}"#)
            let failed = try await browser.send(
                "\(deployment.gatewayURL)/v1/me/providers/github.com/profile?refresh=true", headers: ["X-Request-Id": "trace-upstream-2"])
            #expect(failed.status == 502, "\(failed.bodyText)")
            #expect(try jsonObject(failed)["requestId"] as? String == "trace-upstream-2")
            let traced = Self.lines(deployment, id: "trace-upstream-2")
            let holds2 = traced.contains { $0["message"] as? String == "upstream call failed" && $0["upstream.status"] as? Int == 500 }
            #expect(holds2, "\(traced)")
            let holds3 = traced.contains { $0["message"] as? String == "request" && $0["http.status"] as? Int == 502 }
            #expect(holds3, "\(traced)")
        }
    }

    @Test("a caller's X-Request-Id is not adopted unless it comes through a trusted proxy: it cannot make its lines pass for another request's")
    func untrustedRequestIdIsNotAdopted() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            _ = try await browser.complete(login: "octocat")
            let answer = try await browser.send("\(deployment.gatewayURL)/v1/me", headers: ["X-Request-Id": "victim-req-123"])
            #expect(answer.status == 200)
            let id = try #require(answer.headers["x-request-id"])
            #expect(id != "victim-req-123")
            #expect(Self.lines(deployment, id: "victim-req-123").isEmpty)
            let foundLine = Self.lines(deployment, id: id).first { $0["message"] as? String == "request" }
            let line = try #require(foundLine)
            #expect(line["request.offered_id"] as? String == "victim-req-123", "\(line)")
        }
    }

    @Test(
        "the access line says who and from where: the client's address, the user or service key the route found, the user agent, the answer's bytes, the path cut at 2 KB; probes only with GATEHOUSE_LOG_PROBES"
    )
    func accessLineFields() async throws {
        for logProbes in [false, true] {
            try await withDeployment(gateway: { $0.logProbes = logProbes }) { deployment in
                var browser = Browser(deployment)
                let uid = try account(try await browser.complete(login: "octocat")).uid
                let me = try await browser.send("\(deployment.gatewayURL)/v1/me", headers: ["User-Agent": "gatehouse-test/1.0"])
                let meId = try #require(me.headers["x-request-id"])
                let foundMeLine = Self.lines(deployment, id: meId).first { $0["message"] as? String == "request" }
                let meLine = try #require(foundMeLine)
                #expect(meLine["user.id"] as? String == uid && meLine["client.address"] as? String == "127.0.0.1", "\(meLine)")
                #expect(meLine["http.user_agent"] as? String == "gatehouse-test/1.0" && meLine["http.response_bytes"] as? Int == me.body.count)
                // One letter and 20,000 combining marks is one character: cut at 256 bytes.
                let marked = "a" + String(repeating: "\u{301}", count: 20_000)
                let marks = try await browser.send("\(deployment.gatewayURL)/v1/me", headers: ["User-Agent": marked])
                let marksId = try #require(marks.headers["x-request-id"])
                let foundMarksLine = Self.lines(deployment, id: marksId).first { $0["message"] as? String == "request" }
                let marksLine = try #require(foundMarksLine)
                let agent = try #require(marksLine["http.user_agent"] as? String)
                #expect(agent.utf8.count <= 256 && agent.utf8.count >= 250 && agent.utf8.first == UInt8(ascii: "a"), "\(agent.utf8.count) bytes")

                let key = try await ProviderAPITests.key(deployment, ["profile:read"])
                let byKey = try await ProviderAPITests.call(deployment, "/v1/users/\(uid)", key: key)
                let byKeyId = try #require(byKey.headers["x-request-id"])
                let foundKeyLine = Self.lines(deployment, id: byKeyId).first { $0["message"] as? String == "request" }
                let keyLine = try #require(foundKeyLine)
                let keyId = try #require(keyLine["key.id"] as? String, "\(keyLine)")
                #expect(keyId.hasPrefix("sk_") && keyLine["user.id"] == nil, "\(keyLine)")
                #expect(!deployment.logs.lines.joined().contains(key), "the secret is never logged")

                // A long path is logged cut: a line does not grow with what a client sends.
                let long = "/v1/" + String(repeating: "a", count: 70_000)
                let unknown = try await deployment.client.execute(OutboundRequest(url: deployment.gatewayURL + long))
                #expect(unknown.status == 404)
                let unknownId = try #require(unknown.headers["x-request-id"])
                let foundUnknownLine = Self.lines(deployment, id: unknownId).first { $0["message"] as? String == "request" }
                let unknownLine = try #require(foundUnknownLine)
                #expect(unknownLine["http.path"] as? String == String(long.prefix(2048)) + "…")

                let probe = try await deployment.client.execute(OutboundRequest(url: deployment.gatewayURL + "/healthz"))
                let probeId = try #require(probe.headers["x-request-id"])
                let probeLines = Self.lines(deployment, id: probeId)
                let holds = probeLines.contains { $0["message"] as? String == "request" } == logProbes
                #expect(holds, "\(probeLines)")
            }
        }
    }
}
