import CurlClient
import Foundation
import Testing

@testable import GatehouseCore

/// The entity tag a photo is served with: from the provider's validator when it sends one
/// (known at the head, the same for the streamed and the cached answer), else from the image's
/// bytes once they are whole, so a changed image never keeps the tag of the one before it.
@Suite("Photo tags")
struct PhotoTagTests {
    /// The photo an answer with `validator` headers and a PNG body of `fill` bytes downloads
    /// to: the head's tag and the whole photo's.
    static func download(validator: [String: String], fill: UInt8) async throws -> (head: String?, photo: String) {
        let listener = try SilentListener()
        defer { listener.close() }
        let http = CurlHTTPClient()
        defer { http.shutdown() }
        let body = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + [UInt8](repeating: fill, count: 56)
        let fields = validator.map { "\($0.key): \($0.value)\r\n" }.joined()
        let head = "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: \(body.count)\r\n\(fields)Connection: close\r\n\r\n"
        listener.answerOnce(Array(head.utf8) + body)
        let upstream = UpstreamHTTP(client: http, providerId: "microsoft.com", timeout: .seconds(30))
        let source = try #require(
            try await PhotoSource.open(OutboundRequest(url: "http://127.0.0.1:\(listener.port)/v1.0/me/photo/$value"), http: upstream))
        let download = PhotoDownload()
        async let photo = download.receive(source, providerId: "microsoft.com") { chunks, type, etag in
            ProfileService.Photo(bytes: chunks.flatMap { $0 }, contentType: type, etag: etag)
        }
        let tag = try await download.head().etag
        return (tag, try await photo.etag)
    }

    @Test("without a validator the tag comes from the bytes: a changed image of the same size and type gets a new one, the same image the same")
    func bytesMakeTheTagWithoutAValidator() async throws {
        let first = try await Self.download(validator: [:], fill: 0x41)
        let changed = try await Self.download(validator: [:], fill: 0x42)
        let same = try await Self.download(validator: [:], fill: 0x41)
        #expect(first.head == nil, "a streamed answer cannot know the bytes' tag: it sends none")
        #expect(first.photo != changed.photo)
        #expect(first.photo == same.photo)
    }

    @Test("with the provider's validator the tag is known at the head and is the cached photo's too; another validator, another tag")
    func validatorMakesTheTag() async throws {
        let tagged = try await Self.download(validator: ["ETag": "\"v1\""], fill: 0x41)
        #expect(tagged.head == tagged.photo)
        let retagged = try await Self.download(validator: ["ETag": "\"v2\""], fill: 0x41)
        #expect(retagged.photo != tagged.photo)
        let dated = try await Self.download(validator: ["Last-Modified": "Sun, 01 Nov 2026 08:00:00 GMT"], fill: 0x41)
        #expect(dated.head == dated.photo && dated.head != nil)
    }
}
