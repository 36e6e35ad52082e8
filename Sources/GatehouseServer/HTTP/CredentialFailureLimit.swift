import Foundation
import GatehouseCore
import Synchronization

/// How many credentials naming nothing live one client may present: a session
/// cookie or service key that matches no live record costs a read of the store, and random
/// ones never hit a cache. Each client (an IPv6 client's /64) has
/// `GATEHOUSE_CREDENTIAL_FAILURE_LIMIT` of them per minute; past them, the client's session
/// cookies and service keys are `429 rate-limited` before any look-up, valid ones included
/// (its neighbours behind one address share the budget, as for the sign-in routes), until the
/// budget refills. ID tokens are neither counted nor refused: a forged one fails its signature
/// before any look-up.
///
/// A class behind a lock rather than an actor: the check runs on every credentialed request,
/// and while no client has spent its budget it is one atomic read and no hop.
final class CredentialFailureLimit: Sendable {
    private let buckets: Mutex<TokenBuckets>
    /// Until when (seconds since 1970) some client may be out of budget: moved on whenever a
    /// bucket is left without a token, to when it has one again. After it, no bucket is looked up.
    private let spentUntil = Atomic<Int64>(0)
    private let enabled: Bool

    /// A limit of `perMinute` failures per client (0: off).
    init(perMinute: Int) {
        buckets = Mutex(TokenBuckets(perMinute: perMinute))
        enabled = perMinute > 0
    }

    /// The seconds `client` must wait before presenting a credential again, or `nil` when it may;
    /// `client` (the client's address) is read only while some client is out of budget.
    func wait(now: Date, client: () -> String) -> Int? {
        guard enabled, Int64(now.timeIntervalSince1970) <= spentUntil.load(ordering: .relaxed) else { return nil }
        let key = TrustedProxies.network(of: client())
        return buckets.withLock { $0.wait(key, now: now) }
    }

    /// Counts one credential of `client` that named nothing live. Credentials checked together
    /// are all counted, past the budget too: the bucket runs into debt (`TokenBuckets.charge`,
    /// at most a minute's worth), which the client waits out before its next look-up.
    func failed(client: String, now: Date) {
        guard enabled else { return }
        let key = TrustedProxies.network(of: client)
        guard let wait = buckets.withLock({ $0.charge(key, now: now) }) else { return }
        // Until the bucket has a token again, and a second more: never moved back.
        let until = Int64(now.timeIntervalSince1970) + Int64(wait) + 1
        var current = spentUntil.load(ordering: .relaxed)
        while current < until {
            let (exchanged, found) = spentUntil.compareExchange(expected: current, desired: until, ordering: .relaxed)
            if exchanged { break }
            current = found
        }
    }
}
