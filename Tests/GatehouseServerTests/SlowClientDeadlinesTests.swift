import HTTPTypes
import NIOCore
import NIOEmbedded
import NIOHTTPTypes
import Synchronization
import Testing

@testable import GatehouseServer

/// `SlowClientDeadlines` on NIO's embedded channel, whose clock moves only when the test
/// advances it: every deadline is checked exactly, without waiting.
@Suite("Slow-client deadlines")
struct SlowClientDeadlinesTests {
    /// The reasons the handler gave for the connections it cut, in order.
    final class Cuts: Sendable {
        private let reasons = Mutex<[SlowClientDeadlines.Reason]>([])
        /// What was recorded so far.
        var recorded: [SlowClientDeadlines.Reason] { reasons.withLock { $0 } }
        /// Records one cut.
        @Sendable func record(_ reason: SlowClientDeadlines.Reason) { reasons.withLock { $0.append(reason) } }
    }

    /// An active embedded channel with the handler, deadlines of 10 s, its cuts told to `cuts`.
    static func channel(_ cuts: Cuts = Cuts()) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(handler: SlowClientDeadlines(timeout: .seconds(10), cut: cuts.record))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        return channel
    }

    /// A request head for `/v1/token`.
    static func head(_ method: HTTPRequest.Method = .post, _ fields: HTTPFields = [:]) -> HTTPRequestPart {
        .head(HTTPRequest(method: method, scheme: nil, authority: "gatehouse", path: "/v1/token", headerFields: fields))
    }

    /// A body part of `count` bytes.
    static func body(_ count: Int) -> HTTPRequestPart {
        .body(ByteBuffer(repeating: UInt8(ascii: "a"), count: count))
    }

    @Test("a request whose head and end come in one read: nothing closes its connection, however long it then waits")
    func wholeRequest() throws {
        let cuts = Cuts()
        let channel = try Self.channel(cuts)
        channel.pipeline.fireChannelRead(Self.head(.get))
        channel.pipeline.fireChannelRead(HTTPRequestPart.end(nil))
        channel.pipeline.fireChannelReadComplete()
        channel.embeddedEventLoop.advanceTime(by: .hours(1))
        #expect(channel.isActive)
        #expect(cuts.recorded.isEmpty)
        _ = try channel.finish()
    }

    @Test("a body of one byte every 9 s: closed when the timeout has passed since its head, not before")
    func trickledBody() throws {
        let cuts = Cuts()
        let channel = try Self.channel(cuts)
        try channel.writeInbound(Self.head())
        channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        try channel.writeInbound(Self.body(1))
        // 9 s after the head: open. Past 10 s: one byte earns less than a second, so closed.
        #expect(channel.isActive)
        #expect(cuts.recorded.isEmpty)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1_010))
        #expect(!channel.isActive)
        #expect(cuts.recorded == [.slowBody])
    }

    @Test("a body at 1,000 bytes a second for a minute, then its end: the connection stays open")
    func steadyBody() throws {
        let cuts = Cuts()
        let channel = try Self.channel(cuts)
        try channel.writeInbound(Self.head())
        for _ in 0..<120 {
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(500))
            try channel.writeInbound(Self.body(500))
        }
        try channel.writeInbound(HTTPRequestPart.end(nil))
        channel.embeddedEventLoop.advanceTime(by: .hours(1))
        #expect(channel.isActive)
        #expect(cuts.recorded.isEmpty)
        _ = try channel.finish()
    }

    @Test("a body fast at first and then a byte at a time lives on what it sent: 5,000 bytes buy 10 s")
    func bodyCredit() throws {
        let cuts = Cuts()
        let channel = try Self.channel(cuts)
        try channel.writeInbound(Self.head())
        try channel.writeInbound(Self.body(5_000))
        channel.embeddedEventLoop.advanceTime(by: .seconds(19))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .seconds(2))
        #expect(!channel.isActive)
        #expect(cuts.recorded == [.slowBody])
    }

    @Test("a channel unwritable for the timeout closes; one writable again before it does not")
    func unreadAnswer() throws {
        let cuts = Cuts()
        let channel = try Self.channel(cuts)
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        channel.embeddedEventLoop.advanceTime(by: .seconds(9))
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        channel.embeddedEventLoop.advanceTime(by: .seconds(60))
        #expect(channel.isActive)
        #expect(cuts.recorded.isEmpty)
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
        channel.embeddedEventLoop.advanceTime(by: .seconds(10))
        #expect(!channel.isActive)
        #expect(cuts.recorded == [.unreadAnswer])
    }

    @Test("an Upgrade or CONNECT request's connection closes once its answer's end is written; any other's stays")
    func upgradeClosesAfterAnswer() throws {
        for (method, fields, closes) in [
            (
                HTTPRequest.Method.get, HTTPFields([HTTPField(name: .upgrade, value: "websocket"), HTTPField(name: .connection, value: "Upgrade")]),
                true
            ),
            (.connect, HTTPFields(), true), (.get, HTTPFields(), false),
        ] {
            let cuts = Cuts()
            let channel = try Self.channel(cuts)
            try channel.writeInbound(Self.head(method, fields))
            try channel.writeInbound(HTTPRequestPart.end(nil))
            try channel.writeOutbound(HTTPResponsePart.head(HTTPResponse(status: .notFound)))
            #expect(channel.isActive)
            try channel.writeOutbound(HTTPResponsePart.end(nil))
            #expect(channel.isActive == !closes, "\(method) \(fields)")
            #expect(cuts.recorded == (closes ? [.upgrade] : []), "\(method) \(fields)")
        }
    }
}
