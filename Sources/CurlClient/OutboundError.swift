/// Why an outbound request failed. Messages never carry the URL, headers or body,
/// so they are safe to log and to wrap in a problem document.
public struct OutboundError: Error, Sendable, CustomStringConvertible {
    /// The failure classes the gateway reacts to differently.
    public enum Kind: String, Sendable {
        /// The URL or an option was rejected before any I/O.
        case invalidRequest
        /// No connection could be made (refused, unreachable, DNS failure).
        case connectFailed
        /// The connect or total timeout elapsed.
        case timedOut
        /// The total timeout elapsed while the streamed request body was still being sent: its
        /// source was too slow, and nothing is known about the server.
        case requestBodyTimedOut
        /// TLS failed, including certificate verification.
        case tls
        /// The body exceeded the response-size cap; the transfer was aborted.
        case responseTooLarge
        /// The awaiting task was cancelled, or the client shut down.
        case cancelled
        /// The client already had as many transfers in flight and waiting as it allows
        /// (`CurlClientConfiguration.maxTransfers`, `maxWaitingTransfers`): nothing was sent,
        /// and the upstream is not to blame.
        case overloaded
        /// The request's owner already had `CurlClientConfiguration.maxTransfersPerOwner`
        /// transfers in flight and waiting: nothing was sent; the caller is to slow down.
        case ownerOverloaded
        /// A streamed request body was to be sent again (a retry) but was too large to keep.
        case bodyNotReplayable
        /// Any other transport failure.
        case transport
    }

    /// The failure class.
    public let kind: Kind
    /// libcurl's `CURLcode`, when libcurl reported the failure.
    public let curlCode: Int?
    /// A short description without any secret.
    public let message: String

    /// Creates an error.
    public init(kind: Kind, curlCode: Int? = nil, message: String) {
        self.kind = kind
        self.curlCode = curlCode
        self.message = message
    }

    /// `kind: message (curl code N)`.
    public var description: String {
        if let curlCode {
            return "\(kind.rawValue): \(message) (curl code \(curlCode))"
        }
        return "\(kind.rawValue): \(message)"
    }
}
