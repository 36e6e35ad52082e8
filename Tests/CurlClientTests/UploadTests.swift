import CurlClient
import GatehouseTestSupport
import Testing

/// Streamed request bodies (`OutboundRequest.upload`): libcurl's read callback fed from an
/// async sequence, over real HTTP to the loopback server.
@Suite("libcurl client: streamed request bodies")
struct UploadTests {
    /// The loopback server's checksum of a body.
    static func sum(_ bytes: [UInt8]) -> Int {
        bytes.reduce(0) { ($0 &* 31 &+ Int($1)) & 0xFFFF_FFFF }
    }

    /// `name=value` lines of the `/upload` answer.
    static func fields(_ response: OutboundResponse) -> [String: String] {
        var fields: [String: String] = [:]
        for line in response.bodyText.split(separator: "\n") {
            let parts = line.split(separator: "=", maxSplits: 1).map(String.init)
            if parts.count == 2 { fields[parts[0]] = parts[1] }
        }
        return fields
    }

    /// Waits (bounded: 10 s) until `condition` holds; false when it never did.
    static func eventually(_ condition: () -> Bool) async throws -> Bool {
        for _ in 0..<500 {
            if condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    @Test("a body of unknown length goes chunked and arrives whole; its first bytes reach the server before the rest is produced")
    func chunkedUploadStreams() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            let first = LoopbackHTTPServerPattern.bytes(64 << 10, seed: 1)
            let rest = (2...17).map { LoopbackHTTPServerPattern.bytes(64 << 10, seed: $0) }
            let (source, producer) = AsyncStream.makeStream(of: [UInt8].self)
            let upload = OutboundUpload(source)
            async let answer = client.execute(OutboundRequest(method: "PUT", url: server.url("/upload"), upload: upload))
            producer.yield(first)
            // Had the client gathered the body before sending, nothing would arrive now.
            let arrived = try await Self.eventually { server.bytesReceived >= first.count }
            for chunk in rest { producer.yield(chunk) }
            producer.finish()
            let response = try await answer
            #expect(arrived, "the first chunk never reached the server before the body ended")
            let fields = Self.fields(response)
            let all = first + rest.flatMap { $0 }
            #expect(response.status == 200)
            #expect(fields["count"] == String(all.count) && fields["sum"] == String(Self.sum(all)), "\(fields)")
            #expect(fields["framing"] == "chunked")
        }
    }

    @Test("a declared length is sent as Content-Length, and the same request with a kept body can be sent again")
    func declaredLengthAndReplay() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            let body = LoopbackHTTPServerPattern.bytes(40_000, seed: 3)
            let chunks = stride(from: 0, to: body.count, by: 7_000).map { Array(body[$0..<min($0 + 7_000, body.count)]) }
            let request = OutboundRequest(method: "POST", url: server.url("/upload"), upload: OutboundUpload(length: body.count, chunks.async))
            for _ in 1...2 {
                let fields = Self.fields(try await client.execute(request))
                #expect(fields["count"] == String(body.count) && fields["sum"] == String(Self.sum(body)), "\(fields)")
                #expect(fields["framing"] == "length=\(body.count)")
            }
            #expect(server.requestsSeen == 2)
        }
    }

    @Test("a body larger than its replay limit cannot be sent a second time, and the refusal comes before any I/O")
    func largeBodyIsNotReplayed() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            let body = LoopbackHTTPServerPattern.bytes(8_192, seed: 4)
            let upload = OutboundUpload(length: body.count, replayLimit: 4_096, [Array(body[..<4_096]), Array(body[4_096...])].async)
            let request = OutboundRequest(method: "POST", url: server.url("/upload"), upload: upload)
            let first = try await client.execute(request)
            #expect(Self.fields(first)["count"] == "8192")
            await #expect {
                _ = try await client.execute(request)
            } throws: { error in
                (error as? OutboundError)?.kind == .bodyNotReplayable
            }
            #expect(server.requestsSeen == 1 && server.connectionsAccepted == 1)
        }
    }

    @Test("a producer that fails aborts the transfer with its own error, and the client goes on working")
    func producerFailureAborts() async throws {
        struct BrokenBody: Error {}
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient()
            defer { client.shutdown() }
            let (source, producer) = AsyncThrowingStream.makeStream(of: [UInt8].self)
            async let answer = client.execute(OutboundRequest(method: "POST", url: server.url("/upload"), upload: OutboundUpload(source)))
            producer.yield(LoopbackHTTPServerPattern.bytes(16_384, seed: 5))
            _ = try await Self.eventually { server.bytesReceived >= 16_384 }
            producer.finish(throwing: BrokenBody())
            let outcome: Result<OutboundResponse, any Error>
            do { outcome = .success(try await answer) } catch { outcome = .failure(error) }
            guard case .failure(let error) = outcome else {
                Issue.record("the request succeeded with a broken body")
                return
            }
            #expect((error as? OutboundBodyError)?.underlying is BrokenBody, "\(error)")
            // The server never saw the request end, so it never answered it.
            #expect(server.requestsSeen == 0)
            #expect(try await client.execute(OutboundRequest(url: server.url("/hello"))).status == 200)
        }
    }
}

/// Deterministic bytes that differ from chunk to chunk.
enum LoopbackHTTPServerPattern {
    /// `count` bytes derived from `seed`.
    static func bytes(_ count: Int, seed: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: ($0 &* 7 &+ seed &* 13) % 253) }
    }
}
