import Hummingbird
import Logging
import NIOCore

/// The provider emulator: GitHub (login + REST API), Microsoft (identity platform + Graph), a standard OpenID Provider and Yahoo on one port, a path prefix per emulated
/// host, with seeded users and a control path for tests. It imports none of the gateway's
/// modules, so that a misunderstanding of a provider cannot hide on both sides.
public struct ProviderEmulator: Sendable {
    /// The fixed settings (registered clients, code lifetime).
    public let configuration: EmulatorConfiguration
    let state = EmulatorState()
    let oidcState = OIDCState()
    let microsoftState = MicrosoftState()
    let keys = SigningKeys()
    let sampleAppCalls = SampleAppCalls()
    let sampleAppEvents = SampleAppEvents()

    /// Creates an emulator with fresh state.
    public init(configuration: EmulatorConfiguration = .init()) {
        self.configuration = configuration
    }

    /// The router with every emulated endpoint and the control path.
    func buildRouter() -> Router<BasicRequestContext> {
        let router = Router()
        router.add(middleware: TrafficMiddleware(state: state))
        ControlRoutes(state: state, oidcState: oidcState, microsoftState: microsoftState, keys: keys, configuration: configuration)
            .register(on: router)
        MicrosoftIdentityRoutes(
            clients: configuration.microsoftClients, state: microsoftState, tamper: oidcState, keys: keys, codeLifetime: configuration.codeLifetime
        ).register(on: router)
        let graph = GraphRoutes(state: microsoftState)
        graph.register(on: router)
        GraphDataRoutes(graph: graph).register(on: router)
        GraphDriveRoutes(graph: graph).register(on: router)
        GitHubOAuthRoutes(state: state, configuration: configuration).register(on: router)
        let github = GitHubAPIRoutes(state: state, configuration: configuration)
        github.register(on: router)
        GitHubRepoRoutes(api: github).register(on: router)
        FantasyRoutes(state: oidcState).register(on: router)
        SampleAppHooks(calls: sampleAppCalls).register(on: router)
        SampleAppWebhooks(received: sampleAppEvents).register(on: router)
        let events = sampleAppEvents
        router.delete("/_emulator/sample-app/webhooks") { _, _ in
            await events.clear()
            return Response(status: .noContent)
        }
        // The calls the sample app's hooks received: headers and raw body, as sent.
        let calls = sampleAppCalls
        router.get("/_emulator/sample-app/calls") { _, _ in
            Response.json(await calls.all().map { ["event": $0.event, "headers": $0.headers, "body": $0.body] })
        }
        router.delete("/_emulator/sample-app/calls") { _, _ in
            await calls.clear()
            return Response(status: .noContent)
        }
        for spec in OIDCIssuerSpec.all {
            OIDCRoutes(
                spec: spec, clients: configuration.oidcClients[spec.name] ?? [], state: oidcState, keys: keys,
                codeLifetime: configuration.codeLifetime
            ).register(on: router)
        }
        router.get("/") { _, _ in
            Response.text(
                "Gatehouse provider emulator. GitHub: /github (github.com), /github-api (api.github.com). OpenID Providers: /oidc (oidc.emulator), /yahoo (yahoo.com). Microsoft: /microsoft/{tenant} (login.microsoftonline.com), /graph (graph.microsoft.com). Yahoo Fantasy Sports: /yahoo-fantasy (fantasysports.yahooapis.com). A sample app's sign-in hooks: /sample-app/hooks/before-create, /sample-app/hooks/before-sign-in; its webhook receiver: /sample-app/webhooks. Control: /_emulator/users, /_emulator/stats.\n"
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
        await state.issuedTokens() + oidcState.issuedTokens() + microsoftState.issuedTokens()
    }
}
