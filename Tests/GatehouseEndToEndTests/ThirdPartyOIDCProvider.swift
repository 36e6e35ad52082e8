import CurlClient
import Foundation
import GatehouseTestSupport

/// `oidc-provider-mock` (PyPI), an OpenID Provider nobody on this project wrote, run as a
/// child process on a loopback port. `scripts/test` installs it in a Python ≥ 3.12 venv and
/// exports `GATEHOUSE_OIDC_PROVIDER_MOCK` with the path of its executable.
final class ThirdPartyOIDCProvider: Sendable {
    /// Its issuer, `http://127.0.0.1:<port>`.
    let issuer: String
    private let process: SpawnedProcess

    private init(issuer: String, process: SpawnedProcess) {
        self.issuer = issuer
        self.process = process
    }

    /// Starts the provider with one predefined user; throws (never skips) when it is not installed.
    static func start(userClaims: String, client: CurlHTTPClient) async throws -> ThirdPartyOIDCProvider {
        guard let path = ProcessInfo.processInfo.environment["GATEHOUSE_OIDC_PROVIDER_MOCK"], FileManager.default.isExecutableFile(atPath: path)
        else {
            throw FlowError(
                "GATEHOUSE_OIDC_PROVIDER_MOCK must name the oidc-provider-mock executable; run the suite with scripts/test, which installs it")
        }
        let port = try TestTools.freeStablePort()
        let process = try SpawnedProcess.start(
            path, ["--host", "127.0.0.1", "--port", String(port), "--require-nonce", "true", "--user-claims", userClaims])
        let provider = ThirdPartyOIDCProvider(issuer: "http://127.0.0.1:\(port)", process: process)
        // Bounded wait until discovery answers.
        for _ in 0..<300 {
            if (try? await client.execute(OutboundRequest(url: "\(provider.issuer)/.well-known/openid-configuration")))?.status == 200 {
                return provider
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        provider.stop()
        throw FlowError("oidc-provider-mock did not start on port \(port)")
    }

    /// Kills the child and waits for it.
    func stop() {
        process.stop()
    }
}
