// `Benchmark` is a class that predates Sendable checking; each is used by one iteration at a time.
@preconcurrency import Benchmark
import HTTPTypes
import Hummingbird
import HummingbirdTesting

// Allocations per request on the gateway's in-process hot paths, counted by ordo-one/benchmark's
// malloc interposer. Counts do not depend on the machine's speed, so `Tests/Benchmarks/
// allocations.py` compares them with the committed baseline and fails on growth.
//
// Each iteration measures one operation between `startMeasurement` and `stopMeasurement`; the
// test client's set-up around it is not counted. The process is the whole world: the emulator
// answering the gateway's libcurl calls lives in it, so its allocations for those calls are
// counted too, the same each time.

/// The names the baseline file knows the benchmarks by.
enum AllocationBenchmark: String, CaseIterable {
    /// A cached `GET /v1/me`.
    case cachedMe = "me-cached"
    /// A service's provider API call through the passthrough.
    case passthrough = "passthrough"
    /// A returning user's complete sign-in.
    case signIn = "sign-in"
}

/// The benchmarks of this executable, registered by the runner's generated `main`.
let benchmarks: @Sendable () -> Void = {
    Benchmark.defaultConfiguration = .init(
        metrics: [.mallocCountTotal], warmupIterations: 5, maxDuration: .seconds(60), maxIterations: 200)
    Benchmark.setup = { await stoppingOnFailure("set-up") { try await Fixture.start() } }

    // `GET /v1/me` for a signed-in session cookie, the profile already cached: through the
    // router test client (no socket), so the count is the middleware chain and the route.
    Benchmark(AllocationBenchmark.cachedMe.rawValue) { benchmark in
        await countingOnce(benchmark, over: .router) { client, fixture in
            try require(try await client.execute(uri: "/v1/me", method: .get, headers: [.cookie: fixture.sessionCookie]), .ok, "GET /v1/me")
        }
    }

    // A service's GitHub API call (`GET …/api/user/repos`) passed through libcurl to the
    // in-process upstream. Over a loopback connection (`.live`): a streamed answer is paced by
    // the connection's event loop, which the router test client does not run. The connection
    // is opened before the count.
    Benchmark(AllocationBenchmark.passthrough.rawValue) { benchmark in
        await countingOnce(
            benchmark, over: .live,
            before: { client in try require(try await client.execute(uri: "/healthz", method: .get), .ok, "GET /healthz") }
        ) { client, fixture in
            let response = try await client.execute(
                uri: "/v1/users/\(fixture.uid)/providers/github.com/api/user/repos", method: .get,
                headers: [.authorization: "Bearer \(fixture.serviceKey)"])
            try require(response, .ok, "the passthrough call")
        }
    }

    // A returning user's complete sign-in: start, the provider's authorize and token
    // endpoints, the GitHub profile read, the account and session writes, the result.
    Benchmark(AllocationBenchmark.signIn.rawValue) { benchmark in
        await countingOnce(benchmark, over: .router) { client, fixture in
            _ = try await SignIn.run(client: client, http: fixture.http)
        }
    }
}

/// One iteration: a fresh test client of `setup` over the fixture's application, `before` run
/// uncounted, then `operation` between `startMeasurement` and `stopMeasurement`. A failure ends
/// the run (`stoppingOnFailure`).
func countingOnce(
    _ benchmark: Benchmark, over setup: TestingSetup, before: @escaping @Sendable (any TestClientProtocol) async throws -> Void = { _ in },
    _ operation: @escaping @Sendable (any TestClientProtocol, Fixture) async throws -> Void
) async {
    await stoppingOnFailure(benchmark.name) {
        let fixture = try Fixture.shared
        try await fixture.application.test(setup) { client in
            try await before(client)
            benchmark.startMeasurement()
            try await operation(client, fixture)
            benchmark.stopMeasurement()
        }
    }
}
