import CurlClient
import Foundation
import GatehouseCore
import ProviderEmulator
import Testing

/// Issue #19: the operations listener (`/metrics`, the detailed `/readyz`), the public port's
/// brief `/readyz`, `gatehouse check`, and settings that stop the start when malformed.
@Suite("Operations listener and gatehouse check")
struct OperationsListenerTests {
    @Test("the public port answers /healthz and a /readyz that says only ready; /metrics and the parts' states are on the operations listener")
    func publicAndOperationsPorts() async throws {
        try await withDeployment { deployment in
            let client = deployment.client
            let ready = try await client.execute(OutboundRequest(url: "\(deployment.gatewayURL)/readyz"))
            #expect(ready.status == 200)
            #expect(try jsonObject(ready).keys.sorted() == ["status"])
            #expect(try await client.execute(OutboundRequest(url: "\(deployment.gatewayURL)/healthz")).status == 200)
            let hidden = try await client.execute(OutboundRequest(url: "\(deployment.gatewayURL)/metrics"))
            try #expect(hidden.status == 404 && (try jsonObject(hidden)["code"] as? String) == "not-found")

            let detailed = try jsonObject(try await client.execute(OutboundRequest(url: "\(deployment.operationsURL)/readyz")))
            #expect((detailed["providers"] as? [String])?.contains("github.com") == true && detailed["storage"] as? String == "ok")
            let metrics = try await client.execute(OutboundRequest(url: "\(deployment.operationsURL)/metrics"))
            #expect(metrics.status == 200 && metrics.bodyText.contains("gatehouse_http_requests_total"))
            #expect(try await client.execute(OutboundRequest(url: "\(deployment.operationsURL)/v1/me")).status == 404)
        }
    }

    @Test(
        "a cold /readyz starts every provider's discovery, however long one is held: two held discovery calls are at the emulator together, and the probe answers ready (GitHub serves)"
    )
    func readinessReachesEveryProvider() async throws {
        // That the providers are asked at the same time, not one after the other within each
        // one's half second: ProviderReadinessTests.providersAreAskedAtOnce.
        try await withDeployment { deployment in
            let endpoints = ["GET /oidc/.well-known/openid-configuration", "GET /yahoo/.well-known/openid-configuration"]
            for endpoint in endpoints {
                _ = try await deployment.control("faults", #"{"endpoint": "\#(endpoint)", "holdMs": 60000, "times": 1}"#)
            }
            let ready = Task { try await deployment.client.execute(OutboundRequest(url: "\(deployment.operationsURL)/readyz")) }
            var together = false
            var stats: [String: Int] = [:]
            for _ in 0..<1_000 where !together {
                stats = try await deployment.emulatorStats()
                together = endpoints.allSatisfy { stats[$0] ?? 0 >= 1 }
                if !together { try await Task.sleep(for: .milliseconds(20)) }
            }
            _ = try await deployment.control("faults/release", "{}")
            #expect(together, "\(stats)")
            #expect(try await ready.value.status == 200)
        }
    }

    @Test(
        "request metrics are labelled with the template of the route the router took: parameters and rest-of-path routes by their template, an unknown path or method as unmatched, never a concrete path"
    )
    func requestMetricsByTemplate() async throws {
        try await withDeployment { deployment in
            let client = deployment.client
            let base = deployment.gatewayURL
            #expect(try await client.execute(OutboundRequest(url: "\(base)/v1/users/u-1")).status == 401)
            #expect(try await client.execute(OutboundRequest(url: "\(base)/v1/users/u-2/providers/github.com/api/user/repos")).status == 401)
            #expect(try await client.execute(OutboundRequest(url: "\(base)/v1/users/u-3/photo")).status == 401)
            #expect(try await client.execute(OutboundRequest(url: "\(base)/nowhere/u-4")).status == 404)
            #expect(try await client.execute(OutboundRequest(method: "DELETE", url: "\(base)/healthz")).status == 405)
            func count(_ method: String, _ route: String, _ status: String) async throws -> Double? {
                try await ResilienceTests.metric(
                    deployment, "gatehouse_http_requests_total", ["method": method, "route": route, "status": status])
            }
            #expect(try await count("GET", "/v1/users/{uid}", "401") == 1)
            #expect(try await count("GET", "/v1/users/{uid}/providers/{providerId}/api/{path}", "401") == 1)
            #expect(try await count("GET", "/v1/users/{uid}/photo", "401") == 1)
            #expect(try await count("GET", "unmatched", "404") == 1)
            #expect(try await count("DELETE", "unmatched", "405") == 1)
            let text = try await client.execute(OutboundRequest(url: "\(deployment.operationsURL)/metrics")).bodyText
            #expect(!text.contains("u-1") && !text.contains("u-2") && !text.contains("u-4") && !text.contains("user/repos"))
        }
    }

    @Test(
        "gatehouse check: exit 0 against a ready serve's operations listener, 1 with the reason when unreachable; --offline checks settings, store, key (1 naming the key when it does not open the data keys) and each OpenID provider's discovery (1 naming an undiscoverable one)"
    )
    func checkCommand() async throws {
        try await withEmulatorAndFolder("gatehouse-check") { emulatorURL, folder in
            let key = TokenVault.generateKey()
            let instance = try await ServeProcess.start(name: "a", database: nil, emulatorURL: emulatorURL, key: key, folder: folder)
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            // A sign-in stores sealed tokens, so there are data keys for the offline check to open.
            _ = try await DatabaseFailoverTests.signIn(client: client, gateway: instance.url)

            // A cold /readyz fetches each provider's discovery document: more than check's 3 s
            // default on a loaded run.
            let ready = try await KeysCommandTests.run(["check", "--url", instance.operationsURL, "--timeout", "60"])
            #expect(ready.status == 0, "\(ready.output)")
            #expect(ready.output.contains("ready: providers github.com"))
            let unreachable = try await KeysCommandTests.run(["check", "--url", "http://127.0.0.1:1", "--timeout", "1"])
            #expect(unreachable.status == 1 && unreachable.output.contains("not ready: cannot reach"), "\(unreachable.output)")
            instance.process.stop()

            let settings = [
                "GATEHOUSE_PUBLIC_URL": ServeProcess.publicURL, "GATEHOUSE_DATA_DIR": "\(folder)/a-data", "GATEHOUSE_DEVELOPMENT": "true",
                "GATEHOUSE_GITHUB_CLIENT_ID": TestDeployment.githubClient.id, "GATEHOUSE_GITHUB_CLIENT_SECRET": TestDeployment.githubClient.secret,
            ]
            let offline = try await KeysCommandTests.run(
                ["check", "--offline"], environment: settings.merging(["GATEHOUSE_ENCRYPTION_KEY": key.base64EncodedString()]) { $1 },
                removing: ["GATEHOUSE_DATABASE_URL"])
            #expect(offline.status == 0, "\(offline.output)")
            #expect(offline.output.contains("encryption key: opens the data keys"))
            #expect(offline.output.contains("provider github.com: configured"), "\(offline.output)")

            // An OpenID provider's discovery is fetched: the emulator's issuer passes, an unreachable one fails by name.
            let oidc = EmulatorConfiguration.demoOIDCClient
            let withIssuer = { (issuer: String) in
                settings.merging([
                    "GATEHOUSE_ENCRYPTION_KEY": key.base64EncodedString(), "GATEHOUSE_OIDC_EMU_ISSUER": issuer,
                    "GATEHOUSE_OIDC_EMU_CLIENT_ID": oidc.id,
                    "GATEHOUSE_OIDC_EMU_CLIENT_SECRET": oidc.secret,
                ]) { $1 }
            }
            let discovered = try await KeysCommandTests.run(
                ["check", "--offline"], environment: withIssuer("\(emulatorURL)/oidc"), removing: ["GATEHOUSE_DATABASE_URL"])
            #expect(discovered.status == 0 && discovered.output.contains("provider oidc.emu: discovery ok"), "\(discovered.output)")
            let undiscovered = try await KeysCommandTests.run(
                ["check", "--offline"], environment: withIssuer("http://127.0.0.1:1/oidc"), removing: ["GATEHOUSE_DATABASE_URL"])
            #expect(undiscovered.status == 1 && undiscovered.output.contains("not ready: provider oidc.emu:"), "\(undiscovered.output)")
            let wrongKey = try await KeysCommandTests.run(
                ["check", "--offline"],
                environment: settings.merging(["GATEHOUSE_ENCRYPTION_KEY": TokenVault.generateKey().base64EncodedString()]) { $1 },
                removing: ["GATEHOUSE_DATABASE_URL"])
            #expect(wrongKey.status == 1 && wrongKey.output.contains("not ready: encryption key"), "\(wrongKey.output)")
            #expect(!wrongKey.output.contains(key.base64EncodedString()))
        }
    }

    @Test(
        "serve refuses malformed settings, naming the setting, and exits without a crash: a port that is not a number, a development flag other than true/false, an unknown log level, an operations address that is not host:port, a webhook endpoint name outside A–Z, 0–9 and _",
        arguments: [
            ("GATEHOUSE_PORT", "80a"), ("GATEHOUSE_DEVELOPMENT", "yes"), ("GATEHOUSE_LOG_LEVEL", "loud"), ("GATEHOUSE_OPS_ADDRESS", "9090"),
            ("GATEHOUSE_WEBHOOK_X.Y_URL", "https://hooks.example/x"), ("GATEHOUSE_WEBHOOK_app_URL", "https://hooks.example/x"),
        ])
    func malformedSettingsStopTheStart(setting: String, value: String) async throws {
        try #require(FileManager.default.isExecutableFile(atPath: KeysCommandTests.executable.path), "build the gatehouse product first")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("gatehouse-bad-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var environment = [
            "GATEHOUSE_PUBLIC_URL": "http://127.0.0.1:9", "GATEHOUSE_DATA_DIR": folder, "GATEHOUSE_PORT": "0", "GATEHOUSE_OPS_ADDRESS": "127.0.0.1:0",
            "GATEHOUSE_ENCRYPTION_KEY": TokenVault.generateKey().base64EncodedString(), "GATEHOUSE_GITHUB_CLIENT_ID": "c",
            "GATEHOUSE_GITHUB_CLIENT_SECRET": "s",
        ]
        environment[setting] = value
        let answer = try await KeysCommandTests.run(["serve"], environment: environment, removing: ["GATEHOUSE_DATABASE_URL"])
        #expect(answer.status > 0 && answer.status < 128, "\(answer.status): \(answer.output)")
        #expect(answer.output.contains(setting) && !answer.output.contains("Fatal error"), "\(answer.output)")
    }
}
