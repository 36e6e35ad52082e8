import CurlClient
import Prometheus
import Synchronization

/// The libcurl client's load, read when `/metrics` is scraped: calls in flight and waiting, the
/// limit, and the calls refused for want of a slot.
final class OutboundMetrics: Sendable {
    private let inFlight: Gauge
    private let waiting: Gauge
    private let limit: Gauge
    private let refused: Counter
    /// Where the figures come from (the client's `load`), and the refusals already counted
    /// (the counter only goes up by the difference).
    private let source = Mutex<(read: (@Sendable () -> OutboundLoad)?, counted: Int)>((nil, 0))

    /// Registers the series in `registry`, at 0 until a client is observed.
    init(registry: PrometheusCollectorRegistry) {
        inFlight = registry.makeGauge(descriptor: .described("gatehouse_upstream_calls_in_flight"), labels: [])
        waiting = registry.makeGauge(descriptor: .described("gatehouse_upstream_calls_waiting"), labels: [])
        limit = registry.makeGauge(descriptor: .described("gatehouse_upstream_calls_limit"), labels: [])
        refused = registry.makeCounter(descriptor: .described("gatehouse_upstream_calls_refused_total"), labels: [])
    }

    /// Reads `load` at each scrape from now on; `calls` is the client's limit of calls in flight.
    func observe(calls: Int, load: @escaping @Sendable () -> OutboundLoad) {
        limit.set(to: Double(calls))
        source.withLock { $0.read = load }
    }

    /// Reads the figures now.
    func sample() {
        let (load, delta) = source.withLock { source -> (OutboundLoad?, Int) in
            guard let load = source.read?() else { return (nil, 0) }
            defer { source.counted = max(source.counted, load.refused) }
            return (load, max(0, load.refused - source.counted))
        }
        guard let load else { return }
        inFlight.set(to: Double(load.inFlight))
        waiting.set(to: Double(load.waiting))
        if delta > 0 { refused.increment(by: Double(delta)) }
    }
}
