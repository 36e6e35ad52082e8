import Foundation
import GatehouseCore
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization

/// What a gateway serves once its listener is bound: the assembled core and the metrics its
/// `/metrics` renders (the ones the core records into).
public struct GatewayAssembly: Sendable {
    /// The core the routes call.
    public let gatehouse: Gatehouse
    /// What `/metrics` renders.
    public let metrics: ServerMetrics
    /// Whether the demo page is served at `/`.
    public let demoPage: Bool
    /// Set once the instance is shutting down (`DrainingService`): `/readyz` answers `503`.
    public let drain: DrainSignal

    /// Pairs a core with its metrics.
    public init(gatehouse: Gatehouse, metrics: ServerMetrics, demoPage: Bool, drain: DrainSignal = DrainSignal()) {
        self.gatehouse = gatehouse
        self.metrics = metrics
        self.demoPage = demoPage
        self.drain = drain
    }
}

/// What runs before a gateway opens its public listener (the store's migration, which waits
/// for an unreachable database): the operations listener answers meanwhile — `/healthz` ok,
/// `/readyz` `503` with `state()`, `/metrics` — so probes and scrapers see why it is not ready.
public struct StartupGate: Sendable {
    /// Runs before the public listener opens; a throw stops the start.
    public let prepare: @Sendable () async throws -> Void
    /// Why the instance is not ready yet (`waiting for the database: …`).
    public let state: @Sendable () -> String
    /// What `/metrics` renders meanwhile (the assembled gateway's, later).
    public let metrics: ServerMetrics

    /// A gate.
    public init(prepare: @escaping @Sendable () async throws -> Void, state: @escaping @Sendable () -> String, metrics: ServerMetrics) {
        self.prepare = prepare
        self.state = state
        self.metrics = metrics
    }
}

/// The gateway as a `Service`: it binds its listener first and assembles the core only then,
/// from the port it actually got. A configuration that names the gateway's own URL (redirect
/// URIs, the ID-token issuer) can thus listen on port 0 without picking a port beforehand,
/// which would race every other server of the machine for it.
///
/// Connections that arrive while the core is assembled wait in the listen backlog (Hummingbird
/// handles none before `onServerRunning` returns). When assembly fails, `run()` throws that
/// error and the listener stops.
public struct GatewayService: Service {
    private let application: Application<AssembledResponder>
    private let operations: Application<OperationsResponder>?
    private let slot: AssembledResponder
    private let startup: StartupGate?

    /// How long a connection may stay silent before it is closed unless configured otherwise
    /// (`GATEHOUSE_IDLE_TIMEOUT`): nginx's keep-alive default, above the idle timeouts of common
    /// load balancers (60 s), so that the balancer, not the gateway, closes an idle connection
    /// first and never sends a request down a connection the gateway is closing.
    public static let defaultIdleTimeout: Duration = .seconds(75)

    init(
        host: String, port: Int, operations address: OperationsAddress?, idleTimeout: Duration, maxConnections: Int, logger: Logger,
        startup: StartupGate? = nil,
        assemble: @escaping @Sendable (Int) async throws -> GatewayAssembly, onRunning: @escaping @Sendable (Int) async -> Void,
        onOperationsRunning: @escaping @Sendable (Int) async -> Void
    ) {
        // Hummingbird closes a connection when no whole request head, body part or end has
        // come for this long and no answer is being prepared or written: between requests,
        // before the first head is whole, and when a body stops. SlowClientDeadlines closes
        // what that lets through: a body that trickles, an answer its client stops reading,
        // and a connection whose upgrade request stopped NIO's parser.
        let timeout = TimeAmount(idleTimeout)
        let listenerMetrics = ListenerMetrics(metrics: startup?.metrics)
        func server(_ listener: String) -> HTTPServerBuilder {
            GatewayHTTP1Channel.builder(
                configuration: .init(
                    additionalChannelHandlers: [SlowClientDeadlines(timeout: timeout) { listenerMetrics.cut(listener: listener, reason: $0) }],
                    idleTimeout: timeout),
                largeHead: { listenerMetrics.largeHead(listener: listener) }
            ) { error, requestID, peer in
                listenerMetrics.malformed(listener: listener)
                logger.info(
                    "request refused: not HTTP",
                    metadata: [
                        "request.id": "\(requestID)", "listener.role": "\(listener)", "http.error": "\(error)",
                        "client.address": "\(peer?.ipAddress ?? "unknown")",
                    ])
            }
        }
        let slot = AssembledResponder(logger: logger)
        self.slot = slot
        self.startup = startup
        operations = address.map { address in
            Application(
                responder: OperationsResponder(slot: slot, startup: startup), server: server("operations"),
                configuration: .init(address: .hostname(address.host, port: address.port), serverName: "Gatehouse"),
                onServerRunning: { channel in
                    await AcceptGate.install(
                        on: channel, role: "operations", limit: ConnectionLimit.operations, metrics: listenerMetrics, logger: logger)
                    await onOperationsRunning(channel.localAddress?.port ?? address.port)
                }, logger: logger)
        }
        application = Application(
            responder: slot, server: server("public"),
            configuration: .init(address: .hostname(host, port: port), serverName: "Gatehouse"),
            onServerRunning: { channel in
                await AcceptGate.install(on: channel, role: "public", limit: maxConnections, metrics: listenerMetrics, logger: logger)
                let bound = channel.localAddress?.port ?? port
                do {
                    let assembly = try await assemble(bound)
                    listenerMetrics.attach(assembly.metrics)
                    slot.install(assembly)
                    await onRunning(bound)
                } catch {
                    slot.fail(error)
                }
            },
            logger: logger)
    }

    /// Serves until graceful shutdown; throws when the core could not be assembled. The
    /// core's background work (`Gatehouse.run()`) runs beside the server and is cancelled
    /// once the server has stopped.
    public func run() async throws {
        enum Part { case server, operations, core, prepared }
        try await withThrowingTaskGroup(of: Part.self) { group in
            if let operations {
                group.addTask {
                    try await operations.run()
                    return .operations
                }
            }
            if let startup {
                // Side by side with the operations listener, so that its failing to bind stops
                // the start instead of waiting unseen; a shutdown while it waits (a database that
                // is not there) ends the start here.
                group.addTask {
                    try await cancelWhenGracefulShutdown { try await startup.prepare() }
                    return .prepared
                }
                do {
                    while let part = try await group.next(), part != .prepared {}
                } catch  where Task.isShuttingDownGracefully {
                    group.cancelAll()
                    return
                } catch {
                    slot.fail(error)
                    group.cancelAll()
                    throw error
                }
            }
            group.addTask {
                try await application.run()
                return .server
            }
            group.addTask {
                try await slot.assembled().run()
                return .core
            }
            // A failed assembly (or a bind error) throws out of the group, which cancels the
            // other part; the core's work ends only when cancelled.
            while let part = try await group.next() {
                if part == .server { group.cancelAll() }
            }
        }
    }
}

/// The responder of a `GatewayService`: empty until the core is assembled.
final class AssembledResponder: HTTPResponder, Sendable {
    typealias Context = GatehouseRequestContext

    /// The chain over the assembled core, once there is one (or why there never will be);
    /// waiting for it honours cancellation, so a listener that fails to bind cannot leave
    /// `GatewayService.run()` waiting forever.
    private let chain = Eventual<Chain>()
    /// The same chain once installed, read by every request: an atomic load, where reading
    /// it from `chain` takes a lock that the threads serving requests all contend for.
    private let installedChain = AtomicLazyReference<Chain>()
    /// The operations listener's chain over the same core.
    let operationsChain = Eventual<RouterResponder<GatehouseRequestContext>>()
    /// The assembled core, for its background work.
    private let core = Eventual<Gatehouse>()
    private let logger: Logger

    init(logger: Logger) { self.logger = logger }

    /// Installs the assembled core. `install` and `fail` are called at most once, and never
    /// both: the listener's `onServerRunning` calls one of them, and `GatewayService.run()`
    /// fails the slot only when the start fails before the listener runs.
    func install(_ assembly: GatewayAssembly) {
        let assembled = Chain(GatehouseServer.responder(for: assembly, logger: logger))
        _ = installedChain.storeIfNil(assembled)
        chain.set(assembled)
        operationsChain.set(GatehouseServer.operationsRouter(for: assembly, logger: logger).buildResponder())
        core.set(assembly.gatehouse)
        installed.withLock { $0 = true }
    }

    /// Fails every request, now and later, with the assembly's error.
    func fail(_ error: any Error) {
        chain.fail(error)
        operationsChain.fail(error)
        core.fail(error)
    }

    /// Whether the core is assembled (the operations routes answer from it).
    var isAssembled: Bool { installed.withLock { $0 } }
    private let installed = Mutex(false)

    /// The core, once assembled; throws its assembly error.
    func assembled() async throws -> Gatehouse {
        try await core.value()
    }

    /// Inlined into the witness Hummingbird calls, so a request holds one frame here rather
    /// than two (320 bytes against 528), kept by an idle connection's task (Performance.md).
    @inline(__always)
    func respond(to request: Request, context: GatehouseRequestContext) async throws -> Response {
        // No connection is handled before assembly ends (Hummingbird waits for
        // `onServerRunning`), so this returns at once; a failed assembly stops the server.
        // The chain runs in the connection's task, which keeps the stack slabs of its deepest
        // request while the connection is open. A child task per request would return them
        // (18.2 against 24.0 KB per idle keep-alive connection) for about 7.5 µs of CPU on every
        // request, a sixth of `/healthz` (Performance.md).
        let current: Chain
        if let ready = installedChain.load() { current = ready } else { current = try await chain.value() }
        return try await current.responder.respond(to: request, context: context)
    }

    /// The assembled chain, held by one reference.
    private final class Chain: Sendable {
        let responder: RouterResponder<GatehouseRequestContext>
        init(_ responder: RouterResponder<GatehouseRequestContext>) { self.responder = responder }
    }
}

/// The operations listener's responder: the assembled core's operations routes, once there is
/// a core (a probe that arrives before waits for it, as on the public port).
final class OperationsResponder: HTTPResponder, Sendable {
    typealias Context = GatehouseRequestContext
    private let slot: AssembledResponder
    private let startup: StartupGate?

    init(slot: AssembledResponder, startup: StartupGate?) {
        self.slot = slot
        self.startup = startup
    }

    func respond(to request: Request, context: GatehouseRequestContext) async throws -> Response {
        if let startup, !slot.isAssembled {
            return Self.starting(request, startup)
        }
        return try await slot.operationsChain.value().respond(to: request, context: context)
    }

    /// The answers before the core is assembled.
    static func starting(_ request: Request, _ startup: StartupGate) -> Response {
        func json(_ status: HTTPResponse.Status, _ object: [String: String]) -> Response {
            Response(
                status: status, headers: [.contentType: status == .ok ? "application/json" : "application/problem+json", .cacheControl: "no-store"],
                body: ResponseBody(byteBuffer: ByteBuffer(data: (try? JSONCoding.encoder().encode(object)) ?? Data())))
        }
        switch request.uri.path {
        case "/healthz": return json(.ok, ["status": "ok"])
        case "/metrics":
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: ResponseBody(byteBuffer: ByteBuffer(string: startup.metrics.exposition())))
        case "/readyz":
            return json(
                .serviceUnavailable,
                [
                    "type": "urn:gatehouse:problem:not-ready", "title": "Not ready", "code": "not-ready",
                    "detail": "The instance is starting: \(startup.state())",
                ])
        default: return json(.notFound, ["type": "urn:gatehouse:problem:not-found", "code": "not-found", "detail": "There is no such resource."])
        }
    }
}

/// Where the operations listener binds (`GATEHOUSE_OPS_ADDRESS`, default `127.0.0.1:9090`).
public struct OperationsAddress: Sendable, Equatable {
    /// The host to bind.
    public var host: String
    /// The port (0: the kernel picks).
    public var port: Int

    /// An address.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port` (`[::1]:9090` for IPv6); `nil` when malformed.
    public init?(parsing text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            return nil
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty, !host.contains(where: { $0 == " " || $0 == "/" }) else { return nil }
        self.init(host: host, port: port)
    }
}
