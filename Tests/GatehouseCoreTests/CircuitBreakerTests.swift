import Foundation
import Testing

@testable import CurlClient
@testable import GatehouseCore

/// The per-provider circuit breaker's state machine, with explicit times.
@Suite struct CircuitBreakerTests {
    let start = Date(timeIntervalSince1970: 1_000_000)

    func breaker(threshold: Int = 3, open: TimeInterval = 30) -> CircuitBreaker {
        CircuitBreaker(
            providerId: "github.com", settings: CircuitBreakerSettings(failureThreshold: threshold, openDuration: open), metrics: .disabled)
    }

    @Test("opens after the threshold of consecutive failures; an answer in between resets the count")
    func opensAfterConsecutiveFailures() async throws {
        let breaker = breaker()
        for outcome in [CircuitBreaker.Outcome.failed, .failed, .answered, .failed, .failed] {
            #expect(try await breaker.admit(now: start) == false)
            await breaker.record(outcome, probe: false, now: start)
        }
        #expect(await breaker.state == .closed)
        _ = try await breaker.admit(now: start)
        await breaker.record(.failed, probe: false, now: start)
        #expect(await breaker.state == .open)
        let refusal = await #expect(throws: GatehouseError.self) { try await breaker.admit(now: start.addingTimeInterval(10)) }
        #expect(refusal?.code == .upstreamUnavailable)
        #expect(refusal?.situation == .temporarilyUnavailable)
        #expect(refusal?.retryAfter == 20)
    }

    @Test("Retry-After stays within a second and a day: an open period set very long, or a clock that stepped back, neither traps nor promises more")
    func retryAfterIsBounded() async throws {
        let long = breaker(threshold: 1, open: 1e30)
        _ = try await long.admit(now: start)
        await long.record(.failed, probe: false, now: start)
        let refusal = await #expect(throws: GatehouseError.self) { try await long.admit(now: start) }
        #expect(refusal?.retryAfter == 86_400)
        let stepped = try await openedAtStart()
        let early = await #expect(throws: GatehouseError.self) { try await stepped.admit(now: start.addingTimeInterval(-1e9)) }
        #expect(early?.retryAfter == 86_400)
    }

    /// A breaker that one failure at `start` has opened.
    func openedAtStart() async throws -> CircuitBreaker {
        let breaker = breaker(threshold: 1)
        _ = try await breaker.admit(now: start)
        await breaker.record(.failed, probe: false, now: start)
        return breaker
    }

    @Test("after the open period exactly one probe goes through; its success closes, its failure reopens for a full period")
    func halfOpenProbe() async throws {
        let breaker = try await openedAtStart()
        let later = start.addingTimeInterval(31)
        #expect(try await breaker.admit(now: later) == true)
        #expect(await breaker.state == .halfOpen)
        await #expect(throws: GatehouseError.self) { try await breaker.admit(now: later) }
        await breaker.record(.failed, probe: true, now: later)
        #expect(await breaker.state == .open)
        await #expect(throws: GatehouseError.self) { try await breaker.admit(now: later.addingTimeInterval(29)) }
        #expect(try await breaker.admit(now: later.addingTimeInterval(30)) == true)
        await breaker.record(.answered, probe: true, now: later.addingTimeInterval(30))
        #expect(await breaker.state == .closed)
        #expect(try await breaker.admit(now: later.addingTimeInterval(30)) == false)
    }

    @Test(
        "with two distinct callers required, one caller's failed probe does not reopen it: that caller is refused and the next one probes; a second caller's failed probe reopens it, an answer closes it"
    )
    func probesNeedDistinctCallersToReopen() async throws {
        let breaker = CircuitBreaker(
            providerId: "hook:before-sign-in", settings: CircuitBreakerSettings(failureThreshold: 2, openDuration: 30), metrics: .disabled,
            distinctCallers: 2)
        for caller in ["mallory", "bob"] {
            _ = try await breaker.admit(now: start, caller: caller)
            await breaker.record(.failed, probe: false, caller: caller, now: start)
        }
        #expect(await breaker.state == .open)
        // Mallory probes and fails, again and again: her failures alone never hold it open.
        var now = start.addingTimeInterval(31)
        #expect(try await breaker.admit(now: now, caller: "mallory") == true)
        await breaker.record(.failed, probe: true, caller: "mallory", now: now)
        #expect(await breaker.state == .halfOpen)
        // Told to come back when she may probe again, not in a second.
        let refused = await #expect(throws: GatehouseError.self) { try await breaker.admit(now: now, caller: "mallory") }
        #expect(refused?.retryAfter == 30)
        // The next caller probes at once, without waiting another open period.
        #expect(try await breaker.admit(now: now, caller: "alice") == true)
        let waiting = await #expect(throws: GatehouseError.self) { try await breaker.admit(now: now, caller: "carol") }
        #expect(waiting?.retryAfter == 1, "a probe is under way")
        await breaker.record(.answered, probe: true, caller: "alice", now: now)
        #expect(await breaker.state == .closed)

        // Alone on a quiet deployment, a caller whose probe failed probes again after an open
        // period instead of being refused for good.
        for caller in ["bob", "carol"] {
            _ = try await breaker.admit(now: now, caller: caller)
            await breaker.record(.failed, probe: false, caller: caller, now: now)
        }
        now = now.addingTimeInterval(31)
        #expect(try await breaker.admit(now: now, caller: "mallory") == true)
        await breaker.record(.failed, probe: true, caller: "mallory", now: now)
        let later = await #expect(throws: GatehouseError.self) { try await breaker.admit(now: now.addingTimeInterval(29), caller: "mallory") }
        #expect(later?.retryAfter == 1)
        #expect(try await breaker.admit(now: now.addingTimeInterval(30), caller: "mallory") == true)
        await breaker.record(.answered, probe: true, caller: "mallory", now: now.addingTimeInterval(30))
        #expect(await breaker.state == .closed)
        now = now.addingTimeInterval(30)

        // Down for everyone: two callers' failed probes reopen it for a full period.
        for caller in ["bob", "carol"] {
            _ = try await breaker.admit(now: now, caller: caller)
            await breaker.record(.failed, probe: false, caller: caller, now: now)
        }
        now = now.addingTimeInterval(31)
        #expect(try await breaker.admit(now: now, caller: "mallory") == true)
        await breaker.record(.failed, probe: true, caller: "mallory", now: now)
        #expect(try await breaker.admit(now: now, caller: "alice") == true)
        await breaker.record(.failed, probe: true, caller: "alice", now: now)
        #expect(await breaker.state == .open)
        let refusal = await #expect(throws: GatehouseError.self) { try await breaker.admit(now: now.addingTimeInterval(1), caller: "dave") }
        #expect(refusal?.retryAfter == 29)
    }

    @Test("an abandoned probe lets the next caller probe at once; a threshold of 0 never opens")
    func abandonedProbeAndDisabled() async throws {
        let breaker = try await openedAtStart()
        let later = start.addingTimeInterval(31)
        #expect(try await breaker.admit(now: later) == true)
        await breaker.record(.unknown, probe: true, now: later)
        #expect(try await breaker.admit(now: later) == true)

        let never = self.breaker(threshold: 0)
        for _ in 0..<50 {
            _ = try await never.admit(now: start)
            await never.record(.failed, probe: false, now: start)
        }
        #expect(await never.state == .closed)
    }

    @Test("photo preference: configured providers first in their order, then link order")
    func photoOrder() {
        let links = ["github.com", "yahoo.com", "microsoft.com", "oidc.a"].map {
            ProviderLinkRecord(uid: "u", providerId: $0, federatedId: "1", profileJSON: Data(), sealedTokens: "", linkedAt: Date(), updatedAt: Date())
        }
        #expect(ProfileService.photoCandidates(links, order: []).map(\.providerId) == ["github.com", "yahoo.com", "microsoft.com", "oidc.a"])
        #expect(
            ProfileService.photoCandidates(links, order: ["microsoft.com", "oidc.a", "apple.com"]).map(\.providerId)
                == ["microsoft.com", "oidc.a", "github.com", "yahoo.com"])
    }

    @Test(
        "a host's breaker learns nothing from a caller's stalled upload (its 408): it neither clears the count of failures nor closes after a probe"
    )
    func stalledUploadsSayNothingOfTheHost() async throws {
        let clock = StoppedClock(at: start)
        let hosts = HostBreakers(settings: CircuitBreakerSettings(failureThreshold: 2, openDuration: 30), clock: clock, distinctCallers: 2)
        let url = "https://api.example"
        func call(_ error: GatehouseError?, by caller: String) async throws {
            let refused = { (_: String, _: Int?) in
                GatehouseError.upstreamUnavailable("api.example", situation: .temporarilyUnavailable, detail: "open")
            }
            _ = try await hosts.run(url, caller: caller, refused: refused) {
                if let error { throw error }
                return 200
            }
        }
        func outcome(_ error: GatehouseError?, by caller: String) async -> String {
            do {
                try await call(error, by: caller)
                return "answered"
            } catch let thrown as GatehouseError where thrown.situation == .temporarilyUnavailable {
                return "refused"
            } catch {
                return "failed"
            }
        }
        let down = GatehouseError.upstreamUnavailable("api.example", detail: "down")
        let stalled = GatehouseError.requestBodyTimedOut()
        // A failure, a stalled upload, a failure (two callers'): two in a row, the breaker opens.
        #expect(await outcome(down, by: "a") == "failed")
        #expect(await outcome(stalled, by: "a") == "failed")
        #expect(await outcome(down, by: "b") == "failed")
        #expect(await outcome(nil, by: "c") == "refused")
        // After the open period a's probe is a stalled upload: the breaker is not closed, and a
        // may not probe again for an open period; b's probe goes through, and its answer closes it.
        clock.advance(by: 31)
        #expect(await outcome(stalled, by: "a") == "failed")
        #expect(await outcome(nil, by: "a") == "refused")
        #expect(await outcome(nil, by: "b") == "answered")
        #expect(await outcome(nil, by: "a") == "answered")
        // Opened again, a probe that stalls leaves the breaker half-open: b's failing probe
        // counts as a failed probe, and a second prober's failure reopens it for a full period.
        #expect(await outcome(down, by: "a") == "failed")
        #expect(await outcome(down, by: "b") == "failed")
        clock.advance(by: 31)
        #expect(await outcome(stalled, by: "a") == "failed")
        #expect(await outcome(down, by: "b") == "failed")
        #expect(await outcome(down, by: "c") == "failed")
        #expect(await outcome(nil, by: "d") == "refused")
        clock.advance(by: 29)
        #expect(await outcome(nil, by: "d") == "refused")
    }
}

/// Which of a provider's unexpected answers its breaker counts.
@Suite struct UpstreamStatusTests {
    static func answer(_ status: Int) -> OutboundResponse {
        OutboundResponse(head: OutboundResponseHead(status: status, headers: [:], httpVersion: "HTTP/1.1"), body: [])
    }

    @Test("a 4xx to one caller's request is the provider answering (not counted); on a shared endpoint, or a 5xx, the provider failing")
    func fourHundredsCountOnlyOnSharedEndpoints() {
        let refused = UpstreamErrors.status(Self.answer(403), providerId: "github.com")
        #expect(refused.code == .upstreamUnavailable && refused.situation == .refusedByUpstream && !refused.countsAgainstUpstream)
        for shared in [
            UpstreamErrors.status(Self.answer(404), providerId: "oidc.x", shared: true),
            UpstreamErrors.status(Self.answer(500), providerId: "github.com"),
            UpstreamErrors.status(Self.answer(503), providerId: "github.com"),
        ] {
            #expect(shared.countsAgainstUpstream, "\(shared)")
        }
        #expect(UpstreamErrors.status(Self.answer(401), providerId: "github.com").code == .providerReauthRequired)
        #expect(!UpstreamErrors.status(Self.answer(429), providerId: "github.com").countsAgainstUpstream)
    }
}
