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

    /// How many heads the handler reported too large to keep.
    final class LargeHeads: Sendable {
        private let count = Mutex(0)
        /// The reports so far.
        var reported: Int { count.withLock { $0 } }
        /// Records one report.
        @Sendable func record() { count.withLock { $0 += 1 } }
    }

    /// An active embedded channel with the handler.
    static func channel(_ refusals: Refusals = Refusals(), largeHeads: LargeHeads = LargeHeads()) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(handler: HTTP1Semantics(rejected: refusals.record, largeHead: largeHeads.record))
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

    @Test(
        "a head over 8 KB reaches Hummingbird with Connection: close, so its connection keeps no large head while idle, and is reported; one at 8 KB stays open; a large head whose client closes the connection anyway is not reported"
    )
    func largeHeadsClose() throws {
        let limit = HTTP1Semantics.keptHeadLimit
        func padding(_ count: Int) -> (String, String) { ("X-Pad", String(repeating: "a", count: count)) }
        // The target (9 bytes), the field's own cost and its value's 48 bytes of allocation.
        let atLimit = limit - 9 - HTTP1Semantics.fieldCost - 48
        for (count, size) in [(atLimit, limit), (atLimit + 1, limit + 1)] {
            let sent = HTTPRequestHead(version: .http1_1, method: .POST, uri: "/v1/token", headers: HTTPHeaders([padding(count)]))
            #expect(HTTP1Semantics.size(of: sent) == size)
        }
        // Whether the client would keep the connection open decides the report: a client that
        // closes it itself (HTTP/1.1 with Connection: close, HTTP/1.0 without keep-alive) is
        // not reported, an HTTP/1.0 client asking for keep-alive is.
        let cases: [(HTTPVersion, [(String, String)], closes: Bool, reported: Int)] = [
            (.http1_1, [padding(atLimit)], false, 0), (.http1_1, [padding(atLimit + 1)], true, 1),
            (.http1_1, [("Connection", "close"), padding(limit)], true, 0), (.http1_0, [padding(limit)], true, 0),
            (.http1_0, [("Connection", "keep-alive"), padding(limit)], true, 1),
        ]
        for (version, fields, closes, reported) in cases {
            let largeHeads = LargeHeads()
            let channel = try Self.channel(largeHeads: largeHeads)
            try channel.writeInbound(Self.head(version, fields))
            guard case .head(let head) = try channel.readInbound(as: HTTPServerRequestPart.self) else {
                Issue.record("no head")
                continue
            }
            let label = "\(version) \(fields.map { "\($0.0): \($0.1.count) bytes" })"
            #expect(head.headers["connection"] == (closes ? ["close"] : []), "\(label)")
            #expect(largeHeads.reported == reported, "\(label)")
            _ = try channel.finish()
        }
    }

    @Test(
        "many fields count as what keeping them costs: 100 short ones (under 1 KB on the wire) or 24 of 17-byte names and 16-byte values (1 KB) close the connection after the answer"
    )
    func manyFieldsClose() throws {
        let long = (0..<24).map { (String(format: "X-Custom-Field-%02d", $0), String(repeating: "v", count: 16)) }
        #expect(
            HTTP1Semantics.size(of: HTTPRequestHead(version: .http1_1, method: .GET, uri: "/", headers: HTTPHeaders(long)))
                > HTTP1Semantics.keptHeadLimit)
        let fields = (0..<100).map { ("a\($0)", "b") }
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

    /// Counts the reads that reach it from the handlers after it.
    final class ReadCounter: ChannelOutboundHandler, @unchecked Sendable {
        typealias OutboundIn = Any
        /// Reads passed on so far.
        var reads = 0
        func read(context: ChannelHandlerContext) {
            reads += 1
            context.read()
        }
    }

    /// The request parts passed on so far: `head`, each body part's text, `end`.
    static func forwarded(_ channel: EmbeddedChannel) throws -> [String] {
        var parts: [String] = []
        while let part = try channel.readInbound(as: HTTPServerRequestPart.self) {
            switch part {
            case .head: parts.append("head")
            case .body(let bytes): parts.append(String(buffer: bytes))
            case .end: parts.append("end")
            }
        }
        return parts
    }

    /// A request head over `keptHeadLimit`.
    static func largeHead(_ fields: [(String, String)] = []) -> HTTPServerRequestPart {
        head(.http1_1, [("X-Pad", String(repeating: "a", count: HTTP1Semantics.keptHeadLimit))] + fields)
    }

    @Test("after a whole request that closes the connection, pipelined requests and errors are dropped: one answer, nothing more read")
    func nothingAfterTheClosingRequest() throws {
        let refusals = Refusals()
        let counter = ReadCounter()
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([counter, HTTP1Semantics(rejected: refusals.record)])
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        try channel.writeInbound(Self.largeHead())
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        let readsBefore = counter.reads
        channel.read()
        #expect(counter.reads == readsBefore, "a read passed on after the closing request")
        try channel.writeInbound(Self.head(.http1_1, [("Expect", "100-continue"), ("Content-Length", "1")]))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        channel.pipeline.fireErrorCaught(HTTPParserError.invalidHeaderToken)
        // The closing request's answer: no `100 Continue` follows it for the request after it.
        try channel.writeOutbound(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .ok)))
        try channel.writeOutbound(HTTPServerResponsePart.end(nil))
        #expect(try Self.forwarded(channel) == ["head", "end"])
        #expect(try Self.writtenStatuses(channel) == [200])
        #expect(refusals.reported.isEmpty)
        _ = try channel.finish()
    }

    @Test("the body of a request that closes the connection still passes, and the connection stays open until its answer")
    func closingRequestBodyPasses() throws {
        let channel = try Self.channel()
        try channel.writeInbound(Self.largeHead([("Content-Length", "4")]))
        try channel.writeInbound(HTTPServerRequestPart.body(ByteBuffer(string: "ab")))
        try channel.writeInbound(HTTPServerRequestPart.body(ByteBuffer(string: "cd")))
        try channel.writeInbound(HTTPServerRequestPart.end(nil))
        #expect(try Self.forwarded(channel) == ["head", "ab", "cd", "end"])
        #expect(channel.isActive)
        _ = try channel.finish()
    }

    @Test("an answer that closes the connection before its request's body has come closes the connection once it is sent")
    func answeredBeforeItsBody() throws {
        let channel = try Self.channel()
        try channel.writeInbound(Self.largeHead([("Content-Length", "1048576")]))
        try channel.writeInbound(HTTPServerRequestPart.body(ByteBuffer(string: "ab")))
        try channel.writeOutbound(HTTPServerResponsePart.head(HTTPResponseHead(version: .http1_1, status: .notFound)))
        #expect(channel.isActive)
        try channel.writeOutbound(HTTPServerResponsePart.end(nil))
        channel.embeddedEventLoop.run()
        #expect(!channel.isActive)
        _ = try? channel.finish()
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
