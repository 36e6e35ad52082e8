import CoreMetrics
import Synchronization

/// The gateway's own metrics, written to an injected swift-metrics factory (Prometheus in
/// the server), so that every gateway in a process — one per test — keeps its own numbers.
///
/// Label values are bounded sets (provider ids, fixed outcome words): nothing user-supplied
/// ever becomes a label, so the number of series cannot grow with traffic.
///
/// A class: every service, cache and circuit breaker holds it, by one reference rather than
/// a copy of its handle tables.
public final class GatehouseMetrics: Sendable {
    private let factory: any MetricsFactory
    /// The counters made so far, by label and dimensions: a counter is made once, not on
    /// every call (the label sets are bounded, so this stays small).
    private let counters = Handles<Counter>()
    private let timers = Handles<Timer>()
    private let gauges = Handles<Gauge>()
    /// The cache-lookup counters by cache and result: looked up on most requests (the account
    /// read, the profile or photo cache), by a key of two short words.
    private let cacheLookups = HandleTable<CacheLookup, Counter>()

    private struct CacheLookup: Hashable, Sendable {
        let cache: String
        let result: String
    }

    /// The upstream-call counter and timer by provider, endpoint and outcome: looked up on
    /// every call to a provider by a small key, not by a label list built for each call.
    private let upstreamCalls = HandleTable<UpstreamSeries, UpstreamHandles>()

    private struct UpstreamSeries: Hashable, Sendable {
        let providerId: String
        let endpoint: UpstreamEndpoint
        let outcome: String
    }

    private struct UpstreamHandles: Sendable {
        let calls: Counter
        let duration: Timer
    }

    /// The passthrough counter by provider, template and outcome, for the reason of `upstreamCalls`.
    private let providerAPICalls = HandleTable<ProviderAPISeries, Counter>()

    private struct ProviderAPISeries: Hashable, Sendable {
        let providerId: String
        let template: String
        let outcome: String
    }

    /// `gatehouse_photo_bytes_total`, counted on every photo answer: one series, under a key
    /// with nothing to hash.
    private let photoByteCounter = HandleTable<PhotoBytesSeries, Counter>()

    private struct PhotoBytesSeries: Hashable, Sendable {}

    /// Records into `factory`.
    public init(factory: any MetricsFactory) {
        self.factory = factory
    }

    /// The counter of `label` with `dimensions`, made on first use.
    private func counter(_ label: String, _ dimensions: [(String, String)]) -> Counter {
        counters.handle(label, dimensions) { Counter(label: label, dimensions: dimensions, factory: factory) }
    }

    /// Records nothing (unit tests, tools).
    public static let disabled = GatehouseMetrics(factory: NOOPMetricsHandler.instance)

    /// One call to a provider, by endpoint kind and outcome: `ok` (2xx/3xx), `not-modified`
    /// (a 304 to a conditional read), `client-error` (4xx other than 429), `rate-limited`,
    /// `server-error` (5xx), `timeout`, `transport-error`; with its time to the response head
    /// as a histogram.
    func upstreamCall(providerId: String, endpoint: UpstreamEndpoint, outcome: String, duration: Duration) {
        let handles = upstreamCalls.handle(UpstreamSeries(providerId: providerId, endpoint: endpoint, outcome: outcome)) {
            let dimensions = [("provider", providerId), ("endpoint", endpoint.rawValue), ("outcome", outcome)]
            return UpstreamHandles(
                calls: Counter(label: "gatehouse_upstream_calls_total", dimensions: dimensions, factory: factory),
                duration: Timer(label: "gatehouse_upstream_call_duration_seconds", dimensions: dimensions, factory: factory))
        }
        handles.calls.increment()
        handles.duration.recordNanoseconds(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }

    /// One completed sign-in flow, by provider, mode and outcome (`ok`, or the error code:
    /// a fixed vocabulary).
    func signIn(providerId: String, mode: SignInMode, outcome: String) {
        counter("gatehouse_sign_ins_total", [("provider", providerId), ("mode", mode.rawValue), ("outcome", outcome)]).increment()
    }

    /// One call of a blocking hook, by event and outcome: `allow`, `deny`, or why it could
    /// not be asked (`timeout`, `unreachable`, `bad-status`, `too-large`, `invalid-answer`);
    /// with its time as a histogram.
    func hookCall(event: String, outcome: String, duration: Duration?) {
        let dimensions = [("hook", event), ("outcome", outcome)]
        counter("gatehouse_hook_calls_total", dimensions).increment()
        // A call refused by the open breaker was not made: it has no duration.
        guard let duration else { return }
        timers.handle("gatehouse_hook_call_duration_seconds", dimensions) {
            Timer(label: "gatehouse_hook_call_duration_seconds", dimensions: dimensions, factory: factory)
        }.recordNanoseconds(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }

    /// A webhook event written (with the change it reports), by type.
    func webhookEvent(type: String) {
        counter("gatehouse_webhook_events_total", [("type", type)]).increment()
    }

    /// A webhook delivery attempt, by endpoint and outcome (`delivered`, `retry`, `failed`,
    /// `gone`), with its time as a histogram.
    func webhookDelivery(endpoint: String, outcome: String, duration: Duration) {
        let dimensions = [("endpoint", endpoint), ("outcome", outcome)]
        counter("gatehouse_webhook_deliveries_total", dimensions).increment()
        timers.handle("gatehouse_webhook_delivery_duration_seconds", dimensions) {
            Timer(label: "gatehouse_webhook_delivery_duration_seconds", dimensions: dimensions, factory: factory)
        }.recordNanoseconds(duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000)
    }

    /// The time from an event's commit to its delivery, by endpoint.
    func webhookDelay(endpoint: String, seconds: Double) {
        let dimensions = [("endpoint", endpoint)]
        timers.handle("gatehouse_webhook_delivery_delay_seconds", dimensions) {
            Timer(label: "gatehouse_webhook_delivery_delay_seconds", dimensions: dimensions, factory: factory)
        }.recordNanoseconds(Int64(max(0, seconds) * 1_000_000_000))
    }

    /// Undelivered events dropped after the retention, by endpoint.
    func webhookDropped(endpoint: String, count: Int) {
        counter("gatehouse_webhook_events_dropped_total", [("endpoint", endpoint)]).increment(by: Int64(count))
    }

    /// Audit events dropped before they were stored (the buffer was full; the log has them).
    func auditDropped(count: Int = 1) {
        counter("gatehouse_audit_events_dropped_total", []).increment(by: Int64(count))
    }

    /// The outbox's pending entries and the age of the oldest, in seconds.
    func webhookBacklog(count: Int, oldestAge: Double) {
        Gauge(label: "gatehouse_webhook_queue_depth", dimensions: [], factory: factory).record(count)
        Gauge(label: "gatehouse_webhook_oldest_age_seconds", dimensions: [], factory: factory).record(oldestAge)
    }

    /// Photo bytes sent to callers, streamed or from the cache.
    func photoBytes(_ count: Int) {
        photoByteCounter.handle(PhotoBytesSeries()) { Counter(label: "gatehouse_photo_bytes_total", dimensions: [], factory: factory) }
            .increment(by: Int64(count))
    }

    /// A lookup in the profile or photo cache: `hit`, `miss` or `stale` (served after an upstream failure).
    func cacheLookup(cache: String, result: String) {
        cacheLookups.handle(CacheLookup(cache: cache, result: result)) {
            Counter(label: "gatehouse_cache_lookups_total", dimensions: [("cache", cache), ("result", result)], factory: factory)
        }.increment()
    }

    /// What a cache holds against its budget after a change: bytes for `photo` (the memory its
    /// photos take), `profile` and `account` (about the memory their records take), entries
    /// for `photo-failure`.
    func cacheUsed(cache: String, cost: Int) {
        gauges.handle("gatehouse_cache_used", [("cache", cache)]) {
            Gauge(label: "gatehouse_cache_used", dimensions: [("cache", cache)], factory: factory)
        }.record(cost)
    }

    /// The bytes of provider API answers held whole in memory (`GATEHOUSE_API_BUFFER_BYTES`).
    func apiBufferedBytes(_ bytes: Int) {
        gauges.handle("gatehouse_provider_api_buffered_bytes", []) {
            Gauge(label: "gatehouse_provider_api_buffered_bytes", dimensions: [], factory: factory)
        }.record(bytes)
    }

    /// A provider-token refresh, by outcome: `ok`, `reused` (another request had refreshed),
    /// `dead-grant`, `failed`.
    func tokenRefresh(providerId: String, outcome: String) {
        counter("gatehouse_token_refreshes_total", [("provider", providerId), ("outcome", outcome)])
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
        counter("gatehouse_circuit_transitions_total", [("provider", providerId), ("state", state.rawValue)]).increment()
    }

    /// One passthrough call, by provider, allowed template (never the raw path) and outcome
    /// (the `upstreamCall` words for the status answered, or `insufficient-scope`).
    func providerAPICall(providerId: String, template: String, outcome: String) {
        providerAPICalls.handle(ProviderAPISeries(providerId: providerId, template: template, outcome: outcome)) {
            Counter(
                label: "gatehouse_provider_api_calls_total", dimensions: [("provider", providerId), ("template", template), ("outcome", outcome)],
                factory: factory)
        }.increment()
    }

    /// A provider access token handed to a service (`/token`), by provider.
    func providerTokenIssued(providerId: String) {
        counter("gatehouse_provider_tokens_issued_total", [("provider", providerId)]).increment()
    }
}

/// Metric handles made once per label and dimensions (swift-metrics' factories look the series
/// up again, under a lock, for every handle made).
public final class Handles<Handle: Sendable>: Sendable {
    /// A series: its label and dimensions, compared and hashed as they are (no key string is
    /// built per lookup).
    private struct Series: Hashable, Sendable {
        let label: String
        let dimensions: [(String, String)]

        static func == (left: Series, right: Series) -> Bool {
            left.label == right.label && left.dimensions.count == right.dimensions.count
                && zip(left.dimensions, right.dimensions).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
        }

        func hash(into hasher: inout Hasher) {
            hasher.combine(label)
            hasher.combine(dimensions.count)
            for (name, value) in dimensions {
                hasher.combine(name)
                hasher.combine(value)
            }
        }
    }

    private let table = HandleTable<Series, Handle>()

    /// An empty table.
    public init() {}

    /// The handle of `label` with `dimensions`, made by `make` the first time.
    public func handle(_ label: String, _ dimensions: [(String, String)], make: () -> Handle) -> Handle {
        table.handle(Series(label: label, dimensions: dimensions), make: make)
    }
}

/// Metric handles by a key of the caller's choosing, made once each: the metrics recorded on
/// every request use small keys of their own (a route and a status, a cache and a result)
/// rather than label lists.
///
/// Inlinable, so that a module using it specializes the lookup for its key: unspecialized,
/// each lookup goes through the key's witness tables and looks up the dictionary's generic
/// metadata at run time.
public final class HandleTable<Key: Hashable & Sendable, Handle: Sendable>: Sendable {
    /// The handles made so far (visible to inlined callers only).
    @usableFromInline let made = Mutex<[Key: Handle]>([:])

    /// An empty table.
    public init() {}

    /// The handle of `key`, made by `make` the first time (outside the lock: a factory takes
    /// its own, and answers racing callers the same series, so either handle counts into it).
    @inlinable
    public func handle(_ key: Key, make: () -> Handle) -> Handle {
        if let known = made.withLock({ $0[key] }) { return known }
        let created = make()
        return made.withLock { table in
            if let raced = table[key] { return raced }
            table[key] = created
            return created
        }
    }
}
