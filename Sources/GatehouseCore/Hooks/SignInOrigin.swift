import Foundation

/// Where a sign-in comes from, as the hooks are told it: the client, the flow, the app's
/// return and the provider's ID token claims. Built by the flow that completes the sign-in.
public struct SignInOrigin: Sendable {
    /// The client completing the sign-in.
    public var client: SignInClient
    /// How the sign-in reached the gateway.
    public var flow: SignInFlow
    /// The origin of the flow's `return_to` (`https://app.example.com`, `com.example.app:`).
    public var returnToOrigin: String?
    /// `web` or `native`, where the flow says.
    public var platform: String?
    /// The claims of the provider's ID token, where it sent one.
    public var idTokenClaims: [String: JSONValue]?
    /// When the user last authenticated at the provider, where its ID token says
    /// (`SignInService.authenticationTime`); the session's `authenticatedAt`. `nil`: at the sign-in.
    public var authenticatedAt: Date?

    /// An origin; `returnTo` and `native` only for the redirect flow.
    public init(
        client: SignInClient, flow: SignInFlow, returnTo: String? = nil, native: Bool? = nil, idTokenClaims: [String: JSONValue]? = nil,
        authenticatedAt: Date? = nil
    ) {
        self.authenticatedAt = authenticatedAt
        self.client = client
        self.flow = flow
        self.returnToOrigin = returnTo.flatMap(Self.origin)
        self.platform = native.map { $0 ? "native" : "web" }
        self.idTokenClaims = idTokenClaims
    }

    /// `scheme://host[:port]` of a URL, or `scheme:` of an app's private-use scheme.
    static func origin(of url: String) -> String? {
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased() else { return nil }
        guard let host = components.host, !host.isEmpty else { return "\(scheme):" }
        let port = components.port.map { ":\($0)" } ?? ""
        return "\(scheme)://\(host.lowercased())\(port)"
    }
}
