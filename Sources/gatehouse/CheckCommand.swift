import ArgumentParser
import CoreMetrics
import CurlClient
import Foundation
import GatehouseCore
import GatehousePostgres
import Logging

/// `gatehouse check`: a curl-free health check for operators, Docker's `HEALTHCHECK` and CI.
/// Online (default) it asks a running gateway's operations listener for its detailed `/readyz`;
/// with `--offline` it checks the configuration itself without serving.
struct CheckCommand: AsyncParsableCommand {
    /// The command's name and help.
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Exit 0 only when the gateway is ready; print each failing part.",
        discussion: """
            Online: GET <url>/readyz on the operations listener (default: GATEHOUSE_OPS_ADDRESS, \
            else http://127.0.0.1:9090). Offline (--offline): the GATEHOUSE_* settings parse and \
            validate, the store is reachable (pending migrations are applied, as serve would at \
            start), the encryption key opens the stored data keys, and each OpenID provider's \
            discovery document (Microsoft, Yahoo, oidc.*) is fetched and usable.
            """)

    /// `--url`: the operations listener to ask.
    @Option(help: "The operations listener's base URL (default: from GATEHOUSE_OPS_ADDRESS).")
    var url: String?

    /// `--offline`: check the configuration instead of a running gateway.
    @Flag(help: "Check the configuration, the store and the keys instead of a running gateway.")
    var offline = false

    /// `--timeout`: seconds to wait for `/readyz`.
    @Option(help: "Seconds to wait for the answer.")
    var timeout: Double = 3

    /// Which store `--offline` opens.
    @OptionGroup var store: StoreOptions

    /// Refuses a timeout that is no number of seconds up to an hour (it becomes milliseconds).
    func validate() throws {
        guard timeout.isFinite, (0...3600).contains(timeout) else {
            throw ValidationError("--timeout must be a number of seconds from 0 to 3600, not \(timeout)")
        }
    }

    /// Runs the checks; exit status 1 when any fails.
    func run() async throws {
        let environment = try await store.settings()
        let failures = offline ? try await offlineFailures(environment) : try await onlineFailures(environment)
        if failures.isEmpty { return }
        for failure in failures { print("not ready: \(failure)") }
        throw ExitCode(1)
    }

    /// What the running gateway's detailed `/readyz` reports as failing (nothing when ready
    /// with every provider able to sign in).
    private func onlineFailures(_ environment: [String: String]) async throws -> [String] {
        let base: String
        if let url {
            base = url.hasSuffix("/") ? String(url.dropLast()) : url
        } else {
            let address = try ServeSettings.operationsAddress(environment, default: "127.0.0.1:9090")
            guard let address else { return ["GATEHOUSE_OPS_ADDRESS is off: give --url"] }
            let host = address.host == "0.0.0.0" || address.host == "::" ? "127.0.0.1" : address.host
            base = "http://\(host.contains(":") ? "[\(host)]" : host):\(address.port)"
        }
        let client = CurlHTTPClient()
        defer { client.shutdown() }
        let answer: OutboundResponse
        do {
            answer = try await client.execute(
                OutboundRequest(url: base + "/readyz", headers: ["Accept": "application/json"], timeout: .milliseconds(Int(timeout * 1000))))
        } catch {
            return ["cannot reach \(base)/readyz (\((error as? OutboundError)?.kind.rawValue ?? "error"))"]
        }
        let object = (try? JSONSerialization.jsonObject(with: Data(answer.body)) as? [String: Any]) ?? [:]
        guard answer.status == 200 else {
            return [object["detail"] as? String ?? "\(base)/readyz answered HTTP \(answer.status)"]
        }
        var failures: [String] = []
        if let problem = object["storageProblem"] as? String { failures.append("storage degraded: \(problem)") }
        for (provider, reason) in ((object["disabledProviders"] as? [String: String]) ?? [:]).sorted(by: { $0.key < $1.key }) {
            failures.append("provider \(provider): \(reason)")
        }
        // Ready, with parts failing: printed, but ready is ready.
        for failure in failures { print("warning: \(failure)") }
        print("ready: providers \(((object["providers"] as? [String]) ?? []).joined(separator: ", "))")
        return []
    }

    /// The offline checks, each failure named. A configuration error is thrown, as every
    /// command reports one (`GatehouseCommand.main`).
    private func offlineFailures(_ environment: [String: String]) async throws -> [String] {
        let settings = try ServeSettings(environment: environment, host: nil, port: nil)
        try settings.gateway.validate()
        let gateway = settings.gateway
        let providers =
            (gateway.github == nil ? [] : ["github.com"]) + (gateway.microsoft == nil ? [] : ["microsoft.com"])
            + gateway.oidcProviders.map(\.providerId)
        guard !providers.isEmpty else { return ["configuration: no provider is configured"] }
        print("configuration: ok (providers \(providers.joined(separator: ", ")))")
        do {
            return try await store.withStore(environment: environment, logger: Logger(label: "gatehouse") { _ in SwiftLogNoOpLogHandler() }) {
                storage in
                try await storage.ping(within: .seconds(3))
                print("store: reachable, migrated")
                return await keyAndProviderFailures(settings, storage: storage)
            }
        } catch {
            return ["store: \(Self.describe(error))"]
        }
    }

    /// The encryption key against the stored data keys, then the providers.
    private func keyAndProviderFailures(_ settings: ServeSettings, storage: any GatehouseStorage) async -> [String] {
        let vault: TokenVault
        do {
            vault = try TokenVault(keys: settings.vaultKeys, store: storage)
            try await vault.reload()
        } catch {
            return ["encryption key: the configured keys do not open the stored data keys (\(Self.describe(error)))"]
        }
        print("encryption key: opens the data keys")
        await reportWebhooks(settings, storage: storage)
        return await providerFailures(settings, storage: storage, vault: vault)
    }

    /// Each webhook endpoint's undelivered events and the last failure the outbox records (a
    /// receiver that is down is reported, never a reason not to be ready).
    private func reportWebhooks(_ settings: ServeSettings, storage: any GatehouseStorage) async {
        guard let endpoints = settings.gateway.webhooks?.endpoints, !endpoints.isEmpty else { return }
        let pending = (try? await storage.outboxEntries(status: .pending, after: nil, limit: 1000)) ?? []
        let failed = (try? await storage.outboxEntries(status: .failed, after: nil, limit: 1000)) ?? []
        for endpoint in endpoints {
            let waiting = pending.filter { $0.endpoint == endpoint.name }
            let gaveUp = failed.filter { $0.endpoint == endpoint.name }
            let last = (waiting + gaveUp).filter { $0.lastError != nil }.max { $0.nextAttemptAt < $1.nextAttemptAt }
            let state =
                waiting.isEmpty && gaveUp.isEmpty
                ? "nothing undelivered" : "\(waiting.count) pending, \(gaveUp.count) failed\(last?.lastError.map { "; last attempt: \($0)" } ?? "")"
            print("webhook \(endpoint.name): \(state)")
        }
    }

    /// Each OpenID provider's discovery document and keys fetched as `serve` would (GitHub has
    /// none: nothing to fetch before a sign-in); a provider that cannot be discovered fails.
    private func providerFailures(_ settings: ServeSettings, storage: any GatehouseStorage, vault: TokenVault) async -> [String] {
        let http = CurlHTTPClient(configuration: .init(caBundlePath: settings.caBundlePath))
        defer { http.shutdown() }
        let gatehouse: Gatehouse
        do {
            gatehouse = try Gatehouse(
                configuration: settings.gateway, storage: storage, vault: vault, http: http,
                metrics: GatehouseMetrics(factory: NOOPMetricsHandler.instance),
                logger: Logger(label: "gatehouse") { _ in SwiftLogNoOpLogHandler() })
        } catch {
            return ["configuration: \(Self.describe(error))"]
        }
        var failures: [String] = []
        for id in gatehouse.providers.ids {
            let problem: String?
            do {
                problem = try await gatehouse.providers.provider(id).readinessProblem()
            } catch {
                problem = Self.describe(error)
            }
            if let problem {
                failures.append("provider \(id): \(problem)")
            } else {
                let idTokenOnly = settings.gateway.oidcProviders.contains { $0.providerId == id && !$0.codeFlowEnabled }
                let state = id == "github.com" ? "configured (no discovery document)" : "discovery ok"
                print("provider \(id): \(state)\(idTokenOnly ? " (ID-token sign-in only: no client secret)" : "")")
            }
        }
        return failures
    }

    /// An error as one line, without secrets (validation messages name settings, not values).
    static func describe(_ error: any Error) -> String {
        if let error = error as? ValidationError { return error.message }
        if let error = error as? GatehouseError { return error.detail }
        if let error = error as? PostgresStorageError { return error.description }
        return String(describing: type(of: error))
    }
}
