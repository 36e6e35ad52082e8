import CoreMetrics
import CurlClient
import GatehouseCore
import Prometheus

/// The gateway's metrics: one Prometheus registry per gateway, fed by the core (upstream
/// calls, caches, refreshes, circuit breakers) and by the HTTP layer (requests), and
/// rendered at `GET /metrics`.
///
/// Not the process-wide `MetricsSystem`: it can be bootstrapped only once per process, and
/// tests run several gateways side by side, each of which must count only its own traffic.
public final class ServerMetrics: Sendable {
    /// The registry `/metrics` renders.
    public let registry: PrometheusCollectorRegistry
    private let factory: DescribedMetricsFactory
    /// A request series: method, route template and status (bounded sets: never a raw path).
    private struct RequestSeries: Hashable, Sendable {
        let method: String
        let route: String
        let status: Int
    }

    /// A request series' counter and its route's timer.
    private struct RequestHandles: Sendable {
        let counter: CoreMetrics.Counter
        let timer: CoreMetrics.Timer
    }

    /// Each request series' handles, made once: a request looks up one small key instead of
    /// building two label lists.
    private let requestHandles = HandleTable<RequestSeries, RequestHandles>()

    /// `gatehouse_connections_open` of each listener, made once: set at every accept and close.
    private let openConnections: [String: CoreMetrics.Gauge]

    /// The process's resource figures, read from `/proc` on each scrape.
    private let process: ProcessMetrics

    /// The libcurl client's load, read on each scrape.
    private let outbound: OutboundMetrics

    /// `gatehouse_ready` and `gatehouse_storage_reachable`: 1 or 0 at the last readiness check.
    private let readyGauge: Prometheus.Gauge
    private let storageGauge: Prometheus.Gauge

    /// A fresh registry, with the build's `gatehouse_build_info` and the process metrics.
    public init() {
        registry = PrometheusCollectorRegistry()
        let factory = DescribedMetricsFactory(registry: registry)
        self.factory = factory
        registry.makeGauge(
            descriptor: .described("gatehouse_build_info"), labels: [("version", Gatehouse.version), ("commit", Gatehouse.commit)]
        ).set(to: 1)
        process = ProcessMetrics(registry: registry)
        outbound = OutboundMetrics(registry: registry)
        readyGauge = registry.makeGauge(descriptor: .described("gatehouse_ready"), labels: [])
        storageGauge = registry.makeGauge(descriptor: .described("gatehouse_storage_reachable"), labels: [])
        openConnections = Dictionary(
            uniqueKeysWithValues: ["public", "operations"].map { listener in
                (listener, CoreMetrics.Gauge(label: "gatehouse_connections_open", dimensions: [("listener", listener)], factory: factory))
            })
        // The listeners' counters exist from the start at 0, so that a rate over them sees
        // their first event.
        for listener in ["public", "operations"] {
            for reason in SlowClientDeadlines.Reason.allCases { connectionCut(listener: listener, reason: reason, by: 0) }
            malformedRequest(listener: listener, by: 0)
            largeRequestHead(listener: listener, by: 0)
            acceptFailed(listener: listener, by: 0)
            connectionLimitReached(listener: listener, by: 0)
            connectionsOpen(listener: listener, 0)
        }
    }

    /// Records the outcome of a readiness check (`/readyz` or a scrape).
    func ready(_ ready: Bool) { readyGauge.set(to: ready ? 1 : 0) }

    /// Records whether the store answered the readiness check's ping.
    func storageReachable(_ reachable: Bool) { storageGauge.set(to: reachable ? 1 : 0) }

    /// The factory of this registry's metrics, for parts outside the core (the store's pool gauges).
    public var metricsFactory: any MetricsFactory { factory }

    /// The handle the core records into (pass it to `Gatehouse`).
    public var core: GatehouseMetrics { GatehouseMetrics(factory: factory) }

    /// Counts one answered request and its duration, by method, route template and status.
    /// The route is the OpenAPI template (`/v1/users/{uid}`), never the concrete path, so a
    /// user id never becomes a label.
    func request(method: String, route: String, status: Int, duration: Duration) {
        let handles = requestHandles.handle(RequestSeries(method: method, route: route, status: status)) {
            RequestHandles(
                counter: CoreMetrics.Counter(
                    label: "gatehouse_http_requests_total", dimensions: [("method", method), ("route", route), ("status", String(status))],
                    factory: factory),
                timer: CoreMetrics.Timer(label: "gatehouse_http_request_duration_seconds", dimensions: [("route", route)], factory: factory))
        }
        handles.counter.increment()
        handles.timer.recordNanoseconds(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }

    /// Counts a connection a listener (`public` or `operations`) cut because its client was
    /// too slow or asked for an upgrade. Rare by nature, so the handle is looked up each time
    /// (the registry returns the one it made first).
    func connectionCut(listener: String, reason: SlowClientDeadlines.Reason, by count: Int = 1) {
        CoreMetrics.Counter(
            label: "gatehouse_connections_cut_total", dimensions: [("listener", listener), ("reason", reason.rawValue)], factory: factory
        ).increment(by: count)
    }

    /// Counts one request head a listener (`public` or `operations`) refused as not HTTP.
    func malformedRequest(listener: String, by count: Int = 1) {
        CoreMetrics.Counter(label: "gatehouse_malformed_requests_total", dimensions: [("listener", listener)], factory: factory)
            .increment(by: count)
    }

    /// Counts one request head over 8 KB (`HTTP1Semantics.keptHeadLimit`) whose client would
    /// keep the connection open, which a listener (`public` or `operations`) made its
    /// connection's last.
    func largeRequestHead(listener: String, by count: Int = 1) {
        CoreMetrics.Counter(label: "gatehouse_large_request_heads_total", dimensions: [("listener", listener)], factory: factory)
            .increment(by: count)
    }

    /// Counts one accept of a listener (`public` or `operations`) that failed for want of
    /// descriptors or memory.
    func acceptFailed(listener: String, by count: Int = 1) {
        CoreMetrics.Counter(label: "gatehouse_accept_failures_total", dimensions: [("listener", listener)], factory: factory)
            .increment(by: count)
    }

    /// Records how many connections a listener (`public` or `operations`) holds open now.
    func connectionsOpen(listener: String, _ count: Int) {
        (openConnections[listener] ?? CoreMetrics.Gauge(label: "gatehouse_connections_open", dimensions: [("listener", listener)], factory: factory))
            .record(count)
    }

    /// Reads the libcurl client's `load` at each scrape from now on; `calls` is its limit of
    /// calls in flight (`GATEHOUSE_UPSTREAM_CALLS`).
    public func observeOutbound(calls: Int, load: @escaping @Sendable () -> OutboundLoad) {
        outbound.observe(calls: calls, load: load)
    }

    /// Records a listener's limit of open connections.
    func connectionLimit(listener: String, _ count: Int) {
        CoreMetrics.Gauge(label: "gatehouse_connections_limit", dimensions: [("listener", listener)], factory: factory).record(count)
    }

    /// Counts one time a listener (`public` or `operations`) stopped accepting at its limit.
    func connectionLimitReached(listener: String, by count: Int = 1) {
        CoreMetrics.Counter(label: "gatehouse_connection_limit_reached_total", dimensions: [("listener", listener)], factory: factory)
            .increment(by: count)
    }

    /// The Prometheus text exposition, with the process's figures read at this moment.
    func exposition() -> String {
        process.sample()
        outbound.sample()
        return registry.emitToString()
    }
}
