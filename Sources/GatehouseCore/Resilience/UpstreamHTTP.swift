import CurlClient
import Foundation
import Logging

/// The libcurl client as one provider sees it: that provider's timeout on every request,
/// transport failures mapped to API errors, and every call counted by outcome.
///
/// Each provider gets its own value over the shared client, so a slow provider's timeout
/// never applies to another's calls (the transfers run side by side on the one multi handle).
public struct UpstreamHTTP: Sendable {
    /// The shared client.
    public let client: CurlHTTPClient
    /// The provider whose calls these are (the metric label and the errors' `providerId`).
    public let providerId: String
    /// The total time one call may take, unless the request sets its own.
    public let timeout: Duration
    /// Where each call's outcome is counted.
    let metrics: GatehouseMetrics
    /// The largest photo accepted from this provider (declared or received).
    public let maxPhotoBytes: Int
    /// Where photo fetches may connect.
    public let photoAddresses: AddressPolicy
    /// The photo hosts' breakers, shared by every provider.
    public let photoHosts: HostBreakers
    /// The total time of one fetch from a photo host (the provider's timeout unless set).
    public let photoTimeout: Duration
    /// Where failed calls are logged (with the request's id, which the HTTP layer's log handler adds).
    let logger: Logger
    /// The share of the client's slots this provider's calls count against
    /// (`OutboundRequest.share`), built once rather than for every call.
    let share: String

    /// Wraps `client` for `providerId`.
    public init(
        client: CurlHTTPClient, providerId: String, timeout: Duration, metrics: GatehouseMetrics = .disabled, maxPhotoBytes: Int = 5 << 20,
        photoAddresses: AddressPolicy = .publicOnly, photoHosts: HostBreakers = HostBreakers(), photoTimeout: Duration? = nil,
        logger: Logger = Logger(label: "gatehouse")
    ) {
        self.logger = logger
        self.photoTimeout = photoTimeout ?? timeout
        self.photoAddresses = photoAddresses
        self.photoHosts = photoHosts
        self.maxPhotoBytes = maxPhotoBytes
        self.client = client
        self.providerId = providerId
        share = "provider:" + providerId
        self.timeout = timeout
        self.metrics = metrics
    }

    /// Sends `request` and collects its body.
    func execute(_ request: OutboundRequest, endpoint: UpstreamEndpoint = .other) async throws -> OutboundResponse {
        try await collect(try await stream(request, endpoint: endpoint))
    }

    /// Sends `request` and returns at its response head; the body streams. A transport failure
    /// throws `upstream-unavailable` (a bad gateway, or a timeout). Each call is counted at its head.
    /// A failure of the request's streamed body (`OutboundBodyError`, or `bodyNotReplayable`)
    /// is the caller's, and is thrown as it is.
    func stream(_ request: OutboundRequest, endpoint: UpstreamEndpoint = .other) async throws -> OutboundStreamingResponse {
        var request = request
        if request.timeout == nil { request.timeout = timeout }
        // Its sign-ins' and refreshes' calls count against the provider's share of the slots
        // (`CurlClientConfiguration.maxHighTransfersPerShare`): a provider that hangs cannot
        // take the slots the others' need.
        if request.share == nil { request.share = share }
        let started = ContinuousClock.now
        let response: OutboundStreamingResponse
        do {
            response = try await client.stream(request)
        } catch let error as OutboundBodyError {
            // The caller's body failed, not the provider: its own error, nothing counted.
            throw error
        } catch let error as OutboundError where error.kind == .bodyNotReplayable {
            throw error
        } catch let error as OutboundError where [.requestBodyTimedOut, .overloaded, .ownerOverloaded].contains(error.kind) {
            // The caller's body was too slow (its `408`, not a provider timeout), or the gateway
            // had no room for the call (never sent): neither is a call to the provider.
            throw UpstreamErrors.transport(error, providerId: providerId)
        } catch {
            let timedOut = (error as? OutboundError)?.kind == .timedOut
            record(request, endpoint: endpoint, outcome: timedOut ? "timeout" : "transport-error", status: nil, since: started)
            throw UpstreamErrors.transport(error, providerId: providerId)
        }
        // An interim status as the final answer (an unsolicited `101 Switching Protocols`,
        // which libcurl ends the head with): what follows is no HTTP body, and relayed, a proxy
        // in front of the gateway could take those bytes for a response of its own. Dropped,
        // the transfer ends.
        guard response.head.status >= 200 else {
            record(request, endpoint: endpoint, outcome: "transport-error", status: response.head.status, since: started)
            throw GatehouseError.upstreamUnavailable(
                providerId, detail: "\(providerId) answered HTTP \(response.head.status), which is no final answer.")
        }
        record(request, endpoint: endpoint, outcome: Self.outcome(status: response.head.status), status: response.head.status, since: started)
        return response
    }

    /// The rest of a streamed response; a transport failure is mapped as in `stream`.
    func collect(_ response: OutboundStreamingResponse) async throws -> OutboundResponse {
        do {
            return try await response.collect()
        } catch {
            throw bodyFailure(error)
        }
    }

    /// The body of an answer that declared `declaredLength` bytes, whole: `upstream-unavailable`
    /// (too large) as soon as more arrive, since libcurl ignores the declared length of a chunked
    /// answer and a hostile provider sends both; a shorter body is what it is. A failure is
    /// mapped as in `stream`.
    func collect(_ response: OutboundStreamingResponse, declaredLength: Int) async throws -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(max(0, declaredLength))
        do {
            for try await chunk in response.body {
                guard bytes.count + chunk.count <= declaredLength else {
                    throw GatehouseError.upstreamUnavailable(
                        providerId, situation: .tooLarge, detail: "\(providerId) sent a longer answer than it declared.")
                }
                bytes.append(contentsOf: chunk)
            }
        } catch let error as GatehouseError {
            throw error
        } catch {
            throw bodyFailure(error)
        }
        return bytes
    }

    /// The body whole (within the transfer's own cap), each chunk first taken into `hold`, the
    /// array sized for a declared length of at most `cap`; `nil` as soon as a chunk does not fit
    /// (the transfer is cancelled when the response is dropped). A failure is mapped as in `stream`.
    func collect(_ response: OutboundStreamingResponse, holding hold: ByteBudget.Hold, cap: Int) async throws -> [UInt8]? {
        var bytes: [UInt8] = []
        // Sized once for a declared length (within the cap): grown by doubling, the array
        // would briefly take up to twice what the hold counts.
        if let declared = response.head.headers["content-length"].flatMap({ Int($0) }), declared > 0 { bytes.reserveCapacity(min(declared, cap)) }
        do {
            for try await chunk in response.body {
                guard hold.grow(by: chunk.count) else { return nil }
                bytes.append(contentsOf: chunk)
            }
        } catch {
            throw bodyFailure(error)
        }
        return bytes
    }

    /// The whole body of a streamed response when it has arrived already, without waiting
    /// (`ResponseBody.takeIfComplete`); a failure is mapped as in `stream`.
    func completedBody(_ response: OutboundStreamingResponse) throws -> [UInt8]? {
        do {
            return try response.body.takeIfComplete()
        } catch {
            throw bodyFailure(error)
        }
    }

    /// A body's failure as the caller's error: a request cancelled (the shutdown's deadline)
    /// is no failure of the provider.
    private func bodyFailure(_ error: any Error) -> any Error {
        if Task.isCancelled || (error as? OutboundError)?.kind == .cancelled { return CancellationError() }
        return UpstreamErrors.transport(error, providerId: providerId)
    }

    /// Counts a call; logs it unless it succeeded or the provider refused the caller's input
    /// (host and status only: paths and queries may carry identifiers).
    private func record(_ request: OutboundRequest, endpoint: UpstreamEndpoint, outcome: String, status: Int?, since started: ContinuousClock.Instant)
    {
        metrics.upstreamCall(providerId: providerId, endpoint: endpoint, outcome: outcome, duration: ContinuousClock.now - started)
        guard outcome != "ok", outcome != "client-error", outcome != "not-modified" else { return }
        var metadata: Logger.Metadata = [
            "provider.id": "\(providerId)", "upstream.host": "\(URLComponents(string: request.url)?.host ?? "?")", "upstream.outcome": "\(outcome)",
        ]
        if let status { metadata["upstream.status"] = .stringConvertible(status) }
        logger.notice("upstream call failed", metadata: metadata)
    }

    /// The metric label of an HTTP status.
    static func outcome(status: Int) -> String {
        switch status {
        case 304: "not-modified"
        case 200..<400: "ok"
        case 429: "rate-limited"
        case 400..<500: "client-error"
        default: "server-error"
        }
    }
}

/// Which kind of provider endpoint a call went to: a bounded label for the upstream metrics
/// (never the URL, which carries ids).
public enum UpstreamEndpoint: String, Sendable {
    /// The token endpoint (code exchange, refresh).
    case token
    /// An OpenID provider's userinfo.
    case userinfo
    /// The profile API (GitHub `/user`, Graph `/me`).
    case profile
    /// GitHub's `/user/emails`.
    case emails
    /// A photo (Graph's photo binary, an avatar or `picture` URL).
    case photo
    /// A discovery document.
    case discovery
    /// A JWKS.
    case jwks
    /// A grant revocation.
    case revocation
    /// A passthrough call of the provider's API.
    case api
    /// Anything else.
    case other
}
