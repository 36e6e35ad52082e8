import GatehouseCore
import Hummingbird
import Logging

/// `/healthz` (the process answers), `/readyz` (not shutting down, storage reachable, signing
/// keys loaded, providers configured; a store that refused writes lately is reported as degraded) and
/// `/metrics` (Prometheus text): the public port answers the first two in brief, the operations
/// listener all three in full.
struct OperationsRoutes {
    /// `/healthz`'s answer, encoded once: orchestrators and load balancers call it every few
    /// seconds per instance, and encoding the same member each time was about 7 of its 40 µs.
    static let alive = ByteBuffer(string: #"{"status":"ok"}"#)
    let gatehouse: Gatehouse
    let metrics: ServerMetrics
    /// Set once the instance is shutting down.
    let drain: DrainSignal

    /// The public port's: `/healthz`, and a `/readyz` that says ready or not ready and nothing
    /// more (the parts and their reasons are for operators, on the operations listener).
    func registerPublic(into table: inout RouteTable) {
        let readiness = self.readiness
        let drain = self.drain
        table.add(.get, "/healthz", head: true) { _, _ in
            Response.json(body: Self.alive)
        }
        // A verdict at most a second old (a draining instance says so at once): anyone may ask.
        let verdicts = SharedVerdict()
        table.add(.get, "/readyz", head: true) { _, context in
            let logger = context.logger
            guard !drain.isDraining, await verdicts.verdict({ if case .success = await readiness(logger) { true } else { false } }) else {
                throw GatehouseError(code: .notReady, detail: "The instance is not ready.")
            }
            return try Response.json(["status": "ready"])
        }
    }

    /// The operations listener's (`GATEHOUSE_OPS_ADDRESS`): `/healthz`, the detailed `/readyz`
    /// (storage, signing keys, each provider's state and reason) and `/metrics`.
    func registerOperations(into table: inout RouteTable) {
        let readiness = self.readiness
        table.add(.get, "/healthz", head: true) { _, _ in
            Response.json(body: Self.alive)
        }
        let metrics = self.metrics
        table.add(.get, "/metrics", head: true) { _, context in
            // Readiness is evaluated for each scrape, so its gauges are never older than the scrape.
            _ = await readiness(context.logger)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: metrics.exposition())))
        }
        table.add(.get, "/readyz", head: true) { _, context in
            try Response.json(try await readiness(context.logger).get())
        }
    }

    /// Whether the instance can serve: not shutting down, storage reachable, signing keys
    /// loaded, at least one provider able to sign anyone in; the parts' states, or why not.
    /// Sets the readiness gauges (`gatehouse_ready`, `gatehouse_storage_reachable`).
    @Sendable func readiness(_ logger: Logger) async -> Result<ReadyStatus, GatehouseError> {
        let result = await evaluate(logger)
        if case .success = result { metrics.ready(true) } else { metrics.ready(false) }
        return result
    }

    private func evaluate(_ logger: Logger) async -> Result<ReadyStatus, GatehouseError> {
        // First: a draining instance must leave the load balancer's rotation whatever else holds.
        guard !drain.isDraining else { return .failure(GatehouseError(code: .notReady, detail: "The instance is shutting down.")) }
        let storage = gatehouse.storage
        let providers = gatehouse.providers
        do {
            // Half a second: readiness follows the database within a second each way.
            try await storage.ping(within: .milliseconds(500))
            metrics.storageReachable(true)
        } catch {
            metrics.storageReachable(false)
            logger.warning("readiness: storage unreachable")
            return .failure(GatehouseError(code: .notReady, detail: "The storage is not reachable."))
        }
        guard await gatehouse.tokens.keys.isReady() else {
            return .failure(GatehouseError(code: .notReady, detail: "No signing key could be loaded."))
        }
        guard !providers.ids.isEmpty else {
            return .failure(GatehouseError(code: .notReady, detail: "No provider is configured."))
        }
        // A provider whose discovery is wrong is reported, by name and reason; the others still
        // serve. Each answers within half a second (all at once): a provider that is slow or
        // down cannot hold the probe for the upstream timeout.
        let problems = await providers.readinessProblems(within: .milliseconds(500))
        guard problems.count < providers.ids.count else {
            return .failure(
                GatehouseError(
                    code: .notReady,
                    detail: "No provider can sign anyone in: " + problems.sorted { $0.key < $1.key }.map(\.value).joined(separator: " ")))
        }
        // Reads work (the ping did) but writes were refused lately: still ready — sending
        // traffic elsewhere does not give the shared store its disk back — and said.
        let refusal = gatehouse.storageHealth.recentProblem.map { "writes refused \($0.secondsAgo) s ago: \($0.condition)" }
        return .success(
            ReadyStatus(
                status: "ready", storage: refusal == nil ? "ok" : "degraded", storageProblem: refusal,
                providers: providers.ids.filter { problems[$0] == nil }, disabledProviders: problems))
    }

    /// The detailed `/readyz` answer.
    struct ReadyStatus: Encodable, Sendable {
        let status: String
        /// `ok`, or `degraded` while `storageProblem` says what the store refused lately.
        let storage: String
        let storageProblem: String?
        let providers: [String]
        let disabledProviders: [String: String]
    }
}
