import CurlClient
import Foundation
import Testing

@testable import GatehouseCore

/// A photo answer whose body is not as long as its declared `Content-Length`: the callers'
/// answers declare that length, so such a body fails the download instead of reaching them.
@Suite("Photo framing")
struct PhotoFramingTests {
    /// A chunked PNG answer that also declares `declared` bytes (libcurl reads the chunks).
    static func answer(declared: Int, bodyBytes: Int) -> [UInt8] {
        let body = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + [UInt8](repeating: 0x41, count: bodyBytes - 8)
        let head =
            "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: \(declared)\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        return Array(head.utf8) + Array(String(body.count, radix: 16).utf8) + Array("\r\n".utf8) + body + Array("\r\n0\r\n\r\n".utf8)
    }

    @Test(
        "a body longer or shorter than the declared Content-Length fails the photo; an exact one passes", arguments: [(12, 40), (100, 40), (40, 40)])
    func declaredLengthIsKept(_ declared: Int, _ bodyBytes: Int) async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let http = CurlHTTPClient()
        defer { http.shutdown() }
        listener.answerOnce(Self.answer(declared: declared, bodyBytes: bodyBytes))
        let upstream = UpstreamHTTP(client: http, providerId: "oidc.test", timeout: .seconds(30))
        let source = try #require(try await PhotoSource.open(OutboundRequest(url: "http://127.0.0.1:\(listener.port)/photo"), http: upstream))
        #expect(source.contentLength == declared)
        let download = PhotoDownload()
        do {
            let photo = try await download.receive(source, providerId: "oidc.test") { chunks, type, etag in
                ProfileService.Photo(bytes: chunks.flatMap { $0 }, contentType: type, etag: etag)
            }
            #expect(declared == bodyBytes, "a \(photo.bytes.count)-byte photo passed for \(declared) declared")
        } catch let error as GatehouseError {
            #expect(declared != bodyBytes, "\(error)")
            #expect(error.code == .photoUnavailable)
        }
    }
}
