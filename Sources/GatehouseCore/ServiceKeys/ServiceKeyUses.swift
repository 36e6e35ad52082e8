import Foundation
import Logging
import Synchronization

/// Records when each service key was last used, for the operators' key listing: at most once
/// a minute per key on this instance, written behind the request (a store that refuses it costs
/// the listing a line, never the call). One entry per key that authenticated here: as many as
/// the operators created.
public final class ServiceKeyUses: Sendable {
    /// How often one key's use is written, at most.
    static let interval: TimeInterval = 60

    private let storage: any GatehouseStorage
    private let clock: any GatehouseClock
    private let logger: Logger
    private let written = Mutex<[String: Date]>([:])

    /// Uses recorded into `storage`.
    public init(storage: any GatehouseStorage, clock: any GatehouseClock, logger: Logger) {
        self.storage = storage
        self.clock = clock
        self.logger = logger
    }

    /// Notes a use of key `id`, writing it when the last write is a minute old.
    func note(_ id: String) {
        let now = clock.now()
        let due = written.withLock { written -> Bool in
            if let last = written[id], now.timeIntervalSince(last) < Self.interval { return false }
            written[id] = now
            return true
        }
        guard due else { return }
        let storage = self.storage
        let logger = self.logger
        Task {
            do {
                try await storage.recordServiceKeyUse(id: id, at: now)
            } catch {
                logger.warning("a service key's use was not recorded", metadata: ["error.type": "\(type(of: error))"])
            }
        }
    }
}
