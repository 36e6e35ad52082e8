import Foundation
import NIOCore
import NIOEmbedded
import NIOHTTP1
import Synchronization
import Testing

@testable import GatehouseServer

/// `HTTP1Semantics` on NIO's embedded channel, fed the decoder's parts and errors directly:
/// the bookkeeping the end-to-end tests cannot reach (several pipelined requests, errors at
/// the end of the stream, bytes after a request that closes its connection).
@Suite("HTTP/1 semantics handler")
struct HTTP1SemanticsHandlerTests {
    /// The refusals the handler reported.
    final class Refusals: Sendable {
        private let errors = Mutex<[String]>([])
        /// What was reported so far.
        var reported: [String] { errors.withLock { $0 } }
        /// Records one refusal.
        @Sendable func record(_ error: HTTPParserError, _ id: String, _ peer: SocketAddress?) { errors.withLock { $0.append("\(error)") } }
    }

    /// An active embedded channel with the handler.
    static func channel(_ refusals: Refusals = Refusals()) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(handler: HTTP1Semantics(rejected: refusals.record))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return channel
    }

    /// A request head.
    static func head(_ version: HTTPVersion = .http1_1, _ fields: [(String, String)] = []) -> HTTPServerRequestPart {
        .head(HTTPRequestHead(version: version, method: .POST, uri: "/v1/token", headers: HTTPHeaders(fields)))
    }

    /// The statuses of the answer heads written so far.
    static func writtenStatuses(_ channel: EmbeddedChannel) throws -> [UInt] {
        var statuses: [UInt] = []
        while let part = try channel.readOutbound(as: HTTPServerResponsePart.self) {
            if case .head(let head) = part { statuses.append(head.status.code) }
        }
        return statuses
    }

    @Test("100 Continue behind two pipelined requests: written after the second one's answer ends, not the first's")
    func continueBehindTwoAnswers() throws {
        let channel = try Self.channel()
        try channel.writeInbound(Self.head())
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        try channel.writeInbound(Self.head())
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        try channel.writeInbound(Self.head(.http1_1, [("Expect", "100-Continue"), ("Content-Length", "2")]))
        #expect(try Self.writtenStatuses(channel).isEmpty)
        for expected in [[200], [200, 100]] {
            try channel.writeOutbound(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok)))
            try channel.writeOutbound(HTTPServerResponsePart.end(nil))
            #expect(try Self.writtenStatuses(channel) == expected.map(UInt.init))
        }
        _ = try channel.finish()
    }

    @Test("a connection that is not kept alive reaches Hummingbird with exactly Connection: close, repeated fields included")
    func notKeptAlive() throws {
        for (version, fields) in [
            (HTTPVersion.http1_0, [(String, String)]()), (.http1_1, [("Connection", "close"), ("Connection", "close")]),
            (.http1_1, [("Connection", "TE, Close")]),
        ] {
            let channel = try Self.channel()
            try channel.writeInbound(Self.head(version, fields))
            guard case .head(let head) = try channel.readInbound(as: HTTPServerRequestPart.self) else {
                Issue.record("no head")
                continue
            }
            #expect(head.headers["connection"] == ["close"], "\(version) \(fields)")
            _ = try channel.finish()
        }
    }

    @Test("a head over 8 KB reaches Hummingbird with Connection: close, so its connection keeps no large head while idle; one at 8 KB stays open")
    func largeHeadsClose() throws {
        let limit = HTTP1Semantics.keptHeadLimit
        // The target (`/v1/token`, 9 bytes) and each field's storage count too.
        let atLimit = limit - 9 - HTTP1Semantics.fieldCost - 5
        for (padding, closes) in [(atLimit, false), (atLimit + 1, true)] {
            let sent = HTTPRequestHead(
                version: .http1_1, method: .POST, uri: "/v1/token", headers: HTTPHeaders([("X-Pad", String(repeating: "a", count: padding))]))
            #expect(HTTP1Semantics.size(of: sent) == (closes ? limit + 1 : limit))
            let channel = try Self.channel()
            try channel.writeInbound(HTTPServerRequestPart.head(sent))
            guard case .head(let head) = try channel.readInbound(as: HTTPServerRequestPart.self) else {
                Issue.record("no head")
                continue
            }
            #expect(head.headers["connection"] == (closes ? ["close"] : []), "\(padding)")
            _ = try channel.finish()
        }
    }

    @Test("200 short fields, 1 KB on the wire, count as what keeping them costs: the connection closes after the answer")
    func manyFieldsClose() throws {
        let fields = (0..<200).map { ("a\($0)", "b") }
        let sent = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/", headers: HTTPHeaders(fields))
        #expect(HTTP1Semantics.size(of: sent) > HTTP1Semantics.keptHeadLimit)
        let channel = try Self.channel()
        try channel.writeInbound(HTTPServerRequestPart.head(sent))
        guard case .head(let head) = try channel.readInbound(as: HTTPServerRequestPart.self) else {
            Issue.record("no head")
            return
        }
        #expect(head.headers["connection"] == ["close"])
        _ = try channel.finish()
    }

    @Test("after a whole request that closes the connection, pipelined requests and errors are dropped: one answer, nothing more read")
    func nothingAfterTheClosingRequest() throws {
        let refusals = Refusals()
        let channel = try Self.channel(refusals)
        try channel.writeInbound(Self.head(.http1_1, [("X-Pad", String(repeating: "a", count: HTTP1Semantics.keptHeadLimit))]))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        try channel.writeInbound(Self.head(.http1_1, [("Expect", "100-continue"), ("Content-Length", "1")]))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        channel.pipeline.fireErrorCaught(HTTPParserError.invalidHeaderToken)
        var forwarded: [String] = []
        while let part = try channel.readInbound(as: HTTPServerRequestPart.self) {
            switch part {
            case .head: forwarded.append("head")
            case .body: forwarded.append("body")
            case .end: forwarded.append("end")
            }
        }
        #expect(forwarded == ["head", "end"])
        // No `100 Continue` and no `400` for what came after it.
        #expect(try Self.writtenStatuses(channel).isEmpty)
        #expect(refusals.reported.isEmpty)
        _ = try channel.finish()
    }

    @Test("the answer after which the connection closes carries Connection: close; a pipelined answer before it does not")
    func closingAnswerSaysSo() throws {
        let channel = try Self.channel()
        try channel.writeInbound(Self.head())
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        try channel.writeInbound(Self.head(.http1_1, [("Connection", "close")]))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        var connections: [[String]] = []
        for _ in 0..<2 {
            try channel.writeOutbound(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok)))
            try channel.writeOutbound(HTTPServerResponsePart.end(nil))
            while let part = try channel.readOutbound(as: HTTPServerResponsePart.self) {
                if case .head(let head) = part { connections.append(head.headers["connection"]) }
            }
        }
        #expect(connections == [[], ["close"]])
        _ = try channel.finish()
    }

    @Test("a head that is not HTTP is refused once, whatever errors follow, and the connection closes after the answer")
    func refusedOnce() throws {
        let refusals = Refusals()
        let channel = try Self.channel(refusals)
        channel.pipeline.fireErrorCaught(HTTPParserError.invalidHeaderToken)
        channel.pipeline.fireErrorCaught(HTTPParserError.invalidVersion)
        channel.pipeline.fireErrorCaught(ByteToMessageDecoderError.dataReceivedInErrorState(HTTPParserError.invalidVersion, ByteBuffer()))
        #expect(refusals.reported.count == 1)
        // Nothing went on to Hummingbird, which would answer again or close at once.
        #expect(throws: Never.self) { try channel.throwIfErrorCaught() }
        #expect(try Self.writtenStatuses(channel) == [400])
        #expect(!channel.isActive)
    }

    @Test(
        "a body that breaks after its request was answered: no second answer, the error goes no further, and the connection closes once the answer is written"
    )
    func brokenBodyAfterTheAnswer() throws {
        let refusals = Refusals()
        let channel = try Self.channel(refusals)
        try channel.writeInbound(Self.head(.http1_1, [("Transfer-Encoding", "chunked")]))
        // The route answered without reading the body (a 405, a 401).
        try channel.writeOutbound(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .methodNotAllowed)))
        try channel.writeOutbound(HTTPServerResponsePart.end(nil))
        #expect(channel.isActive)
        channel.pipeline.fireErrorCaught(HTTPParserError.invalidChunkSize)
        #expect(throws: Never.self) { try channel.throwIfErrorCaught() }
        #expect(try Self.writtenStatuses(channel) == [405])
        #expect(refusals.reported.isEmpty, "the head was HTTP")
        #expect(!channel.isActive)

        // While the route still reads the body, the error is the route's.
        let reading = try Self.channel(refusals)
        try reading.writeInbound(Self.head(.http1_1, [("Transfer-Encoding", "chunked")]))
        reading.pipeline.fireErrorCaught(HTTPParserError.invalidChunkSize)
        #expect(throws: HTTPParserError.self) { try reading.throwIfErrorCaught() }
        #expect(reading.isActive)
        _ = try reading.finish()
    }

    @Test("not refusals: the stream ending part-way through a head, and bytes after a request that closes its connection")
    func notRefusals() throws {
        let refusals = Refusals()
        let eof = try Self.channel(refusals)
        eof.pipeline.fireErrorCaught(HTTPParserError.invalidEOFState)
        #expect(throws: HTTPParserError.self) { try eof.throwIfErrorCaught() }
        let closing = try Self.channel(refusals)
        try closing.writeInbound(Self.head(.http1_0))
        try closing.writeInbound(HTTPServerRequestPart.end(nil))
        closing.pipeline.fireErrorCaught(HTTPParserError.closedConnection)
        try closing.throwIfErrorCaught()
        #expect(refusals.reported.isEmpty)
        #expect(try Self.writtenStatuses(eof).isEmpty && Self.writtenStatuses(closing).isEmpty)
        _ = try eof.finish()
        _ = try closing.finish()
    }
}
