import CurlClient
import Hummingbird

/// A request's body as byte chunks for an upload, ending in `413 Content Too Large` (the same
/// error `collectBody(upTo:)` throws) as soon as it passes `cap` bytes: a chunked body has no
/// length to check beforehand, so the cap is counted as the bytes go by.
struct CappedRequestBody: AsyncSequence, Sendable {
    typealias Element = [UInt8]

    /// The caller's body.
    let body: RequestBody
    /// The most bytes accepted.
    let cap: Int

    /// The caller's body as an upload: refused at once when its declared `Content-Length` is
    /// over `cap` (before anything is sent anywhere), else streamed with the cap counted.
    static func upload(_ request: Request, cap: Int) throws -> OutboundUpload {
        let declared = request.headers[.contentLength].flatMap { Int($0) }
        if let declared, declared > cap { throw HTTPError(.contentTooLarge) }
        return OutboundUpload(length: declared, CappedRequestBody(body: request.body, cap: cap))
    }

    func makeAsyncIterator() -> Iterator {
        Iterator(base: body.makeAsyncIterator(), cap: cap)
    }

    /// Reads the body's buffers, counting their bytes.
    struct Iterator: AsyncIteratorProtocol {
        var base: RequestBody.AsyncIterator
        let cap: Int
        var total = 0

        mutating func next() async throws -> [UInt8]? {
            guard let buffer = try await base.next() else { return nil }
            total += buffer.readableBytes
            if total > cap { throw HTTPError(.contentTooLarge) }
            return Array(buffer: buffer)
        }
    }
}
