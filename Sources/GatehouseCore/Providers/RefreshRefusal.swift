import CurlClient
import Foundation
import Logging
import Synchronization

/// What a token endpoint's refusal of a refresh means, the same for every provider (RFC 6749
/// §5.2): only the grant's own death ends a link; the operator's mistakes and the provider's
/// troubles never do.
enum RefreshRefusal {
    /// The error codes that mean the grant is gone: RFC 6749's `invalid_grant` (Microsoft's
    /// too, whatever its AADSTS detail), GitHub's `bad_refresh_token` (providers.md §4.2) and
    /// Yahoo's `INVALID_REFRESH_TOKEN` (providers.md §3.3, "Failed to decode/encode refresh token").
    static let deadGrantCodes: Set<String> = ["invalid_grant", "bad_refresh_token", "invalid_refresh_token"]
    /// The codes that mean the gateway's own client registration is wrong: RFC 6749's, and
    /// GitHub's `incorrect_client_credentials` (providers.md §4.2).
    static let misconfigurationCodes: Set<String> = ["invalid_client", "unauthorized_client", "incorrect_client_credentials"]
    /// Whether a token endpoint's `code` says the gateway's client registration is wrong.
    static func misconfigures(_ code: String, tenantsRefuseClients: Bool) -> Bool {
        misconfigurationCodes.contains(code.lowercased()) && !(tenantsRefuseClients && code.lowercased() == "unauthorized_client")
    }
    /// The codes that mean the provider itself is failing (RFC 6749 §4.1.2.1's, which token
    /// endpoints use too): counted by the provider's breaker, like a 5xx.
    static let failureCodes: Set<String> = ["temporarily_unavailable", "server_error"]

    /// The error for a refresh answer that was not a token: `provider-reauth-required` for a
    /// dead grant, `provider-misconfigured` for a client the provider does not accept
    /// (recorded in `health`), `upstream-unavailable` for everything else, which leaves the grant
    /// for a later retry: the provider failing (a proxy's HTML page, `temporarily_unavailable`,
    /// a 5xx) counts against its breaker, another OAuth error refusing this grant does not.
    /// With `tenantsRefuseClients` (`OIDCProviderConfiguration`), `unauthorized_client` is the
    /// grant's tenant refusing the app: that grant's refusal, not the provider's.
    static func error(
        status: Int, body: [UInt8], headers: OutboundHeaders, providerId: String, health: ProviderHealth, tenantsRefuseClients: Bool = false
    ) -> GatehouseError {
        // A rate limit is one, whatever its body says: the caller waits for `Retry-After`.
        if status == 429 { return .upstreamRateLimited(providerId, retryAfter: headers["retry-after"].flatMap { Int($0) }) }
        let json = try? JSONValue.parse(Data(body))
        // Yahoo writes its codes in upper case.
        if let code = json?["error"]?.stringValue?.lowercased() {
            if deadGrantCodes.contains(code) { return .providerReauthRequired(providerId) }
            if misconfigures(code, tenantsRefuseClients: tenantsRefuseClients) {
                return health.misconfigured(
                    providerId, reason: "its token endpoint refused the gateway's client credentials (\(code.prefix(32)))")
            }
            if failureCodes.contains(code) || status >= 500 {
                return .upstreamUnavailable(
                    providerId, situation: .temporarilyUnavailable,
                    detail: "\(providerId) could not refresh the grant now (\(code.prefix(32))); retry later.")
            }
            // Any other code is the provider refusing this one grant's request: it answered,
            // so no breaker counts it, and one user's grant never stops everyone's calls.
            return .upstreamUnavailable(
                providerId, situation: .refusedByUpstream,
                detail: "\(providerId) refused to refresh the grant (\(code.prefix(32))); the grant is kept.")
        }
        return .upstreamUnavailable(
            providerId, situation: status >= 500 ? .temporarilyUnavailable : .usual,
            detail: "\(providerId) answered the refresh with HTTP \(status) and no OAuth error.")
    }
}

/// A provider's own health as the gateway last saw it: whether the provider refuses the
/// gateway's client credentials. Shown by `/readyz`, logged once when it starts, cleared by
/// the next token request that succeeds.
public final class ProviderHealth: Sendable {
    private let problem = Mutex<String?>(nil)
    private let logger: Logger?

    /// A healthy provider.
    init(logger: Logger? = nil) { self.logger = logger }

    /// What is wrong, for `/readyz`; `nil` when nothing is known to be.
    public var readinessProblem: String? { problem.withLock { $0 } }

    /// Records a refused client registration (logged loudly the first time) and returns the
    /// error every caller gets meanwhile: `provider-misconfigured`.
    func misconfigured(_ providerId: String, reason: String) -> GatehouseError {
        let message = "\(providerId) is misconfigured: \(reason). Users' grants are kept; fix the client id or secret."
        let first = problem.withLock { current in
            defer { current = message }
            return current != message
        }
        if first { logger?.error("provider misconfigured", metadata: ["provider.id": "\(providerId)", "reason": "\(reason)"]) }
        return GatehouseError(
            code: .providerMisconfigured, detail: message, extensions: ["providerId": providerId])
    }

    /// A token request succeeded: the registration works (again).
    func recovered() {
        problem.withLock { $0 = nil }
    }
}
