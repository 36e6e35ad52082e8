import CurlClient
import Foundation
import Testing

@testable import GatehouseCore

/// A small provider answer is read whole outside the answer budget, so never past the length
/// it declared, even when it also says `Transfer-Encoding: chunked` (libcurl then reads the
/// chunks and ignores the length).
@Suite("Declared answer lengths")
struct DeclaredLengthTests {
    @Test(
        "a chunked body longer than its declared Content-Length fails as too large; an exact or shorter one is read whole",
        arguments: [(12, 40), (40, 40), (100, 40)])
    func declaredLengthBoundsTheRead(_ declared: Int, _ bodyBytes: Int) async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let http = CurlHTTPClient()
        defer { http.shutdown() }
        let body = [UInt8](repeating: 0x41, count: bodyBytes)
        let head =
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(declared)\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        listener.answerOnce(
            Array(head.utf8) + Array(String(body.count, radix: 16).utf8) + Array("\r\n".utf8) + body + Array("\r\n0\r\n\r\n".utf8))
        let upstream = UpstreamHTTP(client: http, providerId: "oidc.test", timeout: .seconds(30))
        let response = try await upstream.stream(OutboundRequest(url: "http://127.0.0.1:\(listener.port)/api"))
        do {
            let read = try await upstream.collect(response, declaredLength: declared)
            #expect(declared >= bodyBytes, "\(read.count) bytes read for \(declared) declared")
            #expect(read == body)
        } catch let error as GatehouseError {
            #expect(declared < bodyBytes, "\(error)")
            #expect(error.code == .upstreamUnavailable && error.situation == .tooLarge, "\(error)")
        }
    }

    @Test(
        "a provider's final answer must be a final status: an unsolicited 101 and the raw bytes after it are upstream-unavailable, never passed on",
        arguments: [
            "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\nraw bytes that are no HTTP body",
            "HTTP/1.1 101 Switching Protocols\r\nConnection: close\r\n\r\n",
        ])
    func informationalFinalAnswerIsRefused(_ answer: String) async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let http = CurlHTTPClient()
        defer { http.shutdown() }
        listener.answerOnce(Array(answer.utf8))
        let upstream = UpstreamHTTP(client: http, providerId: "oidc.test", timeout: .seconds(30))
        let error = await #expect(throws: GatehouseError.self) {
            _ = try await upstream.stream(OutboundRequest(url: "http://127.0.0.1:\(listener.port)/api"))
        }
        #expect(error?.code == .upstreamUnavailable, "\(String(describing: error))")
    }
}
