import GatehouseCore
import Logging
import PostgresNIO

extension PostgresStorage: SharedStore {
    /// The channel the schema's triggers notify with the uid of each changed account, or the
    /// id of a changed service key behind `serviceKeyPayloadPrefix`.
    static let changeChannel = "gatehouse_account_changes"
    /// Marks a service key's id on the change channel (uids never contain a colon).
    static let serviceKeyPayloadPrefix = "service-key:"

    /// Listens on the change channel with one connection of the pool until the task is
    /// cancelled; throws when that connection is lost (the server restarted, the network), or
    /// when it leaves `SELECT 1` unanswered for the operation timeout, asked every
    /// `feedCheckInterval`: a connection cut without a reset (packets dropped) would otherwise
    /// look alive to a feed that only reads, and every change after the cut would be missed.
    public func followChanges(_ body: @escaping @Sendable (StoreChange) async -> Void) async throws {
        let logger = self.logger
        // Counted in the pool's gauges: this connection is one the other operations cannot have.
        try await usage.counting {
            try await followChanges(body, logger: logger)
        }
    }

    private func followChanges(_ body: @escaping @Sendable (StoreChange) async -> Void, logger: Logger) async throws {
        try await client.withConnection { connection in
            // The feed ends only when its connection failed or the task was cancelled, and the
            // connection is closed before it goes back: postgres-nio fails the listener before
            // it closes the channel, and the pool hears of a connection's end only once the
            // channel has closed, so a dying connection released as it is could be leased to a
            // request, which would then fail or hang until the operation timeout.
            var failure: (any Error)?
            do {
                try await withThrowingTaskGroup(of: Void.self) { group in
                    group.addTask { try await self.listen(on: connection, body, logger: logger) }
                    group.addTask { try await self.check(connection, logger: logger) }
                    // Whichever ends first ends the feed: the listener when the connection
                    // fails, the check when the connection stops answering.
                    defer { group.cancelAll() }
                    try await group.next()
                }
            } catch {
                // A cancelled feed (the gateway stopping) ended as asked, whatever its connection
                // said while it was closed.
                if !Task.isCancelled { failure = error }
            }
            await Self.closed(connection)
            if let failure { throw failure }
        }
    }

    /// Closes `connection` and returns once the pool has heard of it. `close()` alone is not
    /// enough: it returns at once when the channel is no longer active, which it is a moment
    /// before the close future's callbacks (the pool's among them) have run; a callback added
    /// from off the event loop runs after those.
    private static func closed(_ connection: PostgresConnection) async {
        let _: EventLoopFuture<Void> = connection.close()
        try? await connection.closeFuture.get()
    }

    /// The feed's check, named so that its backend is told apart in `pg_stat_activity` after a
    /// check as before one (the `LISTEN` it ran until then).
    static let feedCheck: PostgresQuery = "SELECT 1 AS gatehouse_change_feed"

    /// Asks `connection` `SELECT 1` (`feedCheck`) every `feedCheckInterval` (`probe`); throws when a check
    /// fails or goes unanswered for the operation timeout (closing the connection, which ends the
    /// listener too). Cancelled, it closes the connection and returns: that ends a check waiting
    /// on a dead connection at once.
    private func check(_ connection: PostgresConnection, logger: Logger) async throws {
        let (interval, timeout) = (feedCheckInterval, operationTimeout)
        try await withTaskCancellationHandler {
            while !Task.isCancelled {
                do { try await Task.sleep(for: interval) } catch { return }
                do {
                    guard !connection.isClosed else { throw PostgresStorageError("the change feed's connection closed") }
                    try await Self.probe(
                        within: timeout, close: { let _: EventLoopFuture<Void> = connection.close() },
                        query: { try await connection.query(Self.feedCheck, logger: logger) })
                } catch {
                    if Task.isCancelled { return }
                    throw error
                }
            }
        } onCancel: {
            let _: EventLoopFuture<Void> = connection.close()
        }
    }

    /// Returns once `query` answers; throws its error, or, when `timeout` passes without an
    /// answer, calls `close` and throws; a cancelled wait (the feed ending, its listener failed
    /// with the connection) throws at once. `query` runs in a task of its own that is not waited
    /// for: postgres-nio neither heeds cancellation in a query nor ever ends one whose request
    /// reaches a connection that closed before it (the write is dropped, and nothing fails the
    /// query), so a check that waited for it could hold a stop forever. Such a query stays
    /// suspended; it takes the connection closing in the moment between `check`'s look at it
    /// and the request reaching it.
    static func probe(
        within timeout: Duration, close: @escaping @Sendable () -> Void, query: @escaping @Sendable () async throws -> Void
    ) async throws {
        let answer = Eventual<Void>()
        let timer = Task {
            do { try await Task.sleep(for: timeout) } catch { return }
            close()
            answer.fail(PostgresStorageError("the change feed's connection did not answer SELECT 1 within \(timeout)"))
        }
        defer { timer.cancel() }
        Task {
            do {
                try await query()
                answer.set(())
            } catch {
                answer.fail(error)
            }
        }
        try await answer.value()
    }

    /// Runs the change feed on `connection` until the listener fails or is cancelled.
    private func listen(on connection: PostgresConnection, _ body: @escaping @Sendable (StoreChange) async -> Void, logger: Logger) async throws {
        try await connection.listen(on: Self.changeChannel) { notifications in
            // `listen` returns once the server has confirmed LISTEN: from here on nothing
            // committed is missed.
            await body(.following)
            for try await notification in notifications {
                let payload = notification.payload
                if payload.hasPrefix(Self.serviceKeyPayloadPrefix) {
                    await body(.serviceKey(id: String(payload.dropFirst(Self.serviceKeyPayloadPrefix.count))))
                } else {
                    await body(.account(uid: payload))
                }
            }
            logger.debug("change feed ended")
        }
    }
}
