import CoreMetrics
import Prometheus

/// A swift-metrics factory over one Prometheus registry that gives every metric its `# HELP`
/// text from `MetricsCatalog` (swift-prometheus's own factory leaves help empty). Timers are
/// duration histograms with the factory's default buckets, non-aggregating recorders gauges,
/// as in swift-prometheus's factory.
struct DescribedMetricsFactory: MetricsFactory {
    let registry: PrometheusCollectorRegistry
    /// The buckets of every duration histogram.
    let buckets = PrometheusMetricsFactory(registry: PrometheusCollectorRegistry()).defaultDurationHistogramBuckets

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        registry.makeCounter(descriptor: .described(label), labels: dimensions)
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        registry.makeCounter(descriptor: .described(label), labels: dimensions)
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        if aggregate {
            return registry.makeValueHistogram(descriptor: .described(label), labels: dimensions, buckets: [0.01, 0.1, 1, 10, 100, 1000])
        }
        return registry.makeGauge(descriptor: .described(label), labels: dimensions)
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        registry.makeGauge(descriptor: .described(label), labels: dimensions)
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        registry.makeDurationHistogram(descriptor: .described(label), labels: dimensions, buckets: buckets)
    }

    func destroyCounter(_ handler: any CounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    func destroyRecorder(_ handler: any RecorderHandler) {
        switch handler {
        case let gauge as Prometheus.Gauge: registry.unregisterGauge(gauge)
        case let histogram as Histogram<Double>: registry.unregisterValueHistogram(histogram)
        default: break
        }
    }

    func destroyMeter(_ handler: any MeterHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
    }

    func destroyTimer(_ handler: any TimerHandler) {
        if let histogram = handler as? Histogram<Duration> { registry.unregisterDurationHistogram(histogram) }
    }
}

extension MetricNameDescriptor {
    /// The series `name` as it is, with its `# HELP` text from `MetricsCatalog`: the gateway's
    /// names carry their unit already (`…_seconds`, `…_total`), so no part is added. The
    /// descriptor stops the process on an empty name; a library's metric without a label is
    /// named `unnamed` instead.
    static func described(_ name: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: name.isEmpty ? "unnamed" : name, unitName: "", helpText: MetricsCatalog.help(name))
    }
}
