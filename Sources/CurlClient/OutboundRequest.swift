/// One outbound HTTP request, as the gateway describes it to the libcurl client.
public struct OutboundRequest: Sendable {
    /// The request method, sent verbatim (`GET`, `POST`, `DELETE`, …).
    public var method: String
    /// The absolute `http`/`https` URL. Never logged: it may carry a token in its query.
    public var url: String
    /// Request header fields; `User-Agent` falls back to the client's configured one.
    public var headers: OutboundHeaders
    /// The request body, sent with an exact `Content-Length`.
    public var body: [UInt8]?
    /// A body sent while it is produced, with back-pressure (instead of `body`, which wins
    /// when both are set). A producer's failure is thrown as `OutboundBodyError`.
    public var upload: OutboundUpload?
    /// Overrides the client's total timeout for this request.
    public var timeout: Duration?
    /// Overrides the client's connect timeout for this request.
    public var connectTimeout: Duration?
    /// Overrides the client's response-size cap for this request.
    public var maxResponseBytes: Int?
    /// Which addresses the request may connect to, checked on the address libcurl actually
    /// connects to (after DNS resolution, so a name that rebinds to an internal address is
    /// refused too). Default: any.
    public var addresses: AddressPolicy = .any
    /// Sends the URL's path exactly as written: libcurl otherwise removes `.` and `..`
    /// segments before sending (RFC 3986 §5.2.4). For probing servers with such paths.
    public var pathAsIs = false
    /// Whose call this is (a user's id), when the client's `maxTransfersPerOwner` applies:
    /// one owner's calls in flight and waiting together stay within it, so that one caller's
    /// slow calls cannot take every slot. `nil`: no owner, only the client's limits apply.
    public var owner: String?
    /// Which upstream's flows the call belongs to (a provider's id), when the client's
    /// `maxHighTransfersPerShare` applies to it: one share's `.high` calls in flight and waiting
    /// together stay within it, so that a provider whose endpoints hang cannot take the slots
    /// every other provider's sign-ins and refreshes need. `nil`: not counted.
    public var share: String?
    /// Which slots the call may take: `.high` ones may use those the client reserves, and
    /// are started before any `.normal` one waiting.
    public var priority: OutboundPriority = .normal

    /// Creates a request; only the URL is required.
    public init(
        method: String = "GET",
        url: String,
        headers: OutboundHeaders = [:],
        body: [UInt8]? = nil,
        timeout: Duration? = nil,
        connectTimeout: Duration? = nil,
        maxResponseBytes: Int? = nil,
        upload: OutboundUpload? = nil
    ) {
        self.upload = upload
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.connectTimeout = connectTimeout
        self.maxResponseBytes = maxResponseBytes
    }
}
