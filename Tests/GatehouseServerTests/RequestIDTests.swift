import Foundation
import GatehouseCore
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

@testable import GatehouseServer

/// Issue #19: a request id on every answer, in its problem documents and its log lines.
@Suite("Request ids")
struct RequestIDTests {
    static let requestID = HTTPField.Name("X-Request-Id")!

    /// The captured lines as JSON objects.
    static func lines(_ logs: LogSink) throws -> [[String: Any]] {
        try logs.lines.map { try #require(try JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]) }
    }

    /// The loopback peer of a live test client as the deployment's trusted proxy.
    static let trustLoopback: @Sendable (inout GatewayConfiguration) -> Void = { $0.trustedProxies = ["127.0.0.1", "::1"] }

    @Test(
        "from a trusted proxy, a sane X-Request-Id is answered back, named in the problem document and in the log line, whose numbers are numbers and whose time has milliseconds"
    )
    func saneIdIsKept() async throws {
        let logs = LogSink(capture: true)
        try await withInProcessGateway(gateway: Self.trustLoopback, logs: logs, live: true) { client, _ in
            let response = try await client.execute(uri: "/v1/me", method: .get, headers: [Self.requestID: "checkout-42.retry_1"])
            #expect(response.status == .unauthorized)
            #expect(response.headers[Self.requestID] == "checkout-42.retry_1")
            #expect(try response.json["requestId"] as? String == "checkout-42.retry_1")
        }
        let foundLine = try Self.lines(logs).first { $0["message"] as? String == "request" }
        let line = try #require(foundLine)
        #expect(line["request.id"] as? String == "checkout-42.retry_1")
        #expect(line["http.status"] as? Int == 401, "\(line)")
        #expect(line["duration.ms"] is Double || line["duration.ms"] is Int, "\(line)")
        let time = try #require(line["ts"] as? String)
        #expect(time.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"#, options: .regularExpression) != nil, "\(time)")
    }

    @Test("an unsafe X-Request-Id (spaces, quotes, over 64 bytes, non-ASCII, empty) is replaced by a new one; without one, every answer gets its own")
    func unsafeOrMissingIdsAreGenerated() async throws {
        try await withInProcessGateway(gateway: Self.trustLoopback, live: true) { client, _ in
            var seen: Set<String> = []
            for sent in ["has space", #"a"b"#, String(repeating: "a", count: 65), "café", "", nil] {
                var headers: HTTPFields = [:]
                if let sent { headers[Self.requestID] = sent }
                let response = try await client.execute(uri: "/healthz", method: .get, headers: headers)
                let id = try #require(response.headers[Self.requestID])
                #expect(id != sent)
                #expect(RequestID.accepted(id) == id && id.count == 16, "\(id)")
                seen.insert(id)
            }
            #expect(seen.count == 6)
            // A sane id of exactly 64 bytes is kept.
            let longest = String(repeating: "z", count: 64)
            let response = try await client.execute(uri: "/nowhere", method: .get, headers: [Self.requestID: longest])
            #expect(response.status == .notFound)
            #expect(response.headers[Self.requestID] == longest)
            #expect(try response.json["requestId"] as? String == longest)
        }
    }

    @Test(
        "a caller that is not a trusted proxy cannot choose its request id: a new one is answered and logged, the caller's value only in request.offered_id"
    )
    func untrustedCallersIdIsNotAdopted() async throws {
        let logs = LogSink(capture: true)
        try await withInProcessGateway(logs: logs, live: true) { client, _ in
            let response = try await client.execute(uri: "/v1/me", method: .get, headers: [Self.requestID: "victim-req-123"])
            #expect(response.status == .unauthorized)
            let id = try #require(response.headers[Self.requestID])
            #expect(id != "victim-req-123" && id.count == 16)
            #expect(try response.json["requestId"] as? String == id)
        }
        let lines = try Self.lines(logs)
        let holds = !lines.contains { $0["request.id"] as? String == "victim-req-123" }
        #expect(holds, "\(lines)")
        let foundLine = lines.first { $0["message"] as? String == "request" }
        let line = try #require(foundLine)
        #expect(line["request.offered_id"] as? String == "victim-req-123", "\(line)")
        #expect(line["request.id"] as? String != "victim-req-123")
    }
}
