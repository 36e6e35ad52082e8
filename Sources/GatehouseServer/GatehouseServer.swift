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
        for gatehouse: Gatehouse, metrics: ServerMetrics, demoPage: Bool, browser: BrowserPolicy
    ) -> (Router<GatehouseRequestContext>, RouteTable) {
        let router = Router(context: GatehouseRequestContext.self)
        var table = RouteTable()
        OperationsRoutes(gatehouse: gatehouse, metrics: metrics).register(router, table: &table)
        AuthRoutes(gatehouse: gatehouse, browser: browser).register(router, table: &table)
        TokenRoutes(gatehouse: gatehouse, browser: browser).register(router, table: &table)
        MeRoutes(gatehouse: gatehouse, browser: browser).register(router, table: &table)
        ServiceRoutes(gatehouse: gatehouse).register(router, table: &table)
        if demoPage {
            DemoPage(providerIds: gatehouse.providers.ids).register(router, table: &table)
        }
        return (router, table)
    }

    /// The application serving the gateway on `host:port`; `onRunning` receives the bound port.
    public static func application(
        gatehouse: Gatehouse, metrics: ServerMetrics, host: String, port: Int, demoPage: Bool, logger: Logger,
        onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        let browser = BrowserPolicy(configuration: gatehouse.configuration)
        let (router, table) = routes(for: gatehouse, metrics: metrics, demoPage: demoPage, browser: browser)
        return Application(
            responder: ProblemResponder(inner: router.buildResponder(), routes: table, metrics: metrics, browser: browser, logger: logger),
            configuration: .init(address: .hostname(host, port: port), serverName: "Gatehouse"),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) },
            logger: logger)
    }
}
