import Testing

@testable import GatehouseCore

/// A provider's `Retry-After`, passed on to callers only when it is one.
@Suite struct RateLimitErrorTests {
    @Test("a provider's Retry-After is passed on as given, a negative one is dropped and one over a day is capped at a day")
    func retryAfterIsBounded() {
        #expect(GatehouseError.upstreamRateLimited("github.com", retryAfter: 7).retryAfter == 7)
        #expect(GatehouseError.upstreamRateLimited("github.com", retryAfter: 0).retryAfter == 0)
        #expect(GatehouseError.upstreamRateLimited("github.com", retryAfter: nil).retryAfter == nil)
        #expect(GatehouseError.upstreamRateLimited("github.com", retryAfter: -5).retryAfter == nil)
        #expect(GatehouseError.upstreamRateLimited("github.com", retryAfter: Int.max).retryAfter == 86_400)
    }
}
