import Foundation
import Synchronization

/// Service keys read lately, by secret hash, so that a service's every request is not a
/// database read — bounded in size and in age.
///
/// A key is trusted for `lifetime` after it was read. A revocation through this process drops
/// it at once (`forget(keyId:)`); one by another process arrives from a shared store's change
/// feed (`CachedStore.followChanges()`), and where there is none (SQLite, whose keys
/// `gatehouse keys revoke` changes from another process) `lifetime` bounds how long a revoked
/// key still works. Unknown secrets are never remembered.
public final class ServiceKeyCache: Sendable {
    private struct State {
        var entries: [String: (key: ServiceKeyRecord, readAt: Date)] = [:]
        /// Bumped by every forgetting: a read that started before one is not kept, since the
        /// key it read may be the one forgotten.
        var generation = 0
    }

    private let state = Mutex(State())
    /// How long a key read from the store is trusted (0: never kept).
    public let lifetime: TimeInterval
    /// The most keys held; past it the cache starts over (keys are few: this is a bound, not
    /// an eviction policy).
    public let capacity: Int
    private let clock: any GatehouseClock

    /// A cache of at most `capacity` keys, each trusted for `lifetime` seconds.
    public init(lifetime: TimeInterval, capacity: Int = 1024, clock: any GatehouseClock = SystemClock()) {
        self.lifetime = lifetime
        self.capacity = max(1, capacity)
        self.clock = clock
    }

    /// The key with this secret hash: held, or read with `read` and kept unless a forgetting
    /// overtook the read.
    public func key(secretHash: String, read: () async throws -> ServiceKeyRecord?) async throws -> ServiceKeyRecord? {
        guard lifetime > 0 else { return try await read() }
        let now = clock.now()
        let (held, generation) = state.withLock { state -> (ServiceKeyRecord?, Int) in
            guard let entry = state.entries[secretHash], now.timeIntervalSince(entry.readAt) < lifetime else { return (nil, state.generation) }
            return (entry.key, state.generation)
        }
        if let held { return held }
        guard let key = try await read() else { return nil }
        state.withLock { state in
            guard state.generation == generation else { return }
            if state.entries.count >= capacity { state.entries.removeAll() }
            state.entries[secretHash] = (key, now)
        }
        return key
    }

    /// Drops the key with this id (revoked here or told by the change feed).
    public func forget(keyId: String) {
        state.withLock { state in
            state.generation += 1
            state.entries = state.entries.filter { $0.value.key.id != keyId }
        }
    }

    /// Drops every key (the change feed started or restarted: what it missed is unknown).
    public func forgetAll() {
        state.withLock { state in
            state.generation += 1
            state.entries.removeAll()
        }
    }

    /// How many keys are held (tests).
    public var count: Int { state.withLock { $0.entries.count } }
}
