import NIOCore
import NIOHTTP1
import NIOPosix
import Synchronization

/// A real HTTP/1.1 server on 127.0.0.1 for the client's tests. It counts accepted TCP
/// connections, which is how connection reuse is proven.
///
/// Routes: `/hello`, `/echo`, `/delay/{ms}`, `/hold` (never answers: the call ends only when the
/// client gives up on it, which makes a test's held call independent of how loaded the machine is), `/bytes/{n}` (with Content-Length),
/// `/chunked/{n}` (chunked, no length), `/trailers` (a chunked answer with trailer fields), `/trickle/{n}` (n bytes in 16 KiB writes, each after
/// the previous one left, so a client that stops reading holds the rest back), `/redirect`,
/// `/status/{code}`, `/upload` (answers `count=`, `sum=` and `framing=` of the request body
/// it received; every body byte any route receives is counted as it arrives: `bytesReceived`).
final class LoopbackHTTPServer: Sendable {
    let port: Int
    private let acceptedConnections: Counter
    private let requestCount: Counter
    private let requestTargets: Targets
    private let cutCount: Counter
    private let receivedCount: Counter
    private let hungUpCount: Counter
    private let channel: any Channel
    private let group: MultiThreadedEventLoopGroup

    /// The number of TCP connections accepted so far.
    var connectionsAccepted: Int { acceptedConnections.value }
    /// The number of requests answered (or started) so far.
    var requestsSeen: Int { requestCount.value }
    /// The request targets (path and query) seen so far, in the order they arrived.
    var targetsSeen: [String] { requestTargets.value }
    /// The number of `/trickle` answers the client cut short (a write failed before the last byte).
    var answersCut: Int { cutCount.value }
    /// Request-body bytes received so far, counted as they arrive (before a request ends).
    var bytesReceived: Int { receivedCount.value }
    /// Connections `/hang-up` has closed.
    var connectionsHungUp: Int { hungUpCount.value }

    /// Runs `body` with a server bound to a port the kernel picked, and stops the server
    /// afterwards, also when `body` throws: no test leaves one running.
    static func with<T>(_ body: (LoopbackHTTPServer) async throws -> T) async throws -> T {
        let server = try await start()
        let result: Result<T, any Error>
        do {
            result = .success(try await body(server))
        } catch {
            result = .failure(error)
        }
        try await server.stop()
        return try result.get()
    }

    private static func start() async throws -> LoopbackHTTPServer {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let accepted = Counter()
        let requests = Counter()
        let targets = Targets()
        let cut = Counter()
        let received = Counter()
        let hungUp = Counter()
        let channel = try await ServerBootstrap(group: group)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { channel in
                accepted.increment()
                return channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.configureHTTPServerPipeline()
                    try channel.pipeline.syncOperations.addHandler(
                        RouteHandler(requests: requests, targets: targets, cut: cut, received: received, hungUp: hungUp))
                }
            }
            .bind(host: "127.0.0.1", port: 0).get()
        return LoopbackHTTPServer(
            channel: channel, group: group, accepted: accepted, requests: requests, targets: targets, cut: cut, received: received,
            hungUp: hungUp)
    }

    private init(
        channel: any Channel, group: MultiThreadedEventLoopGroup, accepted: Counter, requests: Counter, targets: Targets, cut: Counter,
        received: Counter, hungUp: Counter
    ) {
        self.requestTargets = targets
        self.hungUpCount = hungUp
        self.receivedCount = received
        self.channel = channel
        self.group = group
        self.port = channel.localAddress?.port ?? 0
        self.acceptedConnections = accepted
        self.requestCount = requests
        self.cutCount = cut
    }

    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    private func stop() async throws {
        try await channel.close()
        try await group.shutdownGracefully()
    }
}

/// A thread-safe list of request targets.
final class Targets: Sendable {
    private let storage = Mutex<[String]>([])
    var value: [String] { storage.withLock { $0 } }
    func append(_ target: String) { storage.withLock { $0.append(target) } }
}

/// A thread-safe counter.
final class Counter: Sendable {
    private let storage = Mutex(0)
    var value: Int { storage.withLock { $0 } }
    func increment(by amount: Int = 1) { storage.withLock { $0 += amount } }
}

private final class RouteHandler: ChannelInboundHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias OutboundOut = HTTPServerResponsePart

    let requests: Counter
    let targets: Targets
    let cut: Counter
    let received: Counter
    let hungUp: Counter
    var head: HTTPRequestHead?
    var body: [UInt8] = []

    init(requests: Counter, targets: Targets, cut: Counter, received: Counter, hungUp: Counter) {
        self.requests = requests
        self.targets = targets
        self.cut = cut
        self.received = received
        self.hungUp = hungUp
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            self.head = head
            body = []
        case .body(var buffer):
            received.increment(by: buffer.readableBytes)
            body += buffer.readBytes(length: buffer.readableBytes) ?? []
        case .end:
            guard let head else { return }
            requests.increment()
            targets.append(head.uri)
            route(head, context: context)
        }
    }

    private func route(_ head: HTTPRequestHead, context: ChannelHandlerContext) {
        let parts = head.uri.split(separator: "?")[0].split(separator: "/").map(String.init)
        switch (parts.first ?? "", parts.count > 1 ? parts[1] : "") {
        case ("hello", _):
            send(context, head, status: .ok, headers: ["Content-Type": "application/json"], body: Array(#"{"hello":"world"}"#.utf8))
        case ("echo", _):
            var lines = ["method=\(head.method.rawValue)", "uri=\(head.uri)"]
            for (name, value) in head.headers { lines.append("header:\(name.lowercased())=\(value)") }
            lines.append("body=\(String(decoding: body, as: UTF8.self))")
            send(context, head, status: .ok, headers: ["Content-Type": "text/plain"], body: Array(lines.joined(separator: "\n").utf8))
        case ("delay", let ms):
            let loop = context.eventLoop.assumeIsolated()
            loop.scheduleTask(in: .milliseconds(Int64(ms) ?? 0)) {
                self.send(context, head, status: .ok, headers: [:], body: Array("late".utf8))
            }
        case ("hold", _):
            break
        case ("hang-up", let ms):
            // Answers as if the connection stayed open, then closes it while it sits idle.
            send(context, head, status: .ok, headers: [:], body: Array("bye".utf8))
            let loop = context.eventLoop.assumeIsolated()
            loop.scheduleTask(in: .milliseconds(Int64(ms) ?? 0)) {
                context.close().assumeIsolated().whenComplete { _ in self.hungUp.increment() }
            }
        case ("bytes", let count):
            send(context, head, status: .ok, headers: ["Content-Type": "application/octet-stream"], body: Self.pattern(Int(count) ?? 0))
        case ("chunked", let count):
            sendChunked(context, head, bytes: Self.pattern(Int(count) ?? 0))
        case ("trickle", let count):
            let head = HTTPResponseHead(version: head.version, status: .ok, headers: ["Content-Length": String(Int(count) ?? 0)])
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            trickle(context, remaining: Int(count) ?? 0)
        case ("upload", _):
            let framing =
                head.headers.contains(name: "Transfer-Encoding") ? "chunked" : "length=\(head.headers.first(name: "Content-Length") ?? "none")"
            let sum = body.reduce(0) { ($0 &* 31 &+ Int($1)) & 0xFFFF_FFFF }
            send(context, head, status: .ok, headers: [:], body: Array("count=\(body.count)\nsum=\(sum)\nframing=\(framing)".utf8))
        case ("trailers", _):
            // A chunked answer whose trailer block names fields the head has or a client acts on.
            let head = HTTPResponseHead(
                version: head.version, status: .ok, headers: ["Content-Type": "application/json", "Transfer-Encoding": "chunked"])
            context.write(wrapOutboundOut(.head(head)), promise: nil)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(string: #"{"ok":true}"#)))), promise: nil)
            let trailers: HTTPHeaders = ["Content-Type": "text/html", "X-Trailer": "yes", "X-RateLimit-Remaining": "0"]
            context.writeAndFlush(wrapOutboundOut(.end(trailers)), promise: nil)
        case ("redirect", _):
            send(context, head, status: .found, headers: ["Location": "/hello"], body: [])
        case ("status", let code):
            send(context, head, status: HTTPResponseStatus(statusCode: Int(code) ?? 500), headers: [:], body: [])
        default:
            send(context, head, status: .notFound, headers: [:], body: [])
        }
    }

    /// Deterministic bytes, so tests can check what arrived.
    static func pattern(_ count: Int) -> [UInt8] {
        (0..<count).map { UInt8(truncatingIfNeeded: $0 % 251) }
    }

    private func send(
        _ context: ChannelHandlerContext, _ request: HTTPRequestHead, status: HTTPResponseStatus, headers: [String: String], body: [UInt8]
    ) {
        var fields = HTTPHeaders(headers.map { ($0.key, $0.value) })
        fields.add(name: "Content-Length", value: String(body.count))
        let head = HTTPResponseHead(version: request.version, status: status, headers: fields)
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        if !body.isEmpty {
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: body)))), promise: nil)
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }

    /// Writes the next 16 KiB once the previous write has left; counts a failed write as a cut answer.
    private func trickle(_ context: ChannelHandlerContext, remaining: Int) {
        guard remaining > 0 else {
            context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
            return
        }
        let size = min(16_384, remaining)
        context.writeAndFlush(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(repeating: 0x61, count: size))))).assumeIsolated().whenComplete {
            switch $0 {
            case .success: self.trickle(context, remaining: remaining - size)
            case .failure: self.cut.increment()
            }
        }
    }

    private func sendChunked(_ context: ChannelHandlerContext, _ request: HTTPRequestHead, bytes: [UInt8]) {
        let head = HTTPResponseHead(version: request.version, status: .ok, headers: ["Transfer-Encoding": "chunked"])
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        var offset = 0
        while offset < bytes.count {
            let end = min(offset + 16_384, bytes.count)
            context.write(wrapOutboundOut(.body(.byteBuffer(ByteBuffer(bytes: bytes[offset..<end])))), promise: nil)
            offset = end
        }
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
    }
}
