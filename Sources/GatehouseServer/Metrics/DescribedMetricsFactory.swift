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
        registry.makeCounter(name: label, labels: dimensions, help: MetricsCatalog.help(label))
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        registry.makeCounter(name: label, labels: dimensions, help: MetricsCatalog.help(label))
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        if aggregate {
            return registry.makeValueHistogram(
                name: label, labels: dimensions, buckets: [0.01, 0.1, 1, 10, 100, 1000], help: MetricsCatalog.help(label))
        }
        return registry.makeGauge(name: label, labels: dimensions, help: MetricsCatalog.help(label))
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        registry.makeGauge(name: label, labels: dimensions, help: MetricsCatalog.help(label))
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        registry.makeDurationHistogram(name: label, labels: dimensions, buckets: buckets, help: MetricsCatalog.help(label))
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
