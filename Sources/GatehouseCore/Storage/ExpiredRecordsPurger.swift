import Foundation
import Logging

/// Deletes expired sign-in transactions, sign-in results and sessions on a fixed period, so
/// abandoned flows do not make the store grow forever.
///
/// Expired records are already refused on read; purging is housekeeping, so a failed round
/// is logged and retried on the next period instead of stopping the gateway. Running it on
/// every instance is safe: the deletes are idempotent.
public struct ExpiredRecordsPurger: Sendable {
    /// The store to clean.
    public let storage: any GatehouseStorage
    /// The time between two rounds.
    public let interval: Duration
    private let logger: Logger
    private let now: @Sendable () -> Date

    /// Creates a purger; `now` is injectable for tests.
    public init(storage: any GatehouseStorage, interval: Duration, logger: Logger, now: @escaping @Sendable () -> Date = Date.init) {
        self.storage = storage
        self.interval = interval
        self.logger = logger
        self.now = now
    }

    /// One round; returns whether it succeeded.
    @discardableResult
    public func purgeOnce() async -> Bool {
        do {
            try await storage.purgeExpired(now: now())
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
