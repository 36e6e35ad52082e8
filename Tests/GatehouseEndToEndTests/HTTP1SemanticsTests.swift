import CurlClient
import Foundation
import GatehouseCore
import GatehouseTestSupport
import Testing

/// What HTTP/1.x asks of a server beyond Hummingbird's own handling, on real sockets to both
/// listeners: a connection that is not kept alive closes after its answer, and
/// `Expect: 100-continue` is answered before the body comes. The idle timeout is the default
/// (75 s), so a connection left open would outlast every read's 20 s bound.
@Suite("HTTP/1 connection semantics")
struct HTTP1SemanticsTests {
    /// The public and the operations listener's ports.
    static func ports(_ deployment: TestDeployment) throws -> [Int] {
        [
            try #require(URLComponents(string: deployment.gatewayURL)?.port),
            try #require(URLComponents(string: deployment.operationsURL)?.port),
        ]
    }

    @Test(
        "a connection that is not kept alive closes after its answer: HTTP/1.0 without keep-alive, HTTP/1.1 with Connection: Close in any case or in a list; HTTP/1.0 with keep-alive stays open"
    )
    func closesWhenNotKeptAlive() async throws {
        try await withDeployment { deployment in
            for port in try Self.ports(deployment) {
                for head in [
                    "GET /healthz HTTP/1.0\r\n\r\n", "GET /healthz HTTP/1.1\r\nHost: gatehouse\r\nConnection: Close\r\n\r\n",
                    "GET /healthz HTTP/1.1\r\nHost: gatehouse\r\nConnection: TE, close\r\n\r\n",
                ] {
                    let answer = try await LoopbackSocket.offPool {
                        let socket = try LoopbackSocket.connect(port: port)
                        defer { socket.close() }
                        try socket.send(head)
                        return String(decoding: try socket.readUntilClosed().rest, as: UTF8.self)
                    }
                    #expect(
                        answer.hasPrefix("HTTP/1.1 200 OK\r\n") && answer.hasSuffix(#""status":"ok"}"#), "\(port) \(head.debugDescription): \(answer)"
                    )
                    #expect(answer.lowercased().contains("\r\nconnection: close\r\n"), "\(port) \(head.debugDescription): \(answer)")
                }
                // Kept alive on request: a second request on the same connection is answered too.
                let second = try await LoopbackSocket.offPool {
                    let socket = try LoopbackSocket.connect(port: port)
                    defer { socket.close() }
                    try socket.send("GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
                    _ = try socket.read(until: #""status":"ok"}"#)
                    try socket.send("GET /healthz HTTP/1.0\r\n\r\n")
                    return String(decoding: try socket.readUntilClosed().rest, as: UTF8.self)
                }
                #expect(second.hasPrefix("HTTP/1.1 200 OK\r\n"), "\(port): \(second)")
            }
        }
    }

    @Test(
        "a request whose head is over 8 KB is answered, its connection closed and the request counted; one of 7 KB keeps it open for the next request"
    )
    func largeHeadsClose() async throws {
        try await withDeployment { deployment in
            let port = try Self.ports(deployment)[0]
            for (padding, closes) in [(9 << 10, true), (7 << 10, false)] {
                let answer = try await LoopbackSocket.offPool {
                    let socket = try LoopbackSocket.connect(port: port)
                    defer { socket.close() }
                    try socket.send("GET /healthz HTTP/1.1\r\nHost: gatehouse\r\nX-Pad: \(String(repeating: "a", count: padding))\r\n\r\n")
                    if closes { return String(decoding: try socket.readUntilClosed().rest, as: UTF8.self) }
                    let first = try socket.read(until: #""status":"ok"}"#)
                    try socket.send("GET /healthz HTTP/1.1\r\nHost: gatehouse\r\nConnection: close\r\n\r\n")
                    return first + String(decoding: try socket.readUntilClosed().rest, as: UTF8.self)
                }
                let answers = answer.components(separatedBy: "HTTP/1.1 200 OK\r\n").dropFirst()
                #expect(answers.count == (closes ? 1 : 2), "\(padding): \(answer)")
                #expect(answers.first?.lowercased().contains("\r\nconnection: close\r\n") == closes, "\(padding): \(answer)")
            }
            // Counted, so an operator sees clients whose heads cost them keep-alive.
            let metrics = try await deployment.client.execute(OutboundRequest(url: deployment.operationsURL + "/metrics")).bodyText
            #expect(metrics.contains("gatehouse_large_request_heads_total{listener=\"public\"} 1\n"), "\(metrics)")
            #expect(metrics.contains("gatehouse_large_request_heads_total{listener=\"operations\"} 0\n"), "\(metrics)")
        }
    }

    @Test(
        "Expect: 100-continue is answered 100 Continue before the body is sent, and after the answer to a request pipelined before it; an HTTP/1.0 request's expectation is not"
    )
    func answersExpectContinue() async throws {
        try await withDeployment { deployment in
            let port = try Self.ports(deployment)[0]
            let post =
                "POST /v1/auth/result HTTP/1.1\r\nHost: gatehouse\r\nContent-Type: application/json\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"
            let (interim, final) = try await LoopbackSocket.offPool {
                let socket = try LoopbackSocket.connect(port: port)
                defer { socket.close() }
                try socket.send(post)
                let interim = try socket.read(until: "\r\n\r\n")
                try socket.send("{}")
                return (interim, try socket.read(until: #""code":"#))
            }
            #expect(interim == "HTTP/1.1 100 Continue\r\n\r\n")
            // The body went on to the route: no result named is the caller's 400.
            #expect(final.hasPrefix("HTTP/1.1 400 Bad Request\r\n") && final.contains("invalid-argument"), "\(final)")

            // Behind a pipelined request: its whole answer first, then the 100.
            let pipelined = try await LoopbackSocket.offPool {
                let socket = try LoopbackSocket.connect(port: port)
                defer { socket.close() }
                try socket.send("GET /healthz HTTP/1.1\r\nHost: gatehouse\r\n\r\n" + post)
                return try socket.read(until: "100 Continue\r\n\r\n")
            }
            #expect(
                pipelined.hasPrefix("HTTP/1.1 200 OK\r\n") && pipelined.hasSuffix(#""status":"ok"}HTTP/1.1 100 Continue\#r\#n\#r\#n"#), "\(pipelined)"
            )

            // HTTP/1.0 knows no interim answers: the request waits for its body.
            let old = try await LoopbackSocket.offPool {
                let socket = try LoopbackSocket.connect(port: port)
                defer { socket.close() }
                try socket.send(post.replacingOccurrences(of: "HTTP/1.1", with: "HTTP/1.0") + "{}")
                return String(decoding: try socket.readUntilClosed().rest, as: UTF8.self)
            }
            #expect(old.hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(old)")
        }
    }

    @Test(
        "HEAD on the probes (/healthz and /readyz on both listeners, /metrics on the operations one): the GET's status and fields, no body; another method is 405 with Allow: GET, HEAD"
    )
    func probesAnswerHead() async throws {
        try await withDeployment { deployment in
            let ports = try Self.ports(deployment)
            let (publicPort, operationsPort) = (ports[0], ports[1])
            // A cold /readyz first fetches the providers' discovery documents from the in-process
            // emulator, which on a loaded run has outlasted a socket read's 20 s bound: asked
            // once through the client beforehand, the HEADs below wait for no provider.
            let warm = try await deployment.client.execute(OutboundRequest(url: deployment.operationsURL + "/readyz"))
            #expect(warm.status == 200, "\(warm.bodyText)")
            for (port, path) in [
                (publicPort, "/healthz"), (publicPort, "/readyz"), (operationsPort, "/healthz"), (operationsPort, "/readyz"),
                (operationsPort, "/metrics"),
            ] {
                let answer = try await LoopbackSocket.offPool {
                    let socket = try LoopbackSocket.connect(port: port)
                    defer { socket.close() }
                    // Then a GET on the same connection: a body after the HEAD's would be read as its head.
                    try socket.send(
                        "HEAD \(path) HTTP/1.1\r\nHost: gatehouse\r\n\r\nGET /healthz HTTP/1.1\r\nHost: gatehouse\r\nConnection: close\r\n\r\n")
                    return String(decoding: try socket.readUntilClosed().rest, as: UTF8.self)
                }
                let parts = answer.components(separatedBy: "\r\n\r\n")
                #expect(parts.count == 3 && parts[0].hasPrefix("HTTP/1.1 200 OK\r\n"), "\(port) HEAD \(path): \(answer)")
                #expect(parts[0].lowercased().contains("content-length: "), "\(parts[0])")
                #expect(parts.count == 3 && parts[1].hasPrefix("HTTP/1.1 200 OK\r\n") && parts[2] == #"{"status":"ok"}"#, "\(answer)")
            }
            let refused = try await deployment.client.execute(OutboundRequest(method: "DELETE", url: deployment.gatewayURL + "/healthz"))
            #expect(refused.status == 405 && refused.headers["allow"] == "GET, HEAD", "\(refused.status) \(refused.headers)")
        }
    }

    @Test(
        "a request head that is not HTTP (over 80 KB, an unknown method, NUL in a header) is a 400 problem document with its request id, after the answers before it, logged and counted; an error inside a body stays the route's"
    )
    func refusesHeadsThatAreNotHTTP() async throws {
        try await withDeployment { deployment in
            let ports = try Self.ports(deployment)
            let heads = [
                "GET /healthz HTTP/1.1\r\nHost: gatehouse\r\nX-Padding: \(String(repeating: "a", count: 90_000))\r\n\r\n",
                "FOO /healthz HTTP/1.1\r\nHost: gatehouse\r\n\r\n", "GET /healthz HTTP/1.1\r\nHost: gatehouse\r\nX-Bad: a\u{0}b\r\n\r\n",
            ]
            var ids: [String] = []
            for port in ports {
                for head in heads {
                    let answer = try await LoopbackSocket.offPool {
                        let socket = try LoopbackSocket.connect(port: port)
                        defer { socket.close() }
                        try socket.send(head)
                        return String(decoding: try socket.readUntilClosed().rest, as: UTF8.self)
                    }
                    let parts = answer.components(separatedBy: "\r\n\r\n")
                    #expect(parts.count == 2 && parts[0].hasPrefix("HTTP/1.1 400 Bad Request\r\n"), "\(answer.prefix(300))")
                    #expect(parts[0].contains("content-type: application/problem+json"), "\(parts[0])")
                    let problem = try JSONSerialization.jsonObject(with: Data(parts.last!.utf8)) as? [String: Any]
                    let id = try #require(problem?["requestId"] as? String, "\(answer)")
                    #expect(problem?["code"] as? String == "invalid-argument" && parts[0].contains("x-request-id: \(id)"), "\(answer)")
                    ids.append(id)
                }
            }
            // Behind a request being answered: its answer first, then the refusal.
            let pipelined = try await LoopbackSocket.offPool {
                let socket = try LoopbackSocket.connect(port: ports[0])
                defer { socket.close() }
                try socket.send("GET /healthz HTTP/1.1\r\nHost: gatehouse\r\n\r\n" + heads[1])
                return String(decoding: try socket.readUntilClosed().rest, as: UTF8.self)
            }
            #expect(pipelined.hasPrefix("HTTP/1.1 200 OK\r\n") && pipelined.contains(#""status":"ok"}HTTP/1.1 400 Bad Request"#), "\(pipelined)")
            #expect(pipelined.hasSuffix(#""type":"urn:gatehouse:problem:invalid-argument"}"#), "\(pipelined)")
            // A chunk size that is not a number, inside a body the route reads: the route's 400.
            let chunked = try await LoopbackSocket.offPool {
                let socket = try LoopbackSocket.connect(port: ports[0])
                defer { socket.close() }
                try socket.send(
                    "POST /v1/auth/result HTTP/1.1\r\nHost: gatehouse\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n")
                return String(decoding: try socket.readUntilClosed().rest, as: UTF8.self)
            }
            #expect(chunked.hasPrefix("HTTP/1.1 400 Bad Request\r\n") && chunked.contains("invalid-argument"), "\(chunked)")
            // The same error in a body the route did not read, after its answer: no second answer.
            let (answered, after) = try await LoopbackSocket.offPool {
                let socket = try LoopbackSocket.connect(port: ports[0])
                defer { socket.close() }
                try socket.send("DELETE /healthz HTTP/1.1\r\nHost: gatehouse\r\nTransfer-Encoding: chunked\r\n\r\n")
                let answered = try socket.read(until: #""}"#)
                try socket.send("zz\r\n")
                return (answered, String(decoding: try socket.readUntilClosed().rest, as: UTF8.self))
            }
            #expect(answered.hasPrefix("HTTP/1.1 405 Method Not Allowed\r\n"), "\(answered)")
            #expect(after.isEmpty, "\(after)")

            let logged = deployment.logs.lines.filter { $0.contains(#""message":"request refused: not HTTP""#) }
            let holds = ids.allSatisfy { id in logged.contains { $0.contains(#""request.id":"\#(id)""#) } }
            #expect(holds, "\(logged)")
            let metrics = try await deployment.client.execute(OutboundRequest(url: deployment.operationsURL + "/metrics")).bodyText
            for (listener, count) in [("public", 4), ("operations", 3)] {
                #expect(metrics.contains(#"gatehouse_malformed_requests_total{listener="\#(listener)"} \#(count)"#), "\(listener)\n\(metrics)")
            }
        }
    }
}
