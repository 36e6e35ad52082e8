import Foundation
import StandardWebhooks
import Testing

/// The Swift Standard Webhooks library against the reference implementation (the PyPI
/// `standardwebhooks` package): messages it signs verify here, messages signed here verify
/// there, and tampering, old timestamps and unknown secrets are refused.
@Suite("Standard Webhooks")
struct StandardWebhooksTests {
    static let secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

    static func python() throws -> String {
        try #require(
            ProcessInfo.processInfo.environment["GATEHOUSE_TEST_PYJWT_PYTHON"],
            "set GATEHOUSE_TEST_PYJWT_PYTHON to a python with standardwebhooks (scripts/test does)")
    }

    @Test("a message signed by the reference library verifies; a changed body, an old timestamp or another secret does not")
    func verifiesReferenceSignatures() async throws {
        let now = Int(Date().timeIntervalSince1970)
        let body = #"{"type":"account.created","data":{"uid":"u1"}}"#
        let script = """
            import sys
            from datetime import datetime, timezone
            from standardwebhooks.webhooks import Webhook
            secret, msg_id, ts, body = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
            print(Webhook(secret).sign(msg_id, datetime.fromtimestamp(ts, tz=timezone.utc), body))
            """
        let run = try await GatewayTokenTests.output(try Self.python(), ["-c", script, Self.secret, "msg_1", String(now), body])
        #expect(run.status == 0, "\(run.output)")
        let signature = run.output.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(signature.hasPrefix("v1,"))
        let verifier = WebhookVerifier(secrets: [try #require(WebhookSecret(Self.secret))])
        let headers = [("webhook-id", "msg_1"), ("webhook-timestamp", String(now)), ("webhook-signature", signature)]
        try verifier.verify(headers: headers.map { (name: $0.0, value: $0.1) }, body: Data(body.utf8))
        // Our signer makes the same signature.
        let ours = WebhookSigner(secrets: [try #require(WebhookSecret(Self.secret))]).headers(id: "msg_1", timestamp: now, body: Data(body.utf8))
        let holds = ours.first { $0.name == "webhook-signature" }?.value == signature
        #expect(holds)

        #expect(throws: WebhookVerificationError.noMatchingSignature) {
            try verifier.verify(headers: headers.map { (name: $0.0, value: $0.1) }, body: Data(body.replacingOccurrences(of: "u1", with: "u2").utf8))
        }
        #expect(throws: WebhookVerificationError.timestampOutOfTolerance) {
            try verifier.verify(
                headers: headers.map { (name: $0.0, value: $0.1) }, body: Data(body.utf8), now: Date(timeIntervalSince1970: Double(now + 600)))
        }
        let other = WebhookVerifier(secrets: [WebhookSecret.random()])
        #expect(throws: WebhookVerificationError.noMatchingSignature) {
            try other.verify(headers: headers.map { (name: $0.0, value: $0.1) }, body: Data(body.utf8))
        }
        #expect(throws: WebhookVerificationError.missingHeader("webhook-signature")) {
            try verifier.verify(headers: Array(headers.prefix(2)).map { (name: $0.0, value: $0.1) }, body: Data(body.utf8))
        }
    }

    @Test("during a rotation both secrets sign, and a receiver knowing either one verifies (checked by the reference library too)")
    func rotation() async throws {
        let old = try #require(WebhookSecret(Self.secret))
        let new = WebhookSecret.random()
        let now = Int(Date().timeIntervalSince1970)
        let body = Data(#"{"a":1}"#.utf8)
        let headers = WebhookSigner(secrets: [new, old]).headers(id: "msg_2", timestamp: now, body: body)
        try WebhookVerifier(secrets: [old]).verify(headers: headers, body: body)
        try WebhookVerifier(secrets: [new]).verify(headers: headers, body: body)
        let script = """
            import sys, json
            from standardwebhooks.webhooks import Webhook
            secret, headers, body = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
            Webhook(secret).verify(body, headers)
            print("ok")
            """
        let json = String(
            decoding: try JSONSerialization.data(withJSONObject: Dictionary(uniqueKeysWithValues: headers.map { ($0.name, $0.value) })), as: UTF8.self
        )
        for secret in [old.text, new.text] {
            let run = try await GatewayTokenTests.output(try Self.python(), ["-c", script, secret, json, #"{"a":1}"#])
            #expect(run.output.trimmingCharacters(in: .whitespacesAndNewlines) == "ok", "\(run.output)")
        }
        #expect(WebhookSecret("whsec_short") == nil)
        #expect(WebhookSecret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw") == nil)
        #expect(old.description == "whsec_…")
    }
}
