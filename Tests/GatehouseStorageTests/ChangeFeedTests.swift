import Foundation
import GatehouseCore
import GatehousePostgres
import GatehouseTestSupport
import Testing

/// PostgreSQL's change feed, which tells every instance what another one changed.
@Suite struct ChangeFeedTests {
    @Test(
        "a change feed whose connection is cut without a reset (packets swallowed, nothing closed) ends within its check interval and the operation timeout (CachedStore then answers nothing from memory until it listens again)"
    )
    func silentConnectionEndsTheFeed() async throws {
        let url = try await PostgresTestServer.freshDatabase()
        try await PostgresTestServer.store(url).migrate()
        var components = try #require(URLComponents(string: url))
        let proxy = try BlackHoleProxy(targetPort: try #require(components.port))
        defer { proxy.close() }
        components.port = proxy.port
        let store = try PostgresStorage(
            url: try #require(components.string), maximumConnections: 2, operationTimeout: .seconds(2), feedCheckInterval: .milliseconds(200),
            logger: PostgresTestServer.quietLogger)
        let (following, listening) = AsyncStream<Void>.makeStream()
        let (endings, ending) = AsyncStream<Void>.makeStream()
        let feed = Task {
            defer {
                ending.yield()
                ending.finish()
            }
            try await store.followChanges { change in
                if case .following = change { listening.yield() }
            }
        }
        defer { feed.cancel() }
        try #require(await Self.yields(following, within: .seconds(30)), "the feed never listened")
        proxy.blackHole()
        // The feed must end by itself: within 0.2 s + 2 s, bounded here at 30 s. (Waiting on
        // a stream, not on the task's value, which a hung feed would never give.)
        #expect(await Self.yields(endings, within: .seconds(30)), "the feed went on listening on a dead connection")
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
