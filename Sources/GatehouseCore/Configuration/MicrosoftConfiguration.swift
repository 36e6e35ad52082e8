/// Microsoft sign-in (Entra ID work accounts and personal accounts) with Graph profiles.
public struct MicrosoftConfiguration: Sendable {
    /// The app's client id (a GUID).
    public var clientID: String
    /// The client secret. Never logged.
    public var clientSecret: String
    /// The default tenant: `common`, `organizations`, `consumers`, a GUID or a domain.
    public var tenant: String
    /// Tenant GUIDs whose accounts may sign in; empty = any. Kept lower-cased (tokens' `tid`
    /// are), however they are set.
    public var allowedTenants: Set<String> {
        didSet {
            if allowedTenants.contains(where: { $0 != $0.lowercased() }) { allowedTenants = Set(allowedTenants.map { $0.lowercased() }) }
        }
    }
    /// `https://login.microsoftonline.com` in production.
    public var loginBaseURL: String
    /// `https://graph.microsoft.com` in production.
    public var graphBaseURL: String
    /// Scopes requested on every sign-in (design: `openid profile email offline_access User.Read`).
    public var defaultScopes: [String]

    /// Creates a configuration; endpoints default to the real Microsoft.
    public init(
        clientID: String, clientSecret: String, tenant: String = "common", allowedTenants: Set<String> = [],
        loginBaseURL: String = "https://login.microsoftonline.com", graphBaseURL: String = "https://graph.microsoft.com",
        defaultScopes: [String] = ["openid", "profile", "email", "offline_access", "User.Read"]
    ) {
        self.clientID = clientID
        self.clientSecret = clientSecret
        self.tenant = tenant
        self.allowedTenants = Set(allowedTenants.map { $0.lowercased() })
        self.loginBaseURL = loginBaseURL
        self.graphBaseURL = graphBaseURL
        self.defaultScopes = defaultScopes
    }

    /// Whether the configured tenant restricts sign-ins to itself (a GUID or a domain), rather
    /// than naming an audience (`common`, `organizations`, `consumers`).
    public var restrictsTenant: Bool { !MicrosoftTenants.audiences.contains(tenant.lowercased()) }

    /// The tenants `tenant=` may name and sign-ins may come from when the configuration
    /// restricts them: the configured tenant and the allow-list. Empty: no restriction.
    public var permittedTenants: Set<String> {
        restrictsTenant ? allowedTenants.union([tenant.lowercased()]) : allowedTenants
    }

    /// The provider emulator's Microsoft at `baseURL`.
    public static func emulator(baseURL: String, clientID: String, clientSecret: String, tenant: String = "common") -> Self {
        Self(
            clientID: clientID, clientSecret: clientSecret, tenant: tenant, loginBaseURL: "\(baseURL)/microsoft",
            graphBaseURL: "\(baseURL)/graph")
    }
}
