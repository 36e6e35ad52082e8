import GatehouseCore
import Hummingbird
import Logging

/// The HTTP layer: Hummingbird routes over the core. It holds no state of its own.
public enum GatehouseServer {
    /// Builds the router and the route table (`demoPage` adds the page at `/`); `/metrics`
    /// renders `metrics`, which should be the one the gateway's core records into.
    public static func routes(for gatehouse: Gatehouse, metrics: ServerMetrics, demoPage: Bool) -> (Router<GatehouseRequestContext>, RouteTable) {
        routes(for: gatehouse, metrics: metrics, demoPage: demoPage, browser: BrowserPolicy(configuration: gatehouse.configuration))
    }

    static func routes(
        for gatehouse: Gatehouse, metrics: ServerMetrics, demoPage: Bool, browser: BrowserPolicy, drain: DrainSignal = DrainSignal()
    ) -> (Router<GatehouseRequestContext>, RouteTable) {
        let table = table(for: gatehouse, metrics: metrics, demoPage: demoPage, browser: browser, drain: drain)
        let router = Router(context: GatehouseRequestContext.self)
        table.register(on: router)
        return (router, table)
    }

    /// Every route of the gateway with its handler, not yet on a router.
    static func table(
        for gatehouse: Gatehouse, metrics: ServerMetrics, demoPage: Bool, browser: BrowserPolicy, drain: DrainSignal = DrainSignal()
    ) -> RouteTable {
        var table = RouteTable()
        OperationsRoutes(gatehouse: gatehouse, metrics: metrics, drain: drain).registerPublic(into: &table)
        AuthRoutes(gatehouse: gatehouse, browser: browser).register(into: &table)
        TokenRoutes(gatehouse: gatehouse, browser: browser).register(into: &table)
        MeRoutes(gatehouse: gatehouse, browser: browser).register(into: &table)
        ServiceRoutes(gatehouse: gatehouse, browser: browser).register(into: &table)
        ProviderAPIRoutes(gatehouse: gatehouse, browser: browser).register(into: &table)
        AdminWebhookRoutes(gatehouse: gatehouse, browser: browser).register(into: &table)
        AdminRoutes(gatehouse: gatehouse, browser: browser).register(into: &table)
        if let console = gatehouse.configuration.console {
            // The templates are part of the build: without them the build is broken, not the configuration.
            let views: ConsoleViews
            do { views = try ConsoleViews() } catch { preconditionFailure("the console's templates cannot be loaded: \(error)") }
            ConsoleRoutes(gatehouse: gatehouse, console: console, cookies: CookiePolicy(gatehouse.configuration), views: views, browser: browser)
                .register(into: &table)
        }
        if let page = gatehouse.configuration.apiReferencePage {
            APIReferencePage(html: page).register(into: &table)
        }
        if demoPage {
            DemoPage(providerIds: gatehouse.providers.ids).register(into: &table)
        }
        return table
    }

    /// The operations listener's router: `/healthz`, the detailed `/readyz` and `/metrics`,
    /// with request ids, security headers and problem documents like the public port's.
    static func operationsRouter(for assembly: GatewayAssembly, logger: Logger) -> Router<GatehouseRequestContext> {
        var table = RouteTable()
        OperationsRoutes(gatehouse: assembly.gatehouse, metrics: assembly.metrics, drain: assembly.drain).registerOperations(into: &table)
        let router = Router(context: GatehouseRequestContext.self)
        router.add(
            middleware: GatewayMiddleware(
                requestIDs: RequestIDAssignment(trustedProxies: BrowserPolicy(configuration: assembly.gatehouse.configuration).trustedProxies),
                accessLog: nil, browser: nil,
                problems: ProblemMapping(routes: table, storageHealth: assembly.gatehouse.storageHealth, logger: logger),
                credentials: nil))
        table.register(on: router)
        return router
    }

    /// The gateway listening on `host:port` (0: a port the kernel picks), assembled by
    /// `assemble` from the port it got; `onRunning` receives that port once it serves.
    /// With `operations`, the operations listener serves on that address too and reports its
    /// port to `onOperationsRunning`. Both listeners close a connection silent for `idleTimeout`.
    /// The public listener holds `maxConnections` open at most (by default what the descriptor
    /// limit leaves, `ConnectionLimit.fitting`), the operations listener `ConnectionLimit.operations`.
    public static func service(
        host: String, port: Int, operations: OperationsAddress? = nil, idleTimeout: Duration = GatewayService.defaultIdleTimeout,
        maxConnections: Int? = nil, logger: Logger,
        assemble: @escaping @Sendable (_ port: Int) async throws -> GatewayAssembly,
        onRunning: @escaping @Sendable (Int) async -> Void = { _ in }, onOperationsRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> GatewayService {
        GatewayService(
            host: host, port: port, operations: operations, idleTimeout: idleTimeout,
            maxConnections: maxConnections ?? defaultConnectionLimit(operations: operations), logger: logger, assemble: assemble,
            onRunning: onRunning, onOperationsRunning: onOperationsRunning)
    }

    /// The gateway over a core assembled beforehand (its configuration does not depend on the port).
    /// `startup` runs first, with the operations listener answering "not ready" meanwhile. The
    /// listeners' connection limits are those of the other `service`.
    public static func service(
        _ assembly: GatewayAssembly, host: String, port: Int, operations: OperationsAddress? = nil,
        idleTimeout: Duration = GatewayService.defaultIdleTimeout, maxConnections: Int? = nil, logger: Logger, startup: StartupGate? = nil,
        onRunning: @escaping @Sendable (Int) async -> Void = { _ in }, onOperationsRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> GatewayService {
        GatewayService(
            host: host, port: port, operations: operations, idleTimeout: idleTimeout,
            maxConnections: maxConnections ?? defaultConnectionLimit(operations: operations), logger: logger, startup: startup,
            assemble: { _ in assembly },
            onRunning: onRunning, onOperationsRunning: onOperationsRunning)
    }

    /// The public listener's limit when none is given: what `ConnectionLimit.fitting` leaves
    /// under the descriptor limit in force and the cgroup's memory limit, for libcurl's default
    /// 256 kept connections and no database pool.
    static func defaultConnectionLimit(operations: OperationsAddress?) -> Int {
        ConnectionLimit.fitting(
            descriptorLimit: ConnectionLimit.descriptorLimit, upstreamConnections: 256, databaseConnections: 0, operationsListener: operations != nil,
            memoryLimit: ConnectionLimit.memoryLimit())
    }

    /// The whole responder chain over an assembled core, outermost first: request id →
    /// access log and metrics → security headers → CORS → error mapping → credentials → routes.
    static func responder(for assembly: GatewayAssembly, logger: Logger) -> RouterResponder<GatehouseRequestContext> {
        router(for: assembly, logger: logger).buildResponder()
    }

    /// The router behind `responder(for:logger:)`: the whole chain, which tests and the
    /// allocation benchmarks drive in-process through Hummingbird's test client.
    public static func router(for assembly: GatewayAssembly, logger: Logger) -> Router<GatehouseRequestContext> {
        let browser = BrowserPolicy(configuration: assembly.gatehouse.configuration)
        // Hummingbird wraps each route in the middlewares present when it is added, and the
        // outer links need the finished route table: routes go on the router last.
        let table = table(
            for: assembly.gatehouse, metrics: assembly.metrics, demoPage: assembly.demoPage, browser: browser, drain: assembly.drain)
        let router = Router(context: GatehouseRequestContext.self)
        router.add(
            middleware: GatewayMiddleware(
                requestIDs: RequestIDAssignment(trustedProxies: browser.trustedProxies),
                accessLog: AccessLog(
                    routes: table, metrics: assembly.metrics, logger: logger, browser: browser,
                    logProbes: assembly.gatehouse.configuration.logProbes),
                browser: browser, problems: ProblemMapping(routes: table, storageHealth: assembly.gatehouse.storageHealth, logger: logger),
                credentials: CredentialReader(
                    sessions: assembly.gatehouse.sessions, serviceKeys: assembly.gatehouse.serviceKeys,
                    cookies: CookiePolicy(assembly.gatehouse.configuration), browser: browser)))
        table.register(on: router)
        return router
    }
}
