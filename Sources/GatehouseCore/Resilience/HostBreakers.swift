import Foundation
import Synchronization

/// A circuit breaker per host (origin), separate from the providers' sign-in and profile
/// breakers: a host that keeps failing is left alone for a while without any provider's
/// sign-ins or profiles — and so any other user — being affected. Photo hosts have one
/// table, passthrough API hosts another. Created on first use, at most `maximumHosts` of them
/// (a full table starts over, so memory stays bounded whatever hosts users name); no per-host
/// metrics, whose labels users could multiply.
public final class HostBreakers: Sendable {
    private let breakers = Mutex<[String: CircuitBreaker]>([:])
    private let settings: CircuitBreakerSettings
    private let clock: any GatehouseClock
    private let maximumHosts = 1000
    /// How many different callers' failures it takes to open a host's breaker.
    private let distinctCallers: Int

    /// Breakers with the providers' settings. With `distinctCallers` above 1, a host's breaker
    /// opens only when failures came from that many different callers (both tables use 2: no
    /// single user, service key or user's photo can switch a host off for the others).
    public init(settings: CircuitBreakerSettings = CircuitBreakerSettings(), clock: any GatehouseClock = SystemClock(), distinctCallers: Int = 1) {
        self.settings = settings
        self.clock = clock
        self.distinctCallers = distinctCallers
    }

    /// Runs `call` through the breaker of `url`'s origin; while it is open, throws
    /// `refused(origin, seconds)` at once, `seconds` being how long until the breaker lets a
    /// probe through (the caller decides whether its answer says so). Failures of the host
    /// (`upstream-unavailable` other than the host's refusal of this request or an answer over
    /// the caller's size cap, or an answer `failed` says is the host's) count; any other answer
    /// closes it.
    func run<T: Sendable>(
        _ url: String, caller: String? = nil, refused: (String, Int?) -> GatehouseError, failed: (T) -> Bool = { _ in false },
        _ call: () async throws -> T
    ) async throws -> T {
        try await run(origin: Self.origin(of: url), caller: caller, refused: refused, failed: failed, call)
    }

    /// `scheme://host[:port]` of a URL (the key of its breaker).
    static func origin(of url: String) -> String {
        URLAllowList.parse(url)?.origin ?? "unparsed"
    }

    /// `run(_:refused:failed:_:)` for an origin already known (an API base's, computed once),
    /// made by `caller` (a user's or a service key's id; see `distinctCallers`).
    func run<T: Sendable>(
        origin: String, caller: String? = nil, refused: (String, Int?) -> GatehouseError, failed: (T) -> Bool = { _ in false },
        _ call: () async throws -> T
    ) async throws -> T {
        let breaker = self.breaker(for: origin)
        let probe: Bool
        do {
            probe = try await breaker.admit(now: clock.now(), caller: caller)
        } catch {
            throw Self.refusal(refused, origin: origin, closed: error)
        }
        do {
            let value = try await call()
            await breaker.record(failed(value) ? .failed : .answered, probe: probe, caller: caller, now: clock.now())
            return value
        } catch let error as GatehouseError where !Task.isCancelled && error.situation != .overloaded {
            // An answer over the cap is what the caller asked for (a large page), not a failure
            // of the host. A caller's own body that stalled (its `408`) was never answered:
            // it says nothing of the host, and must not close a breaker or clear its count; a
            // probe so spent is its caller's last for an open period.
            let failed = error.countsAgainstUpstream && error.situation != .tooLarge
            let outcome: CircuitBreaker.Outcome = error.isRequestBodyTimeout ? .callerFailed : failed ? .failed : .answered
            await breaker.record(outcome, probe: probe, caller: caller, now: clock.now())
            throw error
        } catch {
            await breaker.record(.unknown, probe: probe, now: clock.now())
            throw error
        }
    }

    /// `refused(origin, seconds)` with the seconds the breaker's own refusal (`closed`) says to
    /// wait. Never inlined, and an existential: `run` is inlined into each caller, and the
    /// passthrough's frame (which stays allocated while its call is in flight) would otherwise
    /// hold room for these values too.
    @inline(never)
    private static func refusal(_ refused: (String, Int?) -> GatehouseError, origin: String, closed: any Error) -> any Error {
        refused(origin, (closed as? GatehouseError)?.retryAfter)
    }

    private func breaker(for origin: String) -> CircuitBreaker {
        breakers.withLock { table in
            if let existing = table[origin] { return existing }
            if table.count >= maximumHosts { table.removeAll() }
            let created = CircuitBreaker(providerId: "host \(origin)", settings: settings, metrics: .disabled, distinctCallers: distinctCallers)
            table[origin] = created
            return created
        }
    }
}
