/// Which of the client's slots a call may take (`CurlClientConfiguration.reservedTransfers`).
///
/// Calls whose number or length a caller chooses (passthrough to any API path, photos from
/// hosts a profile names, webhook deliveries) are `.normal`: however many such calls stall,
/// the reserved slots stay free for the gateway's own flows, so sign-ins, refreshes, key
/// fetches and hooks still find one.
public enum OutboundPriority: Sendable, Hashable {
    /// Any slot but the reserved ones; waits behind every `.high` call that may start.
    case normal
    /// Any slot, the reserved ones included; waits in lines of its own (one per
    /// `OutboundRequest.share`), which are served first. While `.normal` calls in flight and
    /// waiting would fill every slot they may, a share running half of the reserved slots (two
    /// reserved at least) starts no more, and the other calls, `.normal` ones included, start
    /// past its waiting ones.
    case high
}
