import Hummingbird
import Logging

// The benchmark's floor row: one Hummingbird route and nothing else — no middleware, no core,
// the same release flags as `gatehouse` — answering what the gateway's `/healthz` answers.
// What the gateway's `/healthz` costs above this is the gateway's own per-request work.
// Usage: gatehouse-bench-floor PORT (bench.py waits until /healthz answers on it).

let port = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 8089
let answer = ByteBuffer(string: #"{"status":"ok"}"#)
let router = Router()
router.get("/healthz") { _, _ in
    Response(status: .ok, headers: [.contentType: "application/json"], body: ResponseBody(byteBuffer: answer))
}
var logger = Logger(label: "floor")
logger.logLevel = .warning
let application = Application(
    router: router, configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: "Gatehouse"), logger: logger)
try await application.runService()
