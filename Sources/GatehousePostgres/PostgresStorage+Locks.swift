import Foundation
import GatehouseCore
import Logging
import PostgresNIO
import _ConnectionPoolModule

/// PostgresStorage's `LockStore` part.
extension PostgresStorage {
    /// A named lock across instances, held as a lease in `gatehouse_locks`: taken, renewed
    /// and released by one short statement each, so no pooled connection is held while `body`
    /// runs. (A session-level advisory lock kept one connection for the whole body — a
    /// provider's token call included — and every waiter blocked in PostgreSQL on another:
    /// a few slow refreshes starved the pool for every request.) Waiters retry with a growing
    /// pause for up to `lockWait`, then answer `StorageError.unavailable`. While `body` runs
    /// the holder renews its lease every third of `lockLease`, so a body slower than the
    /// lease (a provider's token call may be given up to an hour) keeps the lock; a holder
    /// that died frees it when its last lease ends.
    public func withLock<T: Sendable>(_ name: String, _ body: @Sendable () async throws -> T) async throws -> T {
        let holder = UUID().uuidString
        let deadline = ContinuousClock.now + lockWait
        var pause = Duration.milliseconds(5)
        do {
            while try await !lease(name, holder: holder) {
                guard ContinuousClock.now < deadline else {
                    logger.warning("lock wait timed out", metadata: ["lock": "\(name.prefix(80))"])
                    throw StorageError.unavailable
                }
                try await Task.sleep(for: pause)
                pause = min(pause * 2, .milliseconds(100))
            }
        } catch {
            // A lease statement that committed but whose answer was lost (a timeout, the caller
            // cancelled) would hold the lock for a whole lease: this holder lets go of it.
            await release(name, holder: holder)
            throw error
        }
        let result = await withTaskGroup(of: Void.self) { group in
            // Lease statements never carry the caller's webhook events (`Outbox.entries`).
            group.addTask { await Outbox.$entries.withValue([]) { await self.renewLease(name, holder: holder) } }
            let answer: Result<T, any Error>
            do {
                answer = .success(try await body())
            } catch {
                answer = .failure(error)
            }
            group.cancelAll()
            return answer
        }
        await release(name, holder: holder)
        return try result.get()
    }

    /// Gives up `holder`'s lease on `name`, if it has one, in a task of its own: a caller
    /// cancelled meanwhile would cancel the statement and leave the lease to expire. A release
    /// that fails (the database went away) leaves it to expire too.
    private func release(_ name: String, holder: String) async {
        await Task {
            await Outbox.$entries.withValue([]) {
                try? await self.execute("DELETE FROM gatehouse_locks WHERE name = \(name) AND holder = \(holder)")
            }
        }.value
    }

    /// Extends `holder`'s lease on `name` every third of `lockLease` until cancelled. A renewal
    /// that fails (the database is briefly away) is tried again at the next turn; the lease
    /// left covers two more. A lease found taken by another holder (this one's ran out while
    /// the database was away) is logged and no longer renewed: the body's writes are
    /// compare-and-set, so they do not undo the other holder's.
    private func renewLease(_ name: String, holder: String) async {
        let milliseconds = lockLeaseMilliseconds
        while (try? await Task.sleep(for: lockLease / 3)) != nil {
            let renewed = try? await changed(
                """
                UPDATE gatehouse_locks SET expires_at = now() + \(milliseconds) * interval '1 millisecond'
                WHERE name = \(name) AND holder = \(holder) RETURNING holder
                """)
            if renewed == false {
                logger.warning("lock lease lost before its holder finished", metadata: ["lock": "\(name.prefix(80))"])
                return
            }
        }
    }
}
