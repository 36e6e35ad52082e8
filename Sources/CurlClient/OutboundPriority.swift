/// Which of the client's slots a call may take (`CurlClientConfiguration.reservedTransfers`).
///
/// Calls whose number or length a caller chooses (passthrough to any API path, photos from
/// hosts a profile names, webhook deliveries) are `.normal`: however many such calls stall,
/// the reserved slots stay free for the gateway's own flows, so sign-ins, refreshes, key
/// fetches and hooks still find one.
public enum OutboundPriority: Sendable, Hashable {
    /// Any slot but the reserved ones; waits behind every `.high` call.
    case normal
    /// Any slot, the reserved ones included; waits in a line of its own, which is served first.
    case high
}
