import CurlClient

extension CurlClientConfiguration {
    /// The gateway's client for the limits its start chose: `calls` in flight and as many
    /// waiting in each line, `perUser` of one user's, `reserved` kept for the gateway's own
    /// flows, and half of the slots at most for one provider's (or the hooks') `.high` calls
    /// (`ConnectionLimit.upstreamCallsPerProvider`); `timeout` for a call that sets none.
    public init(
        upstreamCalls: (calls: Int, perUser: Int, reserved: Int), caBundlePath: String? = nil,
        maxCachedConnections: Int = CurlClientConfiguration().maxCachedConnections, timeout: Duration = CurlClientConfiguration().timeout
    ) {
        self.init(
            caBundlePath: caBundlePath, timeout: timeout, maxCachedConnections: maxCachedConnections, maxTransfers: upstreamCalls.calls,
            maxWaitingTransfers: upstreamCalls.calls, maxTransfersPerOwner: upstreamCalls.perUser,
            maxHighTransfersPerShare: ConnectionLimit.upstreamCallsPerProvider(of: upstreamCalls.calls),
            reservedTransfers: upstreamCalls.reserved)
    }
}
