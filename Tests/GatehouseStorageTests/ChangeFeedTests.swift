import Foundation
import GatehouseCore
import GatehouseTestSupport
import Synchronization
import Testing

@testable import GatehousePostgres

/// PostgreSQL's change feed, which tells every instance what another one changed.
@Suite struct ChangeFeedTests {
    @Test(
        "a change feed whose connection is cut without a reset (packets swallowed, nothing closed) ends within its check interval and the operation timeout (CachedStore then answers nothing from memory until it listens again)"
    )
    func silentConnectionEndsTheFeed() async throws {
        let (proxy, feed, endings) = try await Self.listeningFeed(operationTimeout: .seconds(2), feedCheckInterval: .milliseconds(200))
        defer {
            feed.cancel()
            proxy.close()
        }
        proxy.blackHole()
        // The feed must end by itself: within 0.2 s + 2 s, bounded here at 30 s. (Waiting on
        // a stream, not on the task's value, which a hung feed would never give.)
        try #require(await Self.yields(endings, within: .seconds(30)), "the feed went on listening on a dead connection")
        let ended = await feed.result
        #expect((try? ended.get()) == nil, "the feed ended without saying its connection was lost")
    }

    @Test(
        "a feed cancelled while its check waits on a dead connection stops at once, without waiting for the operation timeout, and reports no loss"
    )
    func cancelledFeedStopsAtOnce() async throws {
        // Checks every 50 ms, each waiting up to a minute for its answer.
        let (proxy, feed, endings) = try await Self.listeningFeed(operationTimeout: .seconds(60), feedCheckInterval: .milliseconds(50))
        defer { proxy.close() }
        proxy.blackHole()
        // A check is sent and never answered; the stop must not wait the minute out.
        try await Task.sleep(for: .milliseconds(300))
        feed.cancel()
        try #require(await Self.yields(endings, within: .seconds(20)), "the cancelled feed waited for its check")
        let ended = await feed.result
        #expect((try? ended.get()) != nil, "a cancelled feed reported a lost connection")
    }

    @Test(
        "a check never waits for its query, which postgres-nio never ends once its request reaches a closed connection: it ends at its timeout, closing the connection, and at once when cancelled"
    )
    func aCheckNeverWaitsForItsQuery() async throws {
        // A query that neither answers nor heeds cancellation, as postgres-nio's on a connection
        // that closed before its request reached it; let go at the end of the test.
        let never = Eventual<Void>()
        defer { never.set(()) }
        let stuck: @Sendable () async throws -> Void = { try await never.value() }
        let closes = Calls()

        let timedOut = Task { try await PostgresStorage.probe(within: .milliseconds(100), close: closes.note, query: stuck) }
        let timeoutOutcome = try #require(await Self.outcome(of: timedOut, within: .seconds(30)), "the check waited for its query")
        #expect((try? timeoutOutcome.get()) == nil, "an unanswered check is an error")
        #expect(closes.count == 1, "the connection was closed")

        let cancelled = Task { try await PostgresStorage.probe(within: .seconds(3600), close: closes.note, query: stuck) }
        try await Task.sleep(for: .milliseconds(50))
        cancelled.cancel()
        let cancelOutcome = try #require(await Self.outcome(of: cancelled, within: .seconds(30)), "the cancelled check waited for its query")
        #expect(throws: CancellationError.self) { try cancelOutcome.get() }

        let answered = Task { try await PostgresStorage.probe(within: .seconds(3600), close: {}, query: {}) }
        let answeredOutcome = try #require(await Self.outcome(of: answered, within: .seconds(30)))
        #expect(throws: Never.self) { try answeredOutcome.get() }
        struct Refused: Error {}
        let failed = Task { try await PostgresStorage.probe(within: .seconds(3600), close: {}, query: { throw Refused() }) }
        let failedOutcome = try #require(await Self.outcome(of: failed, within: .seconds(30)))
        #expect(throws: Refused.self) { try failedOutcome.get() }
        #expect(closes.count == 1, "only the unanswered check closed the connection")
    }

    /// Counts the calls of `note`.
    final class Calls: Sendable {
        private let calls = Mutex(0)
        /// Counts one call.
        @Sendable func note() { calls.withLock { $0 += 1 } }
        /// The calls so far.
        var count: Int { calls.withLock { $0 } }
    }

    /// The result of `task`, or `nil` when it has not ended within `limit` (the task is left).
    static func outcome<T: Sendable>(of task: Task<T, any Error>, within limit: Duration) async -> Result<T, any Error>? {
        let ended = Eventual<Result<T, any Error>>()
        Task { ended.set(await task.result) }
        let timer = Task {
            try? await Task.sleep(for: limit)
            ended.fail(CancellationError())
        }
        defer { timer.cancel() }
        return try? await ended.value()
    }

    /// A store on a fresh, migrated database reached through a `BlackHoleProxy`, and its change
    /// feed once it listens: the proxy, the feed's task, and a stream that yields when it ends.
    static func listeningFeed(operationTimeout: Duration, feedCheckInterval: Duration) async throws
        -> (proxy: BlackHoleProxy, feed: Task<Void, any Error>, endings: AsyncStream<Void>)
    {
        let url = try await PostgresTestServer.freshDatabase()
        try await PostgresTestServer.store(url).migrate()
        var components = try #require(URLComponents(string: url))
        let proxy = try BlackHoleProxy(targetPort: try #require(components.port))
        components.port = proxy.port
        let store = try PostgresStorage(
            url: try #require(components.string), maximumConnections: 2, operationTimeout: operationTimeout,
            feedCheckInterval: feedCheckInterval, logger: PostgresTestServer.quietLogger)
        let (following, listening) = AsyncStream<Void>.makeStream()
        let (endings, ending) = AsyncStream<Void>.makeStream()
        let feed = Task {
            defer {
                listening.finish()
                ending.yield()
                ending.finish()
            }
            try await store.followChanges { change in
                if case .following = change { listening.yield() }
            }
        }
        let listened = await yields(following, within: .seconds(30))
        if !listened {
            feed.cancel()
            proxy.close()
        }
        try #require(listened, "the feed never listened")
        return (proxy, feed, endings)
    }

    /// Whether `stream` yields within `limit`.
    static func yields(_ stream: AsyncStream<Void>, within limit: Duration) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                for await _ in stream { return true }
                return false
            }
            group.addTask {
                try? await Task.sleep(for: limit)
                return false
            }
            defer { group.cancelAll() }
            return await group.next() ?? false
        }
    }
}
