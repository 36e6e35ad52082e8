import CoreMetrics

/// The gateway's own metrics, written to an injected swift-metrics factory (Prometheus in
/// the server), so that every gateway in a process — one per test — keeps its own numbers.
///
/// Label values are bounded sets (provider ids, fixed outcome words): nothing user-supplied
/// ever becomes a label, so the number of series cannot grow with traffic.
public struct GatehouseMetrics: Sendable {
    private let factory: any MetricsFactory

    /// Records into `factory`.
    public init(factory: any MetricsFactory) {
        self.factory = factory
    }

    /// Records nothing (unit tests, tools).
    public static let disabled = GatehouseMetrics(factory: NOOPMetricsHandler.instance)

    /// One call to a provider's API, by outcome: `ok` (2xx), `client-error` (4xx other than
    /// 429), `rate-limited`, `server-error` (5xx), `timeout`, `transport-error`.
    func upstreamCall(providerId: String, outcome: String) {
        Counter(label: "gatehouse_upstream_calls_total", dimensions: [("provider", providerId), ("outcome", outcome)], factory: factory)
            .increment()
    }

    /// A lookup in the profile or photo cache: `hit`, `miss` or `stale` (served after an upstream failure).
    func cacheLookup(cache: String, result: String) {
        Counter(label: "gatehouse_cache_lookups_total", dimensions: [("cache", cache), ("result", result)], factory: factory).increment()
    }

    /// A provider-token refresh, by outcome: `ok`, `reused` (another request had refreshed),
    /// `dead-grant`, `failed`.
    func tokenRefresh(providerId: String, outcome: String) {
        Counter(label: "gatehouse_token_refreshes_total", dimensions: [("provider", providerId), ("outcome", outcome)], factory: factory)
            .increment()
    }

    /// The state of a provider's circuit breaker: 0 closed, 1 half-open, 2 open.
    func circuitState(providerId: String, state: CircuitBreaker.State) {
        let value: Int
        switch state {
        case .closed: value = 0
        case .halfOpen: value = 1
        case .open: value = 2
        }
        Gauge(label: "gatehouse_circuit_state", dimensions: [("provider", providerId)], factory: factory).record(value)
    }

    /// A circuit breaker changing state (counted, so that short openings still show).
    func circuitTransition(providerId: String, to state: CircuitBreaker.State) {
        circuitState(providerId: providerId, state: state)
        Counter(
            label: "gatehouse_circuit_transitions_total", dimensions: [("provider", providerId), ("state", state.rawValue)], factory: factory
        ).increment()
    }

    /// One passthrough call, by provider, allowed template (never the raw path) and outcome
    /// (the `upstreamCall` words, plus `refused` for a call the policy or a check stopped and
    /// `insufficient-scope`).
    func providerAPICall(providerId: String, template: String, outcome: String) {
        Counter(
            label: "gatehouse_provider_api_calls_total", dimensions: [("provider", providerId), ("template", template), ("outcome", outcome)],
            factory: factory
        ).increment()
    }

    /// A provider access token handed to a service (`/token`), by provider.
    func providerTokenIssued(providerId: String) {
        Counter(label: "gatehouse_provider_tokens_issued_total", dimensions: [("provider", providerId)], factory: factory).increment()
    }
}
