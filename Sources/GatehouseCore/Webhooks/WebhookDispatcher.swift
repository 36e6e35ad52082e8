import CurlClient
import Foundation
import Logging
import StandardWebhooks
import Synchronization

/// Delivers the outbox: claims due entries under a lease (one instance gets each), posts each
/// signed body through the libcurl client — a few at a time per endpoint, holding no store
/// connection while it waits — and records the outcome: a 2xx removes the entry, `410 Gone`
/// fails it and stops that endpoint on this instance until a restart with its configuration,
/// anything else is retried after the backoff (± 20 %), then failed. Undelivered entries older
/// than the retention are dropped, counted and logged.
public final class WebhookDispatcher: Sendable {
    let configuration: WebhookConfiguration
    let storage: any GatehouseStorage
    let http: CurlHTTPClient
    let clock: any GatehouseClock
    let metrics: GatehouseMetrics
    let logger: Logger
    private let signers: [String: WebhookSigner]
    private let urls: [String: String]
    /// Endpoints that answered `410 Gone`.
    private let gone = Mutex<Set<String>>([])
    /// Each endpoint's last outcome, for `gatehouse check` and the logs.
    private let lastOutcomes = Mutex<[String: String]>([:])
    private let wakeUps: AsyncStream<Void>
    private let wakeUp: AsyncStream<Void>.Continuation

    /// Entries claimed at a time.
    static let batch = 64

    /// A dispatcher for `configuration`'s endpoints.
    public init(
        configuration: WebhookConfiguration, storage: any GatehouseStorage, http: CurlHTTPClient, clock: any GatehouseClock,
        metrics: GatehouseMetrics, logger: Logger
    ) {
        self.configuration = configuration
        self.storage = storage
        self.http = http
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
        var signers: [String: WebhookSigner] = [:]
        var urls: [String: String] = [:]
        for endpoint in configuration.endpoints {
            signers[endpoint.name] = WebhookSigner(secrets: endpoint.secrets.compactMap(WebhookSecret.init))
            urls[endpoint.name] = endpoint.url
        }
        self.signers = signers
        self.urls = urls
        (wakeUps, wakeUp) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Starts a round now (a write recorded events).
    public func wake() {
        wakeUp.yield()
    }

    /// Each endpoint's last outcome (`delivered`, `retry: …`, `failed: …`, `gone`).
    public func outcomes() -> [String: String] {
        lastOutcomes.withLock { $0 }
    }

    /// Delivers until the task is cancelled.
    public func run() async {
        var lastPurge = ContinuousClock.now - .seconds(3600)
        var iterator = wakeUps.makeAsyncIterator()
        while !Task.isCancelled {
            var full = false
            do {
                if ContinuousClock.now - lastPurge >= configuration.purgeInterval {
                    lastPurge = ContinuousClock.now
                    try await dropExpired()
                }
                full = try await round() == Self.batch
                let backlog = try await storage.outboxBacklog()
                metrics.webhookBacklog(
                    count: backlog.count, oldestAge: backlog.oldest.map { max(0, clock.now().timeIntervalSince($0)) } ?? 0)
            } catch is CancellationError {
                return
            } catch {
                logger.warning("webhook delivery round failed", metadata: ["error": "\(error)"])
            }
            if full { continue }
            // Woken by a local write, or the poll interval: other instances' events wait at
            // most that long.
            let timer = Task { [interval = configuration.pollInterval, wakeUp] in
                try? await Task.sleep(for: interval)
                wakeUp.yield()
            }
            _ = await iterator.next()
            timer.cancel()
        }
    }

    /// Claims and delivers one batch; answers how many entries it claimed.
    func round() async throws -> Int {
        let now = clock.now()
        // Longer than a delivery may take: an entry is taken over only from an instance that
        // stopped (or lost its store) while delivering it.
        let lease = now.addingTimeInterval(configuration.timeout + 5)
        let claimed = try await storage.claimOutbox(now: now, leaseUntil: lease, limit: Self.batch)
        guard !claimed.isEmpty else { return 0 }
        let byEndpoint = Dictionary(grouping: claimed, by: \.endpoint)
        await withTaskGroup(of: Void.self) { group in
            for (endpoint, entries) in byEndpoint {
                group.addTask { await self.deliver(entries, to: endpoint) }
            }
        }
        return claimed.count
    }

    /// The entries of one endpoint, at most `concurrencyPerEndpoint` at a time.
    private func deliver(_ entries: [OutboxEntry], to endpoint: String) async {
        var index = 0
        while index < entries.count {
            let slice = entries[index..<min(index + configuration.concurrencyPerEndpoint, entries.count)]
            index += slice.count
            await withTaskGroup(of: Void.self) { group in
                for entry in slice {
                    group.addTask { await self.attempt(entry) }
                }
            }
        }
    }

    /// One attempt and its record.
    private func attempt(_ entry: OutboxEntry) async {
        let started = ContinuousClock.now
        let outcome: DeliveryOutcome
        let label: String
        if gone.withLock({ $0.contains(entry.endpoint) }) {
            (outcome, label) = (.failed(status: 410, error: "the endpoint answered 410 Gone earlier"), "gone")
        } else if let url = urls[entry.endpoint], let signer = signers[entry.endpoint] {
            (outcome, label) = await post(entry, url: url, signer: signer)
        } else {
            (outcome, label) = (.failed(status: nil, error: "the endpoint is no longer configured"), "failed")
        }
        metrics.webhookDelivery(endpoint: entry.endpoint, outcome: label, duration: ContinuousClock.now - started)
        if outcome == .delivered { metrics.webhookDelay(endpoint: entry.endpoint, seconds: clock.now().timeIntervalSince(entry.createdAt)) }
        lastOutcomes.withLock { $0[entry.endpoint] = Self.describe(outcome) }
        do {
            try await storage.completeOutbox(id: entry.id, outcome: outcome)
        } catch {
            // The lease runs out and another round tries again: at least once.
            logger.warning("webhook delivery outcome not recorded", metadata: ["webhook.endpoint": "\(entry.endpoint)", "error": "\(error)"])
        }
    }

    /// Posts the entry; the outcome and its metric label.
    private func post(_ entry: OutboxEntry, url: String, signer: WebhookSigner) async -> (DeliveryOutcome, String) {
        var headers: OutboundHeaders = ["Content-Type": "application/json"]
        for (name, value) in signer.headers(id: entry.eventId, timestamp: Int(clock.now().timeIntervalSince1970), body: entry.payload) {
            headers.add(name, value)
        }
        let timeout = Duration.milliseconds(Int(configuration.timeout * 1000))
        let status: Int?
        let reason: String
        do {
            let response = try await http.execute(
                OutboundRequest(
                    method: "POST", url: url, headers: headers, body: Array(entry.payload), timeout: timeout, connectTimeout: timeout,
                    maxResponseBytes: 64 << 10))
            if (200..<300).contains(response.status) { return (.delivered, "delivered") }
            if response.status == 410 {
                gone.withLock { _ = $0.insert(entry.endpoint) }
                logger.error(
                    "webhook endpoint answered 410 Gone: no more deliveries to it until Gatehouse restarts with its configuration",
                    metadata: ["webhook.endpoint": "\(entry.endpoint)"])
                return (.failed(status: 410, error: "410 Gone"), "gone")
            }
            (status, reason) = (response.status, "answered \(response.status)")
        } catch let failure as OutboundError {
            (status, reason) = (nil, failure.kind == .timedOut ? "no answer within \(Int(configuration.timeout)) s" : failure.message)
        } catch {
            (status, reason) = (nil, "the call failed")
        }
        guard entry.attempts < configuration.backoff.count else { return (.failed(status: status, error: reason), "failed") }
        let wait = configuration.backoff[entry.attempts] * Double.random(in: 0.8...1.2)
        return (.retry(at: clock.now().addingTimeInterval(wait), status: status, error: reason), "retry")
    }

    /// Drops what the retention no longer keeps.
    private func dropExpired() async throws {
        let dropped = try await storage.dropOutbox(writtenBefore: clock.now().addingTimeInterval(-configuration.retention))
        for (endpoint, count) in dropped.sorted(by: { $0.key < $1.key }) where count > 0 {
            metrics.webhookDropped(endpoint: endpoint, count: count)
            logger.warning(
                "undelivered webhook events dropped after the retention",
                metadata: ["webhook.endpoint": "\(endpoint)", "webhook.dropped": .stringConvertible(count)])
        }
    }

    static func describe(_ outcome: DeliveryOutcome) -> String {
        switch outcome {
        case .delivered: "delivered"
        case .retry(_, _, let error): "retrying: \(error)"
        case .failed(_, let error): "failed: \(error)"
        }
    }
}
