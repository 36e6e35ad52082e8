import GatehouseCore
import Hummingbird

/// `/healthz` (the process answers), `/readyz` (not shutting down, storage reachable, signing
/// keys loaded, providers configured; a store that refused writes lately is reported as degraded) and
/// `/metrics` (Prometheus text).
struct OperationsRoutes {
    let gatehouse: Gatehouse
    let metrics: ServerMetrics
    /// Set once the instance is shutting down.
    let drain: DrainSignal

    func register(into table: inout RouteTable) {
        let storage = gatehouse.storage
        let providers = gatehouse.providers
        let keys = gatehouse.tokens.keys
        let health = gatehouse.storageHealth
        let drain = self.drain
        table.add(.get, "/healthz") { _, _ in
            try Response.json(["status": "ok"])
        }
        let metrics = self.metrics
        table.add(.get, "/metrics") { _, _ in
            Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: metrics.exposition())))
        }
        table.add(.get, "/readyz") { _, context in
            // First: a draining instance must leave the load balancer's rotation whatever else holds.
            guard !drain.isDraining else { throw GatehouseError(code: .notReady, detail: "The instance is shutting down.") }
            do {
                // Half a second: readiness follows the database within a second each way.
                try await storage.ping(within: .milliseconds(500))
            } catch {
                context.logger.warning("readiness: storage unreachable")
                throw GatehouseError(code: .notReady, detail: "The storage is not reachable.")
            }
            guard await keys.isReady() else {
                throw GatehouseError(code: .notReady, detail: "No signing key could be loaded.")
            }
            guard !providers.ids.isEmpty else {
                throw GatehouseError(code: .notReady, detail: "No provider is configured.")
            }
            // A provider whose discovery is wrong is reported, by name and reason; the others still serve.
            var problems: [String: String] = [:]
            for id in providers.ids {
                if let problem = await (try? providers.provider(id))?.readinessProblem() { problems[id] = problem }
            }
            guard problems.count < providers.ids.count else {
                throw GatehouseError(
                    code: .notReady,
                    detail: "No provider can sign anyone in: " + problems.sorted { $0.key < $1.key }.map(\.value).joined(separator: " "))
            }
            // Reads work (the ping did) but writes were refused lately: still ready — sending
            // traffic elsewhere does not give the shared store its disk back — and said.
            let refusal = health.recentProblem.map { "writes refused \($0.secondsAgo) s ago: \($0.condition)" }
            return try Response.json(
                ReadyStatus(
                    status: "ready", storage: refusal == nil ? "ok" : "degraded", storageProblem: refusal,
                    providers: providers.ids.filter { problems[$0] == nil }, disabledProviders: problems))
        }
    }

    struct ReadyStatus: Encodable {
        let status: String
        /// `ok`, or `degraded` while `storageProblem` says what the store refused lately.
        let storage: String
        let storageProblem: String?
        let providers: [String]
        let disabledProviders: [String: String]
    }
}
