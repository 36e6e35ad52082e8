import Foundation
import HTTPTypes
import Hummingbird
import StandardWebhooks

/// An app's own backend as Gatehouse's blocking hooks reach it (`/sample-app/hooks/{event}`):
/// it verifies each call's Standard Webhooks signature with `EmulatorConfiguration.demoHookSecret`
/// (`401` when it does not verify), keeps the call for tests, and answers by two rules — a
/// new account whose email is at `blocked.example` is denied with a message, and the seeded
/// user `octocat@github.com` gets `{"role":"admin"}` as custom claims. Faults
/// (`POST /_emulator/faults`) replace the answer as on any emulated endpoint.
struct SampleAppHooks {
    let calls: SampleAppCalls
    let verifier = WebhookVerifier(secrets: [WebhookSecret(EmulatorConfiguration.demoHookSecret)!])

    /// The domain whose new accounts the sample app refuses.
    static let blockedDomain = "blocked.example"
    /// The user the sample app makes an administrator.
    static let administrator = "octocat@github.com"

    func register(on router: Router<BasicRequestContext>) {
        router.post("/sample-app/hooks/{event}") { request, context in
            var request = request
            let event = context.parameters.get("event") ?? ""
            let body = Data(buffer: try await request.collectBody(upTo: 1 << 20))
            let headers = ["webhook-id", "webhook-timestamp", "webhook-signature", "content-type", "user-agent"].compactMap { name in
                request.headers[HTTPField.Name(name)!].map { (name, $0) }
            }
            await calls.record(
                SampleAppCall(event: event, headers: Dictionary(uniqueKeysWithValues: headers), body: String(decoding: body, as: UTF8.self)))
            do {
                try verifier.verify(header: { name in headers.first { $0.0 == name }?.1 }, body: body)
            } catch {
                return Response.json(["error": "signature: \(error)"], status: .unauthorized)
            }
            let object = (try? JSONSerialization.jsonObject(with: body) as? [String: Any]) ?? [:]
            let data = object["data"] as? [String: Any] ?? [:]
            let account = data["account"] as? [String: Any] ?? [:]
            let profile = data["profile"] as? [String: Any] ?? [:]
            let email = ((account["email"] as? String) ?? (profile["email"] as? String) ?? "").lowercased()
            if event == "before-create", email.hasSuffix("@" + Self.blockedDomain) {
                return Response.json(["decision": "deny", "message": "Accounts at \(Self.blockedDomain) are not accepted by this app."])
            }
            // Only an address a provider vouches for earns a role: each address is read with its
            // own flag. The account's and this sign-in's profile may name different addresses,
            // and one's flag says nothing of the other's.
            func vouched(_ object: [String: Any]) -> Bool {
                (object["email"] as? String)?.lowercased() == Self.administrator && object["emailVerified"] as? Bool == true
            }
            if event == "before-sign-in", vouched(account) || vouched(profile) {
                return Response.json(["decision": "allow", "customClaims": ["role": "admin"]])
            }
            return Response.json(["decision": "allow"])
        }
    }
}

/// One call the sample app received.
struct SampleAppCall: Sendable {
    var event: String
    var headers: [String: String]
    var body: String
}

/// The sample app's last 200 calls, for `GET /_emulator/sample-app/calls`.
actor SampleAppCalls {
    private var kept: [SampleAppCall] = []

    func record(_ call: SampleAppCall) {
        kept.append(call)
        if kept.count > 200 { kept.removeFirst(kept.count - 200) }
    }

    func all() -> [SampleAppCall] { kept }

    func clear() { kept.removeAll() }
}
