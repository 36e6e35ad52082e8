import CurlClient
import Foundation
import Testing

/// TLS verification with a configurable CA bundle, and HTTP/2 when the server offers it,
/// against nghttpd (a real HTTP/2 server) on loopback.
@Suite("CurlHTTPClient over TLS", .serialized)
struct TLSAndHTTP2Tests {
    /// 2 MB of random bytes (a misplaced chunk cannot match), read and compared as `Data`:
    /// byte-wise work on it in a debug build costs seconds of CPU the suite's other tests need.
    static let payload: Data = {
        guard let random = FileHandle(forReadingAtPath: "/dev/urandom") else { return Data(count: 2_000_000) }
        defer { try? random.close() }
        return random.readData(ofLength: 2_000_000)
    }()

    @Test("HTTP/2 is negotiated and concurrent 2 MB downloads all complete intact, round after round")
    func http2WithTrustedCA() async throws {
        let server = try await TLSTestServer.start(files: ["hello.txt": Data("hello over h2\n".utf8), "big.bin": Self.payload])
        defer { server.stop() }
        let client = CurlHTTPClient(configuration: .init(caBundlePath: server.caBundlePath))
        defer { client.shutdown() }
        let response = try await client.execute(OutboundRequest(url: server.url("/hello.txt")))
        #expect(response.status == 200)
        #expect(response.httpVersion == "2")
        #expect(response.bodyText == "hello over h2\n")

        // Ten concurrent downloads, five times. With libcurl 7.88 multiplexing them over one
        // connection, a round left a stream stalled until its timeout more often than not
        // (CurlMultiDriver); every one must arrive whole, before a timeout that a loaded
        // machine's slowest healthy round stays far below.
        for _ in 0..<5 {
            let bodies = try await withThrowingTaskGroup(of: OutboundResponse.self) { group in
                for _ in 0..<10 {
                    group.addTask { try await client.execute(OutboundRequest(url: server.url("/big.bin"), timeout: .seconds(90))) }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(bodies.count == 10)
            let holds = bodies.allSatisfy { $0.httpVersion == "2" && Data($0.body) == Self.payload }
            #expect(holds)
        }
    }

    @Test("a server the CA bundle does not trust is refused as a TLS failure")
    func untrustedServerIsRefused() async throws {
        let server = try await TLSTestServer.start(files: ["hello.txt": Data("x".utf8)])
        defer { server.stop() }
        let client = CurlHTTPClient()  // the system store does not know the throwaway CA
        defer { client.shutdown() }
        do {
            _ = try await client.execute(OutboundRequest(url: server.url("/hello.txt")))
            Issue.record("an untrusted certificate was accepted")
        } catch let error as OutboundError {
            #expect(error.kind == .tls)
        }
    }

    @Test("a certificate for another host name is refused even when its CA is trusted")
    func hostNameMismatchIsRefused() async throws {
        let server = try await TLSTestServer.start(files: ["hello.txt": Data("x".utf8)])
        defer { server.stop() }
        let client = CurlHTTPClient(configuration: .init(caBundlePath: server.caBundlePath))
        defer { client.shutdown() }
        do {
            _ = try await client.execute(OutboundRequest(url: server.url("/hello.txt", host: "localhost")))
            Issue.record("a certificate for 127.0.0.1 was accepted for localhost")
        } catch let error as OutboundError {
            // TLS, not a connection failure: the handshake happened and the name check refused it.
            #expect(error.kind == .tls)
        }
    }

    @Test("a missing CA bundle file is an error, not a silent fallback to no verification")
    func missingCABundleFails() async throws {
        let server = try await TLSTestServer.start(files: ["hello.txt": Data("x".utf8)])
        defer { server.stop() }
        let client = CurlHTTPClient(configuration: .init(caBundlePath: "/nonexistent/ca.pem"))
        defer { client.shutdown() }
        await #expect(throws: OutboundError.self) {
            _ = try await client.execute(OutboundRequest(url: server.url("/hello.txt")))
        }
    }
}
