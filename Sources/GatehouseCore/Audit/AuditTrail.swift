import DequeModule
import Foundation
import Logging
import Synchronization

/// Keeps audit events in the store for the operators' activity listing, with a retention.
///
/// The log line `AuditLog` writes is the trail of record: written at once, whatever the store
/// does. The stored copy is for looking things up, so it is written behind the request, in
/// batches, from a bounded buffer: a store that is down or slow delays the listing, never a
/// request, and past `capacity` waiting events the oldest are dropped (counted in
/// `gatehouse_audit_events_dropped_total` and logged). Provider API passthrough calls
/// (`provider-api.called`, one per proxied call) stay in the log only.
public final class AuditTrail: Sendable {
    /// Events waiting to be stored, at most.
    public static let capacity = 10_000
    /// Events stored per write.
    static let batchSize = 500

    private let storage: any GatehouseStorage
    private let clock: any GatehouseClock
    private let metrics: GatehouseMetrics
    private let logger: Logger
    /// How long stored events are kept.
    let retention: TimeInterval
    /// How often waiting events are stored.
    let flushInterval: Duration
    /// A deque: dropping the oldest of a full queue, as every event does while the store is
    /// down, costs one step instead of moving the ten thousand others.
    private let waiting = Mutex<Deque<AuditRecord>>([])

    /// A trail into `storage` keeping events `retention` seconds.
    public init(
        storage: any GatehouseStorage, retention: TimeInterval, clock: any GatehouseClock, metrics: GatehouseMetrics, logger: Logger,
        flushInterval: Duration = .seconds(1)
    ) {
        self.storage = storage
        self.retention = retention
        self.clock = clock
        self.metrics = metrics
        self.logger = logger
        self.flushInterval = flushInterval
    }

    /// Whether `event` is stored (everything but the per-call passthrough events).
    static func keeps(_ event: AuditEvent) -> Bool { event != .providerAPICalled }

    /// Queues an event for the store.
    func append(_ record: AuditRecord) {
        let dropped = waiting.withLock { queue -> Bool in
            queue.append(record)
            guard queue.count > Self.capacity else { return false }
            queue.removeFirst()
            return true
        }
        if dropped { metrics.auditDropped() }
    }

    /// Stores what waits, a batch at a time; on a store failure the batch goes back to the
    /// front of the queue (still bounded) for the next round. Answers whether nothing waits.
    @discardableResult public func flush() async -> Bool {
        while true {
            let batch = waiting.withLock { queue -> [AuditRecord] in
                let batch = Array(queue.prefix(Self.batchSize))
                queue.removeFirst(batch.count)
                return batch
            }
            guard !batch.isEmpty else { return true }
            do {
                try await storage.appendAudit(batch)
            } catch {
                let dropped = waiting.withLock { Self.requeue(batch, into: &$0) }
                if dropped > 0 { metrics.auditDropped(count: dropped) }
                logger.warning("audit events not stored yet (the log has them)", metadata: ["error.type": "\(type(of: error))"])
                return false
            }
        }
    }

    /// Puts a batch the store refused back before what queued meanwhile, and drops what is
    /// past `capacity` from the oldest end, as `append` does: the newest events are the ones an
    /// operator looks for first. Answers how many were dropped.
    static func requeue(_ batch: [AuditRecord], into queue: inout Deque<AuditRecord>) -> Int {
        queue.prepend(contentsOf: batch)
        let over = max(0, queue.count - capacity)
        queue.removeFirst(over)
        return over
    }

    /// Stores waiting events every `flushInterval` and drops those past the retention every
    /// hour, until the task is cancelled; then stores what still waits.
    public func run() async {
        var lastPurge = ContinuousClock.now - .seconds(3600)
        while !Task.isCancelled {
            try? await Task.sleep(for: flushInterval)
            await flush()
            if ContinuousClock.now - lastPurge >= .seconds(3600) {
                lastPurge = ContinuousClock.now
                do {
                    let dropped = try await storage.dropAudit(before: clock.now().addingTimeInterval(-retention))
                    if dropped > 0 {
                        logger.info("audit events past the retention dropped", metadata: ["audit.dropped": .stringConvertible(dropped)])
                    }
                } catch {
                    logger.warning("dropping old audit events failed", metadata: ["error.type": "\(type(of: error))"])
                }
            }
        }
        await flush()
    }
}
