import Hummingbird
import Logging
import NIOCore

/// The provider emulator: GitHub (login + REST API) on one port, a path prefix per emulated
/// host, with seeded users and a control path for tests. It imports none of the gateway's
/// modules, so that a misunderstanding of a provider cannot hide on both sides.
public struct ProviderEmulator: Sendable {
    /// The fixed settings (registered clients, code lifetime).
    public let configuration: EmulatorConfiguration
    let state = EmulatorState()

    /// Creates an emulator with fresh state.
    public init(configuration: EmulatorConfiguration = .init()) {
        self.configuration = configuration
    }

    /// The router with every emulated endpoint and the control path.
    func buildRouter() -> Router<BasicRequestContext> {
        let router = Router()
        router.add(middleware: TrafficMiddleware(state: state))
        ControlRoutes(state: state).register(on: router)
        GitHubOAuthRoutes(state: state, configuration: configuration).register(on: router)
        GitHubAPIRoutes(state: state, configuration: configuration).register(on: router)
        router.get("/") { _, _ in
            Response.text(
                "Gatehouse provider emulator. GitHub: /github (github.com), /github-api (api.github.com). Control: /_emulator/users, /_emulator/stats.\n"
            )
        }
        return router
    }

    /// A Hummingbird application serving the emulator; `onRunning` receives the bound port.
    public func application(
        host: String = "127.0.0.1", port: Int = 0, logger: Logger,
        onRunning: @escaping @Sendable (Int) async -> Void = { _ in }
    ) -> some ApplicationProtocol {
        Application(
            router: buildRouter(),
            configuration: .init(address: .hostname(host, port: port), serverName: "gatehouse-emulator"),
            onServerRunning: { channel in await onRunning(channel.localAddress?.port ?? port) },
            logger: logger)
    }

    /// Every access token handed out so far; tests search logs and databases for them.
    public func issuedAccessTokens() async -> [String] {
        await state.issuedTokens()
    }
}
