import Foundation
import GatehouseTestSupport
import Glibc
import Synchronization
import Testing

@testable import CurlClient

/// The libcurl client against a real HTTP server on loopback.
@Suite("CurlHTTPClient")
struct CurlHTTPClientTests {
    @Test("GET returns status, headers and body")
    func getReturnsResponse() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            let response = try await client.execute(OutboundRequest(url: server.url("/hello")))
            #expect(response.status == 200)
            #expect(response.headers["content-type"] == "application/json")
            #expect(response.bodyText == #"{"hello":"world"}"#)
            #expect(response.httpVersion == "1.1")
        }
    }

    @Test(
        "stop() suspends until the driver thread has ended: a transfer in flight fails as cancelled, a later request is refused at once, a second stop() returns at once"
    )
    func stopAwaitsTheDriver() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient()
            #expect(try await client.execute(OutboundRequest(url: server.url("/hello"))).status == 200)
            let held = Task { try await client.execute(OutboundRequest(url: server.url("/hold"))) }
            try await Task.sleep(for: .milliseconds(200))
            await client.stop()
            do {
                _ = try await held.value
                Issue.record("the held transfer survived stop()")
            } catch let error as OutboundError {
                #expect(error.kind == .cancelled, "\(error)")
            }
            do {
                _ = try await client.execute(OutboundRequest(url: server.url("/hello")))
                Issue.record("a request after stop() was served")
            } catch let error as OutboundError {
                #expect(error.kind == .cancelled, "\(error)")
            }
            await client.stop()
            client.shutdown()
        }
    }

    @Test(
        "requests racing shutdown() from many tasks each end, served or cancelled: none waits for a wake-up that never comes",
        // A hang's limit, loose enough for a loaded machine: the requests take a second or two.
        .timeLimit(.minutes(5)))
    func requestsRacingShutdownEnd() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient()
            let served = ServedCount()
            // Twenty callers each send requests one after another until the client refuses
            // them; the client shuts down once 100 were served, while the callers keep sending.
            let endings = await withTaskGroup(of: String.self) { group in
                for _ in 0..<20 {
                    group.addTask {
                        while true {
                            do {
                                let response = try await client.execute(OutboundRequest(url: server.url("/hello")))
                                guard response.status == 200 else { return "status \(response.status)" }
                                if served.count.add(1, ordering: .relaxed).newValue == 100 { client.shutdown() }
                            } catch let error as OutboundError {
                                return "\(error.kind)"
                            } catch {
                                return "\(error)"
                            }
                        }
                    }
                }
                var endings: [String] = []
                for await ending in group { endings.append(ending) }
                return endings
            }
            #expect(endings == Array(repeating: "cancelled", count: 20))
            #expect(served.count.load(ordering: .relaxed) >= 100)
            await client.stop()
        }
    }

    @Test("per-request method, headers and body reach the server; a field sent empty and one longer than a stack buffer arrive whole")
    func sendsMethodHeadersAndBody() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient(configuration: .init(userAgent: "gatehouse-test"))
            defer { client.shutdown() }
            let long = String(repeating: "0123456789", count: 300)
            let response = try await client.execute(
                OutboundRequest(
                    method: "DELETE", url: server.url("/echo?x=1"),
                    headers: ["X-Custom": "yes", "Content-Type": "application/json", "X-Empty": "", "X-Long": long],
                    body: Array(#"{"a":1}"#.utf8)))
            let lines = Set(response.bodyText.split(separator: "\n", omittingEmptySubsequences: false).map(String.init))
            #expect(lines.contains("method=DELETE"))
            #expect(lines.contains("uri=/echo?x=1"))
            #expect(lines.contains("header:x-custom=yes"))
            #expect(lines.contains("header:x-empty="))
            #expect(lines.contains("header:x-long=\(long)"))
            #expect(lines.contains("header:user-agent=gatehouse-test"))
            #expect(lines.contains("header:content-length=7"))
            #expect(lines.contains(#"body={"a":1}"#))
            let holds = !lines.contains { $0.hasPrefix("header:expect=") }
            #expect(holds)
        }
    }

    @Test("an empty body is sent as a POST with Content-Length: 0")
    func sendsEmptyBody() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            let response = try await client.execute(OutboundRequest(method: "POST", url: server.url("/echo"), body: []))
            let lines = Set(response.bodyText.split(separator: "\n").map(String.init))
            #expect(lines.contains("method=POST"))
            #expect(lines.contains("header:content-length=0"))
            #expect(lines.contains("body="))
        }
    }

    @Test("sequential requests reuse one keep-alive connection")
    func reusesConnections() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            for _ in 0..<25 {
                let response = try await client.execute(OutboundRequest(url: server.url("/hello")))
                #expect(response.status == 200)
            }
            #expect(server.requestsSeen == 25)
            #expect(server.connectionsAccepted == 1)
            // The connection's socket stays in the driver's epoll set between transfers: it was
            // registered for the first transfer (and for writing while it connected), not again.
            #expect(client.driverWatchChanges <= 4)
        }
    }

    @Test("a cached connection its server closes does not keep the driver awake, and the next request opens a new one")
    func serverClosesCachedConnection() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            #expect(try await client.execute(OutboundRequest(url: server.url("/hang-up/50"))).status == 200)
            for _ in 0..<500 where server.connectionsHungUp == 0 {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(server.connectionsHungUp == 1)
            // The driver has seen the hang-up on the connection it keeps for reuse; from now on
            // nothing happens, so it wakes only for its one-second timeout. A socket left ready
            // in its set would wake it on every wait.
            try await Task.sleep(for: .milliseconds(200))
            let before = client.driverWakeUps
            let clock = ContinuousClock()
            let start = clock.now
            try await Task.sleep(for: .milliseconds(500))
            let seconds = (clock.now - start).components.seconds
            #expect(client.driverWakeUps - before <= 3 + Int(seconds))

            let response = try await client.execute(OutboundRequest(url: server.url("/hello")))
            #expect(response.status == 200)
            #expect(server.connectionsAccepted == 2)
            // The new connection is cached and reused as any other.
            #expect(try await client.execute(OutboundRequest(url: server.url("/hello"))).status == 200)
            #expect(server.connectionsAccepted == 2)
        }
    }

    @Test("100 concurrent requests all succeed and their connections are reused afterwards")
    func concurrentRequests() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient(configuration: .init(maxCachedConnections: 128))
            defer { client.shutdown() }
            let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                for index in 0..<100 {
                    group.addTask {
                        let response = try await client.execute(OutboundRequest(url: server.url(index % 2 == 0 ? "/delay/20" : "/hello")))
                        return response.status
                    }
                }
                return try await group.reduce(into: [Int]()) { $0.append($1) }
            }
            #expect(statuses.count == 100)
            let holds = statuses.allSatisfy { $0 == 200 }
            #expect(holds)
            // A connection libcurl opened during the burst may still sit in the kernel's accept
            // queue; wait (bounded) until the server's count settles before taking it as the baseline.
            var afterBurst = server.connectionsAccepted
            for _ in 0..<30 {
                try await Task.sleep(for: .milliseconds(100))
                let now = server.connectionsAccepted
                if now == afterBurst { break }
                afterBurst = now
            }
            #expect(afterBurst >= 1 && afterBurst <= 100)
            for _ in 0..<10 {
                _ = try await client.execute(OutboundRequest(url: server.url("/hello")))
            }
            #expect(server.connectionsAccepted == afterBurst, "the cached connections serve later requests")
        }
    }

    @Test(
        "by default, the connections of a burst of 150 concurrent requests to one host stay cached: a second burst opens none (a gateway proxying slow APIs to many callers)"
    )
    func defaultCacheHoldsABurst() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            func burst() async throws {
                try await withThrowingTaskGroup(of: Int.self) { group in
                    for _ in 0..<150 {
                        group.addTask { try await client.execute(OutboundRequest(url: server.url("/delay/300"))).status }
                    }
                    for try await status in group { #expect(status == 200) }
                }
            }
            try await burst()
            // Settle (bounded): a connection may still sit in the accept queue.
            var afterFirst = server.connectionsAccepted
            for _ in 0..<30 {
                try await Task.sleep(for: .milliseconds(100))
                if server.connectionsAccepted == afterFirst { break }
                afterFirst = server.connectionsAccepted
            }
            try await burst()
            // At most 150 in all: the second burst opens only what the first did not need (on a
            // loaded machine its calls may start far enough apart to share connections), never
            // again what the cache should have kept.
            #expect(server.connectionsAccepted <= 150, "\(afterFirst) connections, then \(server.connectionsAccepted - afterFirst) more")
        }
    }

    @Test("the total timeout aborts a slow response")
    func totalTimeout() async throws {
        try await LoopbackHTTPServer.with { server in
            // The client's own total timeout is an hour: only the request's 200 ms can end a
            // call the server never answers within this test.
            let client = CurlHTTPClient(configuration: .init(timeout: .seconds(3600)))
            defer { client.shutdown() }
            let started = ContinuousClock.now
            let error = await #expect(throws: OutboundError.self) {
                try await client.execute(OutboundRequest(url: server.url("/hold"), timeout: .milliseconds(200)))
            }
            #expect(error?.kind == .timedOut)
            // Far below the client's hour, with room for a loaded machine.
            #expect(ContinuousClock.now - started < .seconds(60))
        }
    }

    @Test("a refused connection is a connect failure")
    func connectFailure() async throws {
        // A port bound but not listening: connections are refused, and no other test can take
        // the port meanwhile (a stopped server's port could be reused by a parallel test).
        let (socket, port) = try #require(TestTools.bindLoopback(0))
        defer { close(socket) }
        // A refusal arrives at once; the connect timeout only bounds the test should it not.
        let client = CurlHTTPClient(configuration: .init(connectTimeout: .seconds(10)))
        defer { client.shutdown() }
        let error = await #expect(throws: OutboundError.self) {
            try await client.execute(OutboundRequest(url: "http://127.0.0.1:\(port)/hello"))
        }
        #expect(error?.kind == .connectFailed)
    }

    @Test("the size cap aborts bodies with and without Content-Length", arguments: ["/bytes/200000", "/chunked/200000"])
    func sizeCap(path: String) async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient(configuration: .init(maxResponseBytes: 50_000))
            defer { client.shutdown() }
            let error = await #expect(throws: OutboundError.self) {
                try await client.execute(OutboundRequest(url: server.url(path)))
            }
            #expect(error?.kind == .responseTooLarge)
            let small = try await client.execute(OutboundRequest(url: server.url(path), maxResponseBytes: 300_000))
            #expect(small.body.count == 200_000)
        }
    }

    @Test(
        "takeIfComplete: nil without taking anything while the body is still coming; the whole body once it ended; the failure of a body that failed"
    )
    func takeIfComplete() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient(configuration: .init(timeout: .seconds(120), maxResponseBytes: 16 << 20, streamBufferBytes: 64 << 10))
            defer { client.shutdown() }
            // 8 MiB cannot have arrived: the transfer pauses once 64 KiB wait unread.
            let large = try await client.stream(OutboundRequest(url: server.url("/chunked/\(8 << 20)")))
            #expect(try large.body.takeIfComplete() == nil)
            var total = 0
            for try await chunk in large.body { total += chunk.count }
            #expect(total == 8 << 20)

            /// Asks until the body has ended (bounded), answering what `takeIfComplete` gave.
            func whenEnded(_ response: OutboundStreamingResponse) async throws -> [UInt8]? {
                let started = ContinuousClock.now
                while ContinuousClock.now - started < .seconds(10) {
                    if let whole = try response.body.takeIfComplete() { return whole }
                    try await Task.sleep(for: .milliseconds(10))
                }
                return nil
            }
            let small = try await client.stream(OutboundRequest(url: server.url("/chunked/1000")))
            let whole = try await whenEnded(small)
            let holds = whole?.count == 1000 && whole?.enumerated().allSatisfy { $0.element == UInt8($0.offset % 251) } == true
            #expect(holds)
            var iterator = small.body.makeAsyncIterator()
            #expect(try await iterator.next() == nil)

            let capped = try await client.stream(OutboundRequest(url: server.url("/chunked/200000"), maxResponseBytes: 50_000))
            let error = await #expect(throws: OutboundError.self) { _ = try await whenEnded(capped) }
            #expect(error?.kind == .responseTooLarge)
        }
    }

    @Test("an answer that arrives whole is complete when its head is handed over: its caller takes the body without waiting again")
    func smallAnswersArriveWhole() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            var incomplete = 0
            for _ in 0..<200 {
                let response = try await client.stream(OutboundRequest(url: server.url("/hello")))
                if try response.body.takeIfComplete() == nil { incomplete += 1 }
                _ = try await response.collect()
            }
            #expect(incomplete == 0, "\(incomplete) of 200 heads came before their bodies had ended")
        }
    }

    @Test("trailers never join the head: a chunked answer's trailer fields are not its header fields")
    func trailersStayOutOfTheHead() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            for _ in 0..<20 {
                let response = try await client.execute(OutboundRequest(url: server.url("/trailers")))
                #expect(response.status == 200)
                #expect(response.headers["content-type"] == "application/json")
                #expect(response.headers["x-trailer"] == nil && response.headers["x-ratelimit-remaining"] == nil, "\(response.headers)")
                #expect(response.body == Array(#"{"ok":true}"#.utf8))
            }
        }
    }

    @Test(
        "header lines: an interim block is replaced by the final one, lines after the final block are trailers and ignored, a request libcurl sends again starts afresh"
    )
    func headerBlocks() throws {
        let driver = CurlMultiDriver(maxCachedConnections: 1)
        defer { driver.shutdown() }
        let transfer = try Transfer(request: OutboundRequest(url: "http://127.0.0.1:9/"), configuration: .init(), driver: driver)
        func receive(_ lines: String...) {
            for line in lines {
                var bytes = Array((line + "\r\n").utf8)
                bytes.withUnsafeMutableBytes { transfer.receiveHeaderLine(UnsafeRawBufferPointer($0)) }
            }
        }
        receive("HTTP/1.1 103 Early Hints", "Link: </a.css>; rel=preload", "", "HTTP/1.1 200 OK", "Content-Type: application/json", "")
        #expect(transfer.receivedHeaders["content-type"] == "application/json" && transfer.receivedHeaders["link"] == nil)
        // Trailers, one posing as a new status line: none of them joins the head.
        receive("X-Trailer: yes", "HTTP/1.1 200 OK", "Content-Type: text/html")
        #expect(transfer.receivedHeaders["content-type"] == "application/json" && transfer.receivedHeaders["x-trailer"] == nil)
        // libcurl sends the request again (HTTP/2 refused for HTTP/1.1): the new answer's lines count.
        transfer.requestStarting()
        receive("HTTP/1.1 201 Created", "Location: /x", "")
        #expect(transfer.receivedHeaders["location"] == "/x" && transfer.receivedHeaders["content-type"] == nil)
        transfer.fail(OutboundError(kind: .cancelled, message: "never started"))  // releases its channels
    }

    @Test("redirects are returned, never followed")
    func noRedirects() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            let response = try await client.execute(OutboundRequest(url: server.url("/redirect")))
            #expect(response.status == 302)
            #expect(response.headers["location"] == "/hello")
            #expect(server.requestsSeen == 1)
        }
    }

    @Test("cancelling the awaiting task aborts the transfer promptly")
    func cancellation() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            let started = ContinuousClock.now
            let task = Task {
                try await client.execute(OutboundRequest(url: server.url("/hold")))
            }
            try await Task.sleep(for: .milliseconds(150))
            task.cancel()
            let result = await task.result
            #expect(throws: OutboundError.self) { try result.get() }
            if case .failure(let error as OutboundError) = result {
                #expect(error.kind == .cancelled)
            }
            // Far below the 30 s total timeout that would otherwise end the held call; loose enough for a loaded 2-core CI machine.
            #expect(ContinuousClock.now - started < .seconds(10))
            // The client stays usable after a cancellation.
            let after = try await client.execute(OutboundRequest(url: server.url("/hello")))
            #expect(after.status == 200)
        }
    }

    @Test("a large body streams in chunks through a small buffer, intact")
    func streaming() async throws {
        try await LoopbackHTTPServer.with { server in
            // Checking 8 MiB byte by byte takes seconds in a debug build: the default 30 s total
            // timeout was reached once on a machine loaded by a build beside the suite.
            let client = CurlHTTPClient(configuration: .init(timeout: .seconds(180), maxResponseBytes: 64 << 20, streamBufferBytes: 64 << 10))
            defer { client.shutdown() }
            let size = 8 << 20
            let response = try await client.stream(OutboundRequest(url: server.url("/chunked/\(size)")))
            #expect(response.head.status == 200)
            var total = 0
            var chunks = 0
            var intact = true
            for try await chunk in response.body {
                for (offset, byte) in chunk.enumerated() where byte != UInt8(truncatingIfNeeded: (total + offset) % 251) {
                    intact = false
                }
                total += chunk.count
                chunks += 1
                if chunks % 64 == 0 { try await Task.sleep(for: .milliseconds(1)) }  // a slow reader
            }
            #expect(total == size)
            #expect(chunks > 1)
            #expect(intact)
        }
    }

    @Test("dropping a streaming body early cancels the transfer at the server and keeps the client usable")
    func abandonedStream() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient(configuration: .init(maxResponseBytes: 1 << 30, streamBufferBytes: 16 << 10))
            defer { client.shutdown() }
            // 512 MiB, written only as fast as it is read: the server is still writing when we stop.
            do {
                let response = try await client.stream(OutboundRequest(url: server.url("/trickle/\(512 << 20)")))
                var iterator = response.body.makeAsyncIterator()
                _ = try await iterator.next()
            }
            // The client closes the connection: the server's next write fails (bounded wait).
            for _ in 0..<200 where server.answersCut == 0 { try await Task.sleep(for: .milliseconds(50)) }
            #expect(server.answersCut == 1)
            let after = try await client.execute(OutboundRequest(url: server.url("/hello")))
            #expect(after.status == 200)
        }
    }

    @Test("header injection and non-HTTP URLs are refused before any I/O")
    func refusesBadRequests() async throws {
        let client = CurlHTTPClient()
        defer { client.shutdown() }
        let injected = await #expect(throws: OutboundError.self) {
            try await client.execute(OutboundRequest(url: "http://127.0.0.1:1/", headers: ["X-A": "b\r\nX-Evil: 1"]))
        }
        #expect(injected?.kind == .invalidRequest)
        let file = await #expect(throws: OutboundError.self) {
            try await client.execute(OutboundRequest(url: "file:///etc/passwd"))
        }
        #expect(file?.kind == .invalidRequest)
    }

    @Test("publicOnly refuses the address it would connect to when it is loopback, by IP or by a name resolving to it; .any connects")
    func publicOnlyRefusesInternalAddresses() async throws {
        // Spelled out: a `try` only inside `#expect` does not make the closure throwing.
        try await LoopbackHTTPServer.with { server async throws in
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            // An unrestricted request leaves a kept-alive connection to the server in the pool:
            // a restricted one must not reuse it.
            #expect(try await client.execute(OutboundRequest(url: server.url("/hello"))).status == 200)
            for url in [server.url("/hello"), "http://localhost:\(server.port)/hello"] {
                var request = OutboundRequest(url: url)
                request.addresses = .publicOnly
                let refused = await #expect(throws: OutboundError.self) { try await client.execute(request) }
                #expect(refused?.kind == .connectFailed, "\(url)")
            }
            #expect(server.requestsSeen == 1)
            #expect(try await client.execute(OutboundRequest(url: server.url("/hello"))).status == 200)
        }
    }

    @Test("a request to any address on a handle a public-only request used keeps its connection out of the public-only ones")
    func publicOnlyConnectionsStayChecked() async throws {
        try await LoopbackHTTPServer.with { server async throws in
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            var restricted = OutboundRequest(url: server.url("/hello"))
            restricted.addresses = .publicOnly
            let first = await #expect(throws: OutboundError.self) { try await client.execute(restricted) }
            #expect(first?.kind == .connectFailed)
            // The next request takes the same easy handle back from the idle ones; its
            // kept-alive connection to the server must not be one a restricted request reuses.
            #expect(try await client.execute(OutboundRequest(url: server.url("/hello"))).status == 200)
            let second = await #expect(throws: OutboundError.self) { try await client.execute(restricted) }
            #expect(second?.kind == .connectFailed)
            #expect(server.requestsSeen == 1)
        }
    }

    @Test(
        "address classification: private, loopback, link-local, site-local, CGNAT, multicast and ULA addresses are not public, nor IPv6 addresses carrying such an IPv4 one (mapped, compatible, NAT64, 6to4), nor a network's own NAT64 prefix"
    )
    func addressClassification() {
        for inside in [
            [127, 0, 0, 1], [10, 1, 2, 3], [172, 16, 0, 1], [172, 31, 255, 255], [192, 168, 1, 1], [169, 254, 169, 254],
            [100, 64, 0, 1], [0, 0, 0, 0], [224, 0, 0, 1], [255, 255, 255, 255],
        ] as [[UInt8]] {
            #expect(!AddressPolicy.isPublic(ipv4: inside), "\(inside)")
        }
        for external in [[8, 8, 8, 8], [140, 82, 112, 3], [172, 32, 0, 1], [100, 128, 0, 1]] as [[UInt8]] {
            #expect(AddressPolicy.isPublic(ipv4: external), "\(external)")
        }
        let loopback6: [UInt8] = Array(repeating: 0, count: 15) + [1]
        let mappedLoopback: [UInt8] = Array(repeating: 0, count: 10) + [0xFF, 0xFF, 127, 0, 0, 1]
        let uniqueLocal: [UInt8] = [0xFD] + Array(repeating: 0, count: 14) + [1]
        let linkLocal: [UInt8] = [0xFE, 0x80] + Array(repeating: 0, count: 13) + [1]
        let compatibleLoopback: [UInt8] = Array(repeating: 0, count: 12) + [127, 0, 0, 1]
        let siteLocal: [UInt8] = [0xFE, 0xC0] + Array(repeating: 0, count: 13) + [1]
        let localTranslator: [UInt8] = [0x00, 0x64, 0xFF, 0x9B, 0x00, 0x01] + Array(repeating: 0, count: 6) + [8, 8, 8, 8]
        let privateSixToFour: [UInt8] = [0x20, 0x02, 10, 0, 0, 1] + Array(repeating: 0, count: 10)
        let privateNAT64: [UInt8] = [0x00, 0x64, 0xFF, 0x9B] + Array(repeating: 0, count: 8) + [192, 168, 0, 1]
        for inside in [
            loopback6, mappedLoopback, uniqueLocal, linkLocal, compatibleLoopback, siteLocal, localTranslator, privateSixToFour, privateNAT64,
        ] {
            #expect(!AddressPolicy.isPublic(ipv6: inside), "\(inside)")
        }
        let google: [UInt8] = [0x20, 0x01, 0x48, 0x60, 0x48, 0x60] + Array(repeating: 0, count: 8) + [0x88, 0x88]
        let publicSixToFour: [UInt8] = [0x20, 0x02, 8, 8, 8, 8] + Array(repeating: 0, count: 10)
        #expect(AddressPolicy.isPublic(ipv6: google))
        #expect(AddressPolicy.isPublic(ipv6: publicSixToFour))
    }
}

/// Requests served so far, shared by the callers of `requestsRacingShutdownEnd`.
private final class ServedCount: Sendable {
    let count = Atomic<Int>(0)
}
