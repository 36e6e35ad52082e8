/// Settings of the libcurl client shared by every request it makes.
public struct CurlClientConfiguration: Sendable {
    /// A PEM file of trusted CA certificates; `nil` uses the system store.
    public var caBundlePath: String?
    /// How long establishing a connection (including TLS) may take.
    public var connectTimeout: Duration
    /// How long a whole request may take, body included.
    public var timeout: Duration
    /// The largest response body accepted; bigger transfers are aborted.
    public var maxResponseBytes: Int
    /// Connections kept in the multi handle's cache for reuse (`CURLMOPT_MAXCONNECTS`). A
    /// burst of more concurrent calls than this closes the surplus after each transfer, and
    /// the next burst pays a new connection (and TLS handshake) each: sized for a gateway
    /// proxying slow APIs to hundreds of callers at once. libcurl closes connections idle for
    /// two minutes.
    public var maxCachedConnections: Int
    /// Transfers in flight at most. Each holds a descriptor (two while it connects or resolves
    /// a name), so this bounds the sockets calls take: callers beyond it wait in line, and
    /// slow upstreams cannot take the descriptors the process needs for everything else.
    public var maxTransfers: Int
    /// Transfers waiting for one in flight to end, at most; a request beyond them fails at
    /// once as `overloaded`. A waiting transfer's total timeout runs while it waits.
    public var maxWaitingTransfers: Int
    /// Transfers of one `OutboundRequest.owner` in flight and waiting together, at most; one
    /// beyond fails at once as `ownerOverloaded`. Requests without an owner are not counted.
    public var maxTransfersPerOwner: Int
    /// `.high` transfers of one `OutboundRequest.share` in flight and waiting together, at
    /// most; one beyond fails at once as `overloaded`. `.normal` requests and requests without
    /// a share are not counted. Set below `maxTransfers` with two `reservedTransfers` or more,
    /// it also stops a share's `.high` transfers from starting once half of `reservedTransfers`
    /// of them run while `.normal` ones in flight and waiting would fill every other slot: its
    /// next wait while the other calls start past them.
    public var maxHighTransfersPerShare: Int
    /// Slots of `maxTransfers` only `.high` requests may take (at most `maxTransfers − 1`):
    /// `.normal` ones run in the rest, so that callers filling those with stalled calls cannot
    /// keep the gateway's own flows waiting. `.high` requests wait in lines of their own (one per
    /// share, served in order of arrival among the shares that may run one more), as many as
    /// `maxWaitingTransfers` together, served before the `.normal` one.
    public var reservedTransfers: Int
    /// Sent when a request carries no `User-Agent` (GitHub rejects requests without one).
    public var userAgent: String
    /// Bytes a streaming consumer may leave unread before libcurl is paused.
    public var streamBufferBytes: Int

    /// The defaults: system CA store, 5 s connect, 30 s total, 16 MiB cap, 256 cached
    /// connections, 1,024 transfers in flight and as many waiting, no limit per owner or
    /// share, none reserved.
    public init(
        caBundlePath: String? = nil,
        connectTimeout: Duration = .seconds(5),
        timeout: Duration = .seconds(30),
        maxResponseBytes: Int = 16 << 20,
        maxCachedConnections: Int = 256,
        maxTransfers: Int = 1024,
        maxWaitingTransfers: Int = 1024,
        maxTransfersPerOwner: Int = .max,
        maxHighTransfersPerShare: Int = .max,
        reservedTransfers: Int = 0,
        userAgent: String = "Gatehouse/0.1 libcurl",
        streamBufferBytes: Int = 256 << 10
    ) {
        self.caBundlePath = caBundlePath
        self.connectTimeout = connectTimeout
        self.timeout = timeout
        self.maxResponseBytes = maxResponseBytes
        self.maxCachedConnections = maxCachedConnections
        self.maxTransfers = max(1, maxTransfers)
        self.maxWaitingTransfers = max(0, maxWaitingTransfers)
        self.maxTransfersPerOwner = max(1, maxTransfersPerOwner)
        self.maxHighTransfersPerShare = max(1, maxHighTransfersPerShare)
        self.reservedTransfers = min(max(0, reservedTransfers), self.maxTransfers - 1)
        self.userAgent = userAgent
        self.streamBufferBytes = streamBufferBytes
    }
}

extension Duration {
    /// Whole milliseconds, rounded up so that a tiny positive timeout never becomes "none".
    var curlMilliseconds: Int {
        let (seconds, attoseconds) = components
        let millis = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        return Int(max(1, millis + (attoseconds % 1_000_000_000_000_000 > 0 ? 1 : 0)))
    }
}
