import CurlClient

/// A passthrough call as the HTTP layer received it, before the policy and the grant apply.
public struct ProviderAPIRequest: Sendable {
    /// The method.
    public var method: APIMethod
    /// The provider API path, parsed and checked.
    public var path: APIPath
    /// The raw query string (passed through as it is, after a sanity check), without `?`.
    public var query: String?
    /// The caller's header fields; only `forwardedHeaders` go on.
    public var headers: [(name: String, value: String)]
    /// The request body, streamed to the provider as the caller sends it (the HTTP layer
    /// enforces the policy's cap as it goes).
    public var body: OutboundUpload?

    /// Creates a call.
    public init(
        method: APIMethod, path: APIPath, query: String?, headers: [(name: String, value: String)] = [], body: OutboundUpload? = nil
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
    }

    /// The caller's headers that reach the provider (lower case): content negotiation,
    /// conditional requests and the providers' documented request options. Never
    /// `Authorization` or `Cookie`: the gateway authenticates with the stored grant.
    public static let forwardedHeaders: Set<String> = [
        "accept", "accept-language", "content-type", "if-match", "if-none-match", "if-modified-since", "if-unmodified-since", "prefer",
        "consistencylevel", "x-github-api-version",
    ]
}

/// A provider's answer to a passthrough call, as the caller gets it.
public struct ProviderAPIAnswer: Sendable {
    /// The provider's body: streamed as it arrives, or whole after its paging links were rewritten.
    public enum Body: Sendable {
        /// Chunks as libcurl receives them (within the policy's answer cap).
        case streaming(ResponseBody)
        /// The whole body.
        case whole([UInt8])
    }

    /// The provider's status.
    public var status: Int
    /// The provider's header fields that pass (`passedHeaders`), paging links rewritten.
    public var headers: [(name: String, value: String)]
    /// The body.
    public var body: Body
    /// The template that allowed the call (for the caller's logs).
    public var template: APITemplate
    /// The answer budget's hold on a body read whole: kept until the body is written, then let go.
    public var hold: ByteBudget.Hold? = nil

    /// The provider's headers that reach the caller (lower case): the representation's type
    /// and validators, retry and paging advice, and the providers' rate-limit and request-id
    /// headers. Nothing hop-by-hop, no `Set-Cookie`, no `Content-Length` or `Content-Encoding`
    /// (libcurl may have decoded the body; the gateway frames its own), and no caching
    /// advice (`Cache-Control`, `Expires`, `Vary`): the answer is one user's, at a URL that is
    /// the same for every user, so the gateway sets its own private policy.
    public static let passedHeaders: Set<String> = [
        "content-type", "content-language", "etag", "last-modified", "retry-after", "link",
        "preference-applied", "odata-version", "request-id", "client-request-id", "x-oauth-scopes", "x-accepted-oauth-scopes",
        "x-github-request-id", "x-github-media-type",
    ]

    /// Header prefixes that pass as well: the providers' rate-limit families.
    public static let passedHeaderPrefixes = ["x-ratelimit-", "ratelimit", "x-ms-ags-", "x-ms-throttle-"]

    /// Whether a provider header, by its name in lower case (`OutboundHeaders.lowercasedName`),
    /// reaches the caller.
    static func passes(lowercasedName name: String) -> Bool {
        passedHeaders.contains(name) || passedHeaderPrefixes.contains { name.utf8.starts(with: $0.utf8) }
    }
}

/// A provider access token handed to a service (`GET /v1/users/{uid}/providers/{id}/token`).
public struct HandedAccessToken: Sendable, Encodable {
    /// The provider's access token.
    public var accessToken: String
    /// When it expires (seconds since 1970), when the provider says.
    public var expiresAt: Int?
    /// The scopes granted.
    public var scopes: [String]
    /// `Bearer`.
    public var tokenType = "Bearer"
}
