import Foundation
import HTTPTypes
import Hummingbird
import StandardWebhooks

/// An app's webhook receiver (`POST /sample-app/webhooks`): it verifies each delivery's
/// Standard Webhooks signature with `EmulatorConfiguration.demoWebhookSecret` (`401` when it
/// does not verify), keeps the last 2,000 events and answers `204`. `GET /sample-app/webhooks`
/// lists them, newest first, as the demo's page of received events (`?format=json` for
/// tools). Faults (`POST /_emulator/faults`) make it fail like a receiver that is down.
struct SampleAppWebhooks {
    let received: SampleAppEvents
    let verifier = WebhookVerifier(secrets: [WebhookSecret(EmulatorConfiguration.demoWebhookSecret)!])

    func register(on router: Router<BasicRequestContext>) {
        router.post("/sample-app/webhooks") { request, _ in
            var request = request
            let body = Data(buffer: try await request.collectBody(upTo: 1 << 20))
            let headers = request.headers
            do {
                try verifier.verify(header: { name in headers[HTTPField.Name(name)!] }, body: body)
            } catch {
                return Response.json(["error": "signature: \(error)"], status: .unauthorized)
            }
            await received.record(
                SampleAppEvent(
                    id: headers[HTTPField.Name("webhook-id")!] ?? "", signature: headers[HTTPField.Name("webhook-signature")!] ?? "",
                    timestamp: headers[HTTPField.Name("webhook-timestamp")!] ?? "", body: String(decoding: body, as: UTF8.self)))
            return Response(status: .noContent)
        }
        router.get("/sample-app/webhooks") { request, _ in
            let events = await received.all().reversed()
            if request.uri.queryParameters.get("format") == "json" {
                return Response.json(
                    events.map { ["id": $0.id, "timestamp": $0.timestamp, "signature": $0.signature, "body": $0.body] as [String: Any] })
            }
            let rows = events.map { event -> String in
                let object = (try? JSONSerialization.jsonObject(with: Data(event.body.utf8)) as? [String: Any]) ?? [:]
                let type = object["type"] as? String ?? "?"
                return "<tr><td>\(WebText.html(event.id))</td><td>\(WebText.html(type))</td><td><code>\(WebText.html(event.body))</code></td></tr>"
            }
            let page = """
                <!doctype html><meta charset="utf-8"><title>Sample app: webhooks received</title>
                <h1>Webhooks received (signatures verified)</h1>
                <table><tr><th>id</th><th>type</th><th>body</th></tr>\(rows.joined())</table>
                """
            return Response(
                status: .ok, headers: [.contentType: "text/html; charset=utf-8"], body: ResponseBody(byteBuffer: ByteBuffer(string: page)))
        }
    }
}

/// One delivery the sample app accepted.
struct SampleAppEvent: Sendable {
    var id: String
    var signature: String
    var timestamp: String
    var body: String
}

/// The sample app's last 2,000 events.
actor SampleAppEvents {
    private var kept: [SampleAppEvent] = []

    func record(_ event: SampleAppEvent) {
        kept.append(event)
        if kept.count > 2000 { kept.removeFirst(kept.count - 2000) }
    }

    func all() -> [SampleAppEvent] { kept }

    func clear() { kept.removeAll() }
}
