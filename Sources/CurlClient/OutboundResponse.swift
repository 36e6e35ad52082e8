/// The status line and header fields of a response, known before its body.
public struct OutboundResponseHead: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// The response header fields of the final response (interim 1xx responses are dropped).
    public var headers: OutboundHeaders
    /// The protocol version libcurl negotiated: `1.0`, `1.1`, `2` or `3`.
    public var httpVersion: String
}

/// A fully received response whose body stayed under the size cap.
public struct OutboundResponse: Sendable {
    /// The HTTP status code.
    public var status: Int
    /// The response header fields.
    public var headers: OutboundHeaders
    /// The protocol version libcurl negotiated.
    public var httpVersion: String
    /// The response body.
    public var body: [UInt8]

    /// Creates a response from its head and collected body.
    public init(head: OutboundResponseHead, body: [UInt8]) {
        self.status = head.status
        self.headers = head.headers
        self.httpVersion = head.httpVersion
        self.body = body
    }

    /// The body decoded as UTF-8 (invalid sequences repaired).
    public var bodyText: String { String(decoding: body, as: UTF8.self) }
}

/// A response whose body arrives as it is received, with back-pressure: libcurl is
/// paused while the consumer has more than the configured buffer unread.
public struct OutboundStreamingResponse: Sendable {
    /// The status line and header fields.
    public let head: OutboundResponseHead
    /// The body, in chunks. Dropping it before the end cancels the transfer.
    public let body: ResponseBody

    /// Reads the whole remaining body into memory (the size cap still applies).
    public func collect() async throws -> OutboundResponse {
        var bytes: [UInt8] = []
        for try await chunk in body {
            bytes.append(contentsOf: chunk)
        }
        return OutboundResponse(head: head, body: bytes)
    }
}
