import CurlClient
import Hummingbird
import Logging

// The benchmark's floor rows: Hummingbird routes and nothing else — no middleware, no core,
// the same release flags as `gatehouse`. `/healthz` answers what the gateway's `/healthz`
// answers: what the gateway's costs above it is the gateway's own per-request work. `/proxy`,
// when an upstream is given, passes the upstream's `/user/repos` through the gateway's libcurl
// client and answers it whole: what the gateway's passthrough costs above it is the gateway's
// own work on a proxied call (policy, credentials, audit line, headers), and what it costs
// above `/healthz` is what the stack itself adds to a call that goes upstream.
// Usage: gatehouse-bench-floor PORT [UPSTREAM_URL] (bench.py waits until /healthz answers on it).

let port = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 8089
let upstream = CommandLine.arguments.dropFirst(2).first
let answer = ByteBuffer(string: #"{"status":"ok"}"#)
let router = Router()
router.get("/healthz") { _, _ in
    Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: answer))
}
let client = upstream.map { _ in CurlHTTPClient() }
if let upstream, let client {
    let url = upstream + "/user/repos"
    router.get("/proxy") { _, _ in
        let passed = try await client.execute(OutboundRequest(method: "GET", url: url))
        return Response(
            status: .init(code: passed.status), headers: [.contentType: passed.headers["content-type"] ?? "application/octet-stream"],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: passed.body)))
    }
}
var logger = Logger(label: "floor")
logger.logLevel = .warning
let application = Application(
    router: router, configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: "Gatehouse"), logger: logger)
try await application.runService()
client?.shutdown()
