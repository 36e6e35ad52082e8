import Foundation
import GatehouseClient
import GatehouseTestSupport
import Glibc
import Synchronization
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A gateway URL that answers with a redirect (a misconfigured proxy, a hostile network) gets
/// nothing from the client: no refresh token, no ID token, no result verifier elsewhere.
@Suite("GatehouseClient and redirects")
struct RedirectTests {
    @Test("a 307 or 302 from the gateway's URL is an unexpected answer, and the request is never sent where it points")
    func redirectsAreNotFollowed() async throws {
        let elsewhere = try ScriptedServer.answeringTokens()
        defer { elsewhere.stop() }
        for status in ["307 Temporary Redirect", "302 Found"] {
            // Whatever the redirect's body says (here a problem document that would end the
            // session), it is not the gateway's answer.
            let problem = #"{"type":"about:blank","title":"Invalid refresh token","status":400,"code":"invalid-refresh-token"}"#
            let gateway = try ScriptedServer(
                answer:
                    "HTTP/1.1 \(status)\r\nLocation: http://127.0.0.1:\(elsewhere.port)/v1/token\r\nContent-Type: application/problem+json\r\nContent-Length: \(problem.utf8.count)\r\n\r\n\(problem)"
            )
            defer { gateway.stop() }
            let client = GatehouseClient(baseURL: try #require(URL(string: "http://127.0.0.1:\(gateway.port)")))
            let kept = Credentials(idToken: "eyJ.kept.sig", refreshToken: "kept-refresh-token", expiresAt: Date().addingTimeInterval(3600))
            await client.restore(kept)
            let code = Int(status.prefix(3)) ?? 0
            await #expect(throws: GatehouseClientError.unexpectedAnswer(status: code)) { try await client.refresh() }
            await #expect(throws: GatehouseClientError.unexpectedAnswer(status: code)) { try await client.me() }
            await #expect(throws: GatehouseClientError.unexpectedAnswer(status: code)) {
                try await client.redeem(resultID: "result", verifier: "result-verifier")
            }
            let asked = gateway.requests()
            #expect(asked.count == 3, "\(asked)")
            let credentials = await client.credentials
            #expect(credentials == kept, "a redirect is not a dead refresh token: the credentials stay")
        }
        let reached = elsewhere.requests()
        #expect(reached.isEmpty, "followed to \(reached)")
    }

    @Test("a session with a delegate of its own (certificate pinning) is used as it is: its delegate is asked about the redirect")
    func ownDelegateIsKept() async throws {
        let gateway = try ScriptedServer(
            answer: "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:9/v1/token\r\nContent-Length: 0\r\n\r\n")
        defer { gateway.stop() }
        let delegate = CountingRedirects()
        let session = URLSession(configuration: .ephemeral, delegate: delegate, delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let client = GatehouseClient(baseURL: try #require(URL(string: "http://127.0.0.1:\(gateway.port)")), session: session)
        await client.restore(Credentials(idToken: "eyJ.kept.sig", refreshToken: "kept", expiresAt: Date().addingTimeInterval(3600)))
        await #expect(throws: GatehouseClientError.unexpectedAnswer(status: 307)) { try await client.me() }
        let asked = delegate.asked.withLock { $0 }
        #expect(asked == 1)
    }
}

extension RedirectTests {
    @Test("an app's session whose delegate follows a redirect: the answer from elsewhere is unexpected, and the credentials stay")
    func followedRedirectIsNotTaken() async throws {
        let elsewhere = try ScriptedServer.answeringTokens()
        defer { elsewhere.stop() }
        let gateway = try ScriptedServer(
            answer: "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://127.0.0.1:\(elsewhere.port)/v1/token\r\nContent-Length: 0\r\n\r\n")
        defer { gateway.stop() }
        let session = URLSession(configuration: .ephemeral, delegate: PinningOnly(), delegateQueue: nil)
        defer { session.finishTasksAndInvalidate() }
        let client = GatehouseClient(baseURL: try #require(URL(string: "http://127.0.0.1:\(gateway.port)")), session: session)
        let kept = Credentials(idToken: "eyJ.kept.sig", refreshToken: "kept-refresh-token", expiresAt: Date().addingTimeInterval(3600))
        await client.restore(kept)
        await #expect(throws: GatehouseClientError.unexpectedAnswer(status: 200)) { try await client.refresh() }
        let credentials = await client.credentials
        #expect(credentials == kept)
    }
}

/// A session delegate that answers nothing about redirects, as one written for certificate
/// pinning may: URLSession follows them.
private final class PinningOnly: NSObject, URLSessionTaskDelegate, Sendable {}

/// A session delegate that refuses redirects, as the client's documentation asks of an app's
/// own delegate, and counts them.
private final class CountingRedirects: NSObject, URLSessionTaskDelegate, Sendable {
    let asked = Mutex(0)

    func urlSession(
        _ session: URLSession, task: URLSessionTask, willPerformHTTPRedirection response: HTTPURLResponse, newRequest request: URLRequest,
        completionHandler: @escaping @Sendable (URLRequest?) -> Void
    ) {
        asked.withLock { $0 += 1 }
        completionHandler(nil)
    }
}

/// An HTTP/1.1 server on 127.0.0.1 that answers every request with `answer` (closing each
/// connection after it) and keeps the requests' heads and bodies, on a thread of its own.
private final class ScriptedServer: Sendable {
    let port: Int
    private let descriptor: Int32
    /// The requests received, and whether the listener is closed. Only the server's thread
    /// closes it, under this lock, so `stop` never shuts down a descriptor number reused since.
    private let state = Mutex<(requests: [String], closed: Bool)>(([], false))

    init(answer: String) throws {
        guard let (descriptor, port) = TestTools.bindLoopback(0), listen(descriptor, 16) == 0 else { throw POSIXError(.EADDRNOTAVAIL) }
        self.descriptor = descriptor
        self.port = port
        Thread.detachNewThread { [self] in
            defer {
                state.withLock {
                    $0.closed = true
                    _ = Glibc.close(descriptor)
                }
            }
            // Bounded: a test sends a few requests; `stop` ends the wait for the next.
            for _ in 0..<64 {
                let connection = accept(descriptor, nil, nil)
                guard connection >= 0 else { return }
                let request = Self.request(on: connection)
                state.withLock { $0.requests.append(request) }
                _ = Array(answer.utf8).withUnsafeBytes { write(connection, $0.baseAddress, $0.count) }
                _ = Glibc.close(connection)
            }
        }
    }

    /// A server elsewhere that answers every request with a token grant's answer: a redirect
    /// followed there would bring its tokens back.
    static func answeringTokens() throws -> ScriptedServer {
        let tokens = #"{"id_token":"eyJ.elsewhere.sig","refresh_token":"elsewhere","expires_in":3600}"#
        return try ScriptedServer(
            answer: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(tokens.utf8.count)\r\n\r\n\(tokens)")
    }

    /// The requests received so far, each as its text.
    func requests() -> [String] { state.withLock { $0.requests } }

    /// Stops accepting: the waiting `accept` returns, and the server's thread closes the listener.
    func stop() {
        state.withLock { if !$0.closed { _ = shutdown(descriptor, Int32(SHUT_RDWR)) } }
    }

    /// A request's head and as much of its body as `Content-Length` gives (64 KB at most).
    private static func request(on connection: Int32) -> String {
        var timeout = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 65_536 {
            if let end = bytes.firstRange(of: Array("\r\n\r\n".utf8)) {
                let head = String(decoding: bytes[..<end.lowerBound], as: UTF8.self).lowercased()
                let length =
                    head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                if bytes.count >= end.upperBound + length { break }
            }
            let count = read(connection, &buffer, buffer.count)
            guard count > 0 else { break }
            bytes += buffer.prefix(count)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
