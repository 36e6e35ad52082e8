import ArgumentParser
import Crypto
import CurlClient
import Foundation

/// The benchmark's sign-in load generator: complete web sign-ins (start → the emulator's
/// authorize → callback → `POST /v1/auth/result`) from many concurrent tasks over the libcurl
/// multi client, so that the generator is not what limits the rate. Prints one JSON line.
///
/// It is a benchmark tool, not a test: it counts, it asserts nothing; a sign-in that does not
/// end with a 200 result is counted as a failure (and the bench stops on any).
@main
struct SignInLoad: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "gatehouse-signin-load", abstract: "Complete sign-ins against a gateway and its emulator, as fast as they go.")

    @Option(help: "The gateway's base URL.")
    var gateway: String

    @Option(help: "The provider to sign in with.")
    var provider = "github.com"

    @Option(help: "Extra start parameters (`login=octocat`), forwarded to the provider's authorize endpoint.")
    var parameter: [String] = ["login=octocat"]

    @Option(help: "Sign-ins in flight at once.")
    var concurrency = 32

    @Option(help: "How long to run, in seconds.")
    var seconds = 5.0

    mutating func run() async throws {
        let client = CurlHTTPClient(configuration: .init(maxCachedConnections: concurrency * 4))
        let flow = SignInFlow(gateway: gateway, provider: provider, parameters: parameter, client: client)
        let deadline = ContinuousClock.now + .seconds(seconds)
        let started = ContinuousClock.now
        let outcomes = await withTaskGroup(of: [Outcome].self) { group in
            for _ in 0..<concurrency {
                group.addTask {
                    var outcomes: [Outcome] = []
                    while ContinuousClock.now < deadline {
                        let start = ContinuousClock.now
                        let failure: String?
                        do {
                            try await flow.signIn()
                            failure = nil
                        } catch {
                            failure = "\(error)"
                        }
                        outcomes.append(Outcome(latency: ContinuousClock.now - start, failure: failure))
                    }
                    return outcomes
                }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
        let elapsed = ContinuousClock.now - started
        await client.stop()
        let succeeded = outcomes.filter { $0.failure == nil }
        let latencies = succeeded.map(\.latency).sorted()
        let p99 = latencies.isEmpty ? Duration.zero : latencies[min(latencies.count - 1, latencies.count * 99 / 100)]
        let summary: [String: Any] = [
            "signIns": succeeded.count,
            "failures": outcomes.count - succeeded.count,
            "firstFailure": outcomes.first { $0.failure != nil }?.failure ?? "",
            "seconds": elapsed.seconds,
            "rate": Double(succeeded.count) / elapsed.seconds,
            "p99ms": p99.seconds * 1000,
        ]
        let line = try JSONSerialization.data(withJSONObject: summary, options: [.sortedKeys])
        print(String(decoding: line, as: UTF8.self))
    }
}

/// One sign-in's end: how long it took, and why it failed if it did.
struct Outcome: Sendable {
    var latency: Duration
    var failure: String?
}

/// A sign-in step that did not answer as a browser following the flow expects.
struct StepFailure: Error, CustomStringConvertible {
    var description: String
}

/// The four requests of one complete sign-in, as a browser with a native result exchange
/// (`result_challenge`, then `POST /v1/auth/result`) makes them.
struct SignInFlow: Sendable {
    let gateway: String
    let provider: String
    let parameters: [String]
    let client: CurlHTTPClient

    func signIn() async throws {
        let verifier = Self.base64URL((0..<32).map { _ in UInt8.random(in: .min ... .max) })
        let challenge = Self.base64URL(Array(SHA256.hash(data: Array(verifier.utf8))))
        var query = URLComponents()
        query.queryItems =
            [URLQueryItem(name: "return_to", value: gateway + "/"), URLQueryItem(name: "result_challenge", value: challenge)]
            + parameters.map { pair in
                let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
                return URLQueryItem(name: parts[0], value: parts.count > 1 ? parts[1] : "")
            }
        let start = try await step(OutboundRequest(url: "\(gateway)/v1/auth/\(provider)/start?\(query.percentEncodedQuery ?? "")"), expect: 302)
        guard let transaction = start.headers["set-cookie"]?.split(separator: ";").first.map(String.init),
            let authorize = start.headers["location"]
        else { throw StepFailure(description: "start: no transaction cookie or location") }
        let approved = try await step(OutboundRequest(url: authorize), expect: 302)
        guard let callback = approved.headers["location"] else { throw StepFailure(description: "authorize: no location") }
        let finished = try await step(OutboundRequest(url: callback, headers: ["Cookie": transaction]), expect: 303)
        guard let location = finished.headers["location"], let fragment = location.range(of: "#gatehouse_result=") else {
            throw StepFailure(description: "callback: no result in \(finished.headers["location"] ?? "no location")")
        }
        let body = try JSONSerialization.data(withJSONObject: [
            "result": String(location[fragment.upperBound...]), "result_verifier": verifier,
        ])
        _ = try await step(
            OutboundRequest(method: "POST", url: "\(gateway)/v1/auth/result", headers: ["Content-Type": "application/json"], body: Array(body)),
            expect: 200)
    }

    private func step(_ request: OutboundRequest, expect status: Int) async throws -> OutboundResponse {
        let response = try await client.execute(request)
        guard response.status == status else {
            throw StepFailure(
                description: "\(request.method) \(request.url.prefix { $0 != "?" }): \(response.status) \(response.bodyText.prefix(200))")
        }
        return response
    }

    private static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

extension Duration {
    /// The duration in seconds, as a `Double`.
    fileprivate var seconds: Double {
        let (whole, fraction) = components
        return Double(whole) + Double(fraction) / 1e18
    }
}
