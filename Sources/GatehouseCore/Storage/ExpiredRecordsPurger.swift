import Foundation
import Logging

/// Deletes expired sign-in transactions, sign-in results and sessions on a fixed period, so
/// abandoned flows do not make the store grow forever, and, given an outbox retention, webhook
/// events older than it (`Gatehouse.outboxRetentionWithoutDispatcher`).
///
/// Expired records are already refused on read; purging is housekeeping, so a failed round
/// is logged and retried on the next period instead of stopping the gateway. Running it on
/// every instance is safe: the deletes are idempotent.
public struct ExpiredRecordsPurger: Sendable {
    /// The store to clean.
    public let storage: any GatehouseStorage
    /// The time between two rounds.
    public let interval: Duration
    /// How long webhook events are kept undelivered, when this purger drops them (nil: it
    /// leaves the outbox to the webhook dispatcher).
    public let outboxRetention: TimeInterval?
    private let logger: Logger
    private let now: @Sendable () -> Date

    /// Creates a purger; `now` is injectable for tests.
    public init(
        storage: any GatehouseStorage, interval: Duration, outboxRetention: TimeInterval? = nil, logger: Logger,
        now: @escaping @Sendable () -> Date = Date.init
    ) {
        self.storage = storage
        self.interval = interval
        self.outboxRetention = outboxRetention
        self.logger = logger
        self.now = now
    }

    /// One round; returns whether it succeeded.
    @discardableResult
    public func purgeOnce() async -> Bool {
        let now = now()
        do {
            try await storage.purgeExpired(now: now)
            if let outboxRetention {
                let dropped = try await storage.dropOutbox(writtenBefore: now.addingTimeInterval(-outboxRetention), now: now)
                for (endpoint, count) in dropped.sorted(by: { $0.key < $1.key }) where count > 0 {
                    logger.warning(
                        "undelivered webhook events dropped after the retention",
                        metadata: ["webhook.endpoint": "\(endpoint)", "webhook.dropped": .stringConvertible(count)])
                }
            }
            return true
        } catch {
            // The error's type only: driver messages can quote SQL parameters.
            logger.warning("Purging expired records failed", metadata: ["error.type": "\(type(of: error))"])
            return false
        }
    }

    /// Purges now and then every `interval` until the task is cancelled.
    public func run() async {
        while !Task.isCancelled {
            await purgeOnce()
            do {
                try await Task.sleep(for: interval)
            } catch {
                return
            }
        }
    }
}
