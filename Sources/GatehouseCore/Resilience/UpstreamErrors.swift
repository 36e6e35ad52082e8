import CurlClient

/// Maps what went wrong talking to a provider onto the API's error codes.
enum UpstreamErrors {
    /// A transport failure: a timeout, or a bad gateway.
    static func transport(_ error: any Error, providerId: String) -> GatehouseError {
        if let error = error as? GatehouseError { return error }
        guard let outbound = error as? OutboundError else {
            return .upstreamUnavailable(providerId, detail: "\(providerId) could not be reached.")
        }
        switch outbound.kind {
        case .timedOut:
            return .upstreamUnavailable(providerId, situation: .timedOut, detail: "\(providerId) did not answer in time.")
        case .responseTooLarge:
            // `.tooLarge`: what was asked for is too large; a passthrough host's breaker does not
            // count it (the caller chose the page size), a provider's profile breaker does.
            return .upstreamUnavailable(providerId, situation: .tooLarge, detail: "\(providerId) sent a larger answer than the gateway accepts.")
        case .requestBodyTimedOut:
            return .requestBodyTimedOut()
        case .overloaded:
            var error = GatehouseError.upstreamUnavailable(
                providerId, situation: .overloaded, detail: "The gateway has too many calls to providers in flight; retry in a moment.")
            error.retryAfter = 1
            return error
        case .ownerOverloaded:
            // The caller's own excess: a rate limit (429), never sent, counted by no breaker.
            var error = GatehouseError.rateLimited(retryAfter: 1)
            error.situation = .overloaded
            error.detail = "Too many of this user's calls to providers are in flight; retry when one has ended."
            return error
        default:
            return .upstreamUnavailable(providerId, detail: "\(providerId) could not be reached (\(outbound.kind.rawValue)).")
        }
    }

    /// An unexpected HTTP status from a provider's API. A 4xx (but 401 and 429) is the provider
    /// refusing this caller's request (`.refusedByUpstream`, which no breaker counts), unless the
    /// endpoint is `shared`, one every caller depends on alike (discovery, the code exchange):
    /// its 4xx is the provider failing everybody.
    static func status(_ response: OutboundResponse, providerId: String, shared: Bool = false) -> GatehouseError {
        switch response.status {
        case 401:
            return .providerReauthRequired(providerId)
        case 429:
            return .upstreamRateLimited(providerId, retryAfter: response.headers["retry-after"].flatMap { Int($0) })
        case 503:
            return .upstreamUnavailable(providerId, situation: .temporarilyUnavailable, detail: "\(providerId) answered 503.")
        case 400..<500 where !shared:
            return .upstreamUnavailable(providerId, situation: .refusedByUpstream, detail: "\(providerId) answered HTTP \(response.status).")
        default:
            return .upstreamUnavailable(providerId, detail: "\(providerId) answered HTTP \(response.status).")
        }
    }
}

extension GatehouseError {
    /// Whether this failure of a call says the upstream is failing, which a circuit breaker
    /// counts: `upstream-unavailable`, unless the upstream answered, refusing the request
    /// (`.refusedByUpstream`), or the gateway never called it (`.overloaded`).
    var countsAgainstUpstream: Bool { code == .upstreamUnavailable && situation != .refusedByUpstream && situation != .overloaded }
}
