import Foundation
import GatehouseCore
import GatehouseTestSupport
import Glibc
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Synchronization
import Testing

@testable import GatehouseServer

/// Statuses, problem documents and headers of the real route chain, in-process.
@Suite("HTTP mapping (in-process)")
struct HTTPMappingTests {
    @Test("errors are problem documents: unknown route, wrong method with Allow, unknown provider; every answer is nosniff")
    func problemDocuments() async throws {
        try await withInProcessGateway { client, _ in
            let missing = try await client.execute(uri: "/nope", method: .get)
            #expect(missing.status == .notFound)
            #expect(missing.problemCode == "not-found")
            #expect(missing.headers[.xContentTypeOptions] == "nosniff")
            #expect(missing.headers[.cacheControl] == "no-store")
            let wrongMethod = try await client.execute(uri: "/v1/me", method: .put)
            #expect(wrongMethod.status == .methodNotAllowed)
            #expect(wrongMethod.problemCode == "method-not-allowed")
            #expect(wrongMethod.headers[.allow] == "GET, DELETE")
            let unknown = try await client.execute(uri: "/v1/auth/example.com/start?return_to=x", method: .get)
            #expect(unknown.status == .notFound)
            #expect(unknown.problemCode == "unknown-provider")
            let problem = try unknown.json
            #expect(problem["status"] as? Int == 404)
            #expect(problem["title"] as? String == "Unknown provider")
            #expect(problem["type"] as? String == "urn:gatehouse:problem:unknown-provider")
            let healthy = try await client.execute(uri: "/healthz", method: .get)
            #expect(healthy.status == .ok)
            #expect(healthy.headers[.xContentTypeOptions] == "nosniff")
        }
    }

    @Test("callers without credentials: 401 unauthenticated, a garbage bearer 401 invalid-id-token")
    func userCredentials() async throws {
        try await withInProcessGateway { client, _ in
            let anonymous = try await client.execute(uri: "/v1/me", method: .get)
            #expect(anonymous.status == .unauthorized)
            #expect(anonymous.problemCode == "unauthenticated")
            let garbage = try await client.execute(uri: "/v1/me", method: .get, headers: [.authorization: "Bearer not-a-jwt"])
            #expect(garbage.status == .unauthorized)
            #expect(garbage.problemCode == "invalid-id-token")
            for authorization in ["Basic b2N0b2NhdA==", "Bearer", "Bearer   ", "Bearerx.y.z", "bearer\tnot-a-jwt", "BEARER  not-a-jwt  "] {
                let refused = try await client.execute(uri: "/v1/me", method: .get, headers: [.authorization: authorization])
                #expect(refused.status == .unauthorized, "\(authorization)")
                #expect(refused.problemCode == "invalid-id-token", "\(authorization)")
            }
        }
    }

    @Test("service keys: none or unknown 401, a missing scope 403 permission-denied, an unknown user 404 user-not-found")
    func serviceKeys() async throws {
        try await withInProcessGateway { client, gatehouse in
            let (_, photoKey) = try await gatehouse.serviceKeys.create(name: "photos", scopes: ["photo:read"])
            let (_, profileKey) = try await gatehouse.serviceKeys.create(name: "profiles", scopes: ["profile:read"])
            #expect(try await client.execute(uri: "/v1/users/u1", method: .get).status == .unauthorized)
            let unknown = try await client.execute(uri: "/v1/users/u1", method: .get, headers: [.authorization: "Bearer gk_unknown"])
            #expect(unknown.status == .unauthorized)
            let scopeless = try await client.execute(uri: "/v1/users/u1", method: .get, headers: [.authorization: "Bearer \(photoKey)"])
            #expect(scopeless.status == .forbidden)
            #expect(scopeless.problemCode == "permission-denied")
            let missingUser = try await client.execute(uri: "/v1/users/u1", method: .get, headers: [.authorization: "Bearer \(profileKey)"])
            #expect(missingUser.status == .notFound)
            #expect(missingUser.problemCode == "user-not-found")
        }
    }

    @Test("sign-in starts: a foreign return_to 400 invalid-return-to, an unknown mode 400 invalid-argument, a good one 302 to the provider")
    func starts() async throws {
        try await withInProcessGateway { client, _ in
            let foreign = try await client.execute(
                uri: "/v1/auth/github.com/start?return_to=https%3A%2F%2Fevil.example%2F", method: .get)
            #expect(foreign.status == .badRequest)
            #expect(foreign.problemCode == "invalid-return-to")
            let mode = try await client.execute(
                uri: "/v1/auth/github.com/start?return_to=https%3A%2F%2Fapp.example.com%2Fsigned-in&mode=bogus", method: .get)
            #expect(mode.status == .badRequest)
            #expect(mode.problemCode == "invalid-argument")
            // Outside development mode a start must bind its result (any S256 value will do here).
            let challenge = String(repeating: "A", count: 43)
            let good = try await client.execute(
                uri: "/v1/auth/github.com/start?return_to=https%3A%2F%2Fapp.example.com%2Fsigned-in&result_challenge=\(challenge)", method: .get)
            #expect(good.status == .found, "\(String(buffer: good.body))")
            #expect(good.headers[.location]?.hasPrefix("https://idp.invalid/github/login/oauth/authorize?") == true)
            #expect(good.headers[.referrerPolicy] == "no-referrer")
            #expect(good.headers[.setCookie]?.contains("HttpOnly") == true)
        }
    }

    @Test("a feature turned off answers 404 operation-not-allowed; an oversized body 413 invalid-argument")
    func hiddenAndTooLarge() async throws {
        try await withInProcessGateway { client, _ in
            let methods = try await client.execute(uri: "/v1/auth/methods?email=a%40example.com", method: .get)
            #expect(methods.status == .notFound)
            #expect(methods.problemCode == "operation-not-allowed")
            let body = ByteBuffer(string: #"{"result":""# + String(repeating: "a", count: 20 << 10) + #""}"#)
            let tooLarge = try await client.execute(
                uri: "/v1/auth/result", method: .post, headers: [.contentType: "application/json"], body: body)
            #expect(tooLarge.status == .contentTooLarge)
            #expect(tooLarge.problemCode == "invalid-argument")
            #expect(try tooLarge.json["title"] as? String == "Request too large")
        }
    }

    @Test("CORS preflights only for configured origins (never null or a look-alike); sign-in routes are rate limited with Retry-After")
    func browserRules() async throws {
        try await withInProcessGateway(gateway: {
            $0.authRateLimitPerMinute = 5
            // The bucket refills with the clock: stopped, six calls are six within the minute
            // however slowly they run.
            $0.clock = StoppedClock()
        }) { client, _ in
            func preflight(_ origin: String) async throws -> TestResponse {
                try await client.execute(
                    uri: "/v1/me", method: .options,
                    headers: [.origin: origin, .accessControlRequestMethod: "GET", .accessControlRequestHeaders: "authorization"])
            }
            let allowed = try await preflight("https://app.example.com")
            #expect(allowed.status == .noContent)
            #expect(allowed.headers[.accessControlAllowOrigin] == "https://app.example.com")
            #expect(allowed.headers[.accessControlAllowCredentials] == "true")
            let varyOrigin = allowed.headers[values: .vary].filter { $0 == "Origin" }.count
            #expect(varyOrigin == 1, "decorated once: \(allowed.headers[values: .vary])")
            // What the passthrough takes (PUT, PATCH) and answers with (paging links, the
            // providers' rate-limit headers) is open to the app's script too.
            let methods = Set(
                (allowed.headers[.accessControlAllowMethods] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) })
            #expect(methods.isSuperset(of: ["GET", "POST", "PUT", "PATCH", "DELETE"]), "\(methods)")
            let exposed = Set(
                (allowed.headers[.accessControlExposeHeaders] ?? "").split(separator: ",").map {
                    $0.trimmingCharacters(in: .whitespaces).lowercased()
                })
            #expect(
                exposed.isSuperset(of: [
                    "link", "retry-after", "etag", "x-ratelimit-remaining", "x-ratelimit-reset", "ratelimit-remaining",
                    "x-ms-throttle-limit-percentage", "preference-applied",
                ]),
                "\(exposed)")
            for origin in ["https://evil.example", "null", "https://app.example.com.evil.example"] {
                let refused = try await preflight(origin)
                #expect(refused.status == .forbidden)
                #expect(refused.problemCode == "origin-not-allowed")
                #expect(refused.headers[.accessControlAllowOrigin] == nil)
            }
            // Whether an answer carries CORS fields depends on the request's `Origin`, so every
            // answer says so: a shared cache must not give an allowed app the copy it kept of an
            // answer without them (the key set and the discovery document are cacheable).
            for origin in [nil, "https://evil.example", "https://app.example.com"] {
                let keys = try await client.execute(uri: "/.well-known/jwks.json", method: .get, headers: origin.map { [.origin: $0] } ?? [:])
                #expect(keys.status == .ok && keys.headers[values: .vary].contains("Origin"), "\(origin ?? "no Origin"): \(keys.headers)")
            }
            // Five results per minute per client; the sixth waits.
            var statuses: [HTTPResponse.Status] = []
            var retryAfter: String?
            for _ in 0..<6 {
                let answer = try await client.execute(
                    uri: "/v1/auth/result", method: .post, headers: [.contentType: "application/json"],
                    body: ByteBuffer(string: #"{"result":"unknown"}"#))
                statuses.append(answer.status)
                retryAfter = answer.headers[.retryAfter] ?? retryAfter
            }
            // A malformed result id is refused (400) within the budget; the sixth call is not served.
            let holds = statuses.prefix(5).allSatisfy { $0 == .badRequest }
            #expect(holds, "\(statuses)")
            #expect(statuses.last == .tooManyRequests)
            #expect(Int(retryAfter ?? "") ?? 0 >= 1)
        }
    }

    @Test(
        "a stored photo larger than one slice is written in slices over real HTTP: the same bytes, its Content-Length, each slice counted; a small one in one write (kept as an array, then as a buffer)",
        arguments: [false, true]
    )
    func storedPhotoSlices(inBuffer: Bool) async throws {
        let large = (0..<(300 << 10)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 9) }
        let small = Array(large.prefix(40 << 10))
        let keep: ([UInt8]) -> any PhotoBytes = { inBuffer ? PhotoBuffer.joining([$0]) : $0 }
        let (keptLarge, keptSmall) = (keep(large), keep(small))
        let written = WrittenBytes()
        let router = Router(context: GatehouseRequestContext.self)
        router.get("/large") { _, context in
            Response(status: .ok, body: ProfileResponses.storedPhotoBody(keptLarge, eventLoop: context.eventLoop, written: written.add))
        }
        router.get("/small") { _, context in
            Response(status: .ok, body: ProfileResponses.storedPhotoBody(keptSmall, eventLoop: context.eventLoop, written: written.add))
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.live) { client in
            let answer = try await client.execute(uri: "/large", method: .get)
            #expect(answer.status == .ok)
            #expect(answer.headers[.contentLength] == String(large.count))
            #expect(Array(answer.body.readableBytesView) == large)
            let one = try await client.execute(uri: "/small", method: .get)
            #expect(Array(one.body.readableBytesView) == small)
        }
        let slice = 64 << 10
        let expected: [Int] = [slice, slice, slice, slice, 300 << 10 - 4 * slice, 40 << 10]
        #expect(written.writes == expected)
    }

    @Test("a stored photo waits for a slow reader: with the reader stalled, the writer stops about a socket's buffers ahead; then all arrives")
    func storedPhotoBackPressure() async throws {
        let image = [UInt8](repeating: 0x5A, count: 32 << 20)
        let written = WrittenBytes()
        let router = Router(context: GatehouseRequestContext.self)
        router.get("/photo") { _, context in
            Response(status: .ok, body: ProfileResponses.storedPhotoBody(image, eventLoop: context.eventLoop, written: written.add))
        }
        let app = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await app.test(.live) { client in
            // A client that sends one request and reads nothing until asked, with a small
            // receive buffer: the reader a server's back-pressure is for.
            let reader = try LoopbackSocket.connect(port: try #require(client.port), receiveBuffer: 64 << 10)
            defer { reader.close() }
            try reader.send("GET /photo HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            // The writer runs until the socket buffers and NIO's queue are full, then waits:
            // poll (bounded, 10 s) until its count has not moved for 300 ms.
            var last = -1
            var still = 0
            for _ in 0..<500 where still < 15 {
                try await Task.sleep(for: .milliseconds(20))
                let now = written.total
                still = now == last ? still + 1 : 0
                last = now
            }
            #expect(still >= 15, "the writer never stopped")
            // What the kernel holds: the server socket's send buffer (at most tcp_wmem's maximum)
            // and the reader's small receive buffer. Beyond that, at most 1 MiB may wait in
            // the gateway (measured: 0.06 MiB paced; ~5 MiB of queued slices before).
            let wmem = try String(contentsOfFile: "/proc/sys/net/ipv4/tcp_wmem", encoding: .utf8).split(whereSeparator: \.isWhitespace)
            let kernel = (Int(wmem.last ?? "") ?? 4 << 20) + 256 << 10
            #expect(written.total <= kernel + 1 << 20, "\(written.total) bytes written to a reader that read nothing")
            // And it goes on when the reader reads: every byte arrives.
            let answer = try await LoopbackSocket.offPool { try reader.readUntilClosed() }.rest
            let separator = Array("\r\n\r\n".utf8)
            let foundHeadEnd = (0..<min(answer.count, 4096)).first { answer[$0...].starts(with: separator) }
            let headEnd = try #require(foundHeadEnd)
            #expect(answer.count - headEnd - separator.count == image.count)
            #expect(written.total == image.count)
        }
    }
}

/// Counts the slices a body writer reports.
final class WrittenBytes: Sendable {
    private let state = Mutex([Int]())
    /// Each write's size, in order.
    var writes: [Int] { state.withLock { $0 } }
    /// All bytes written so far.
    var total: Int { state.withLock { $0.reduce(0, +) } }
    /// Records one write.
    @Sendable func add(_ count: Int) { state.withLock { $0.append(count) } }
}
