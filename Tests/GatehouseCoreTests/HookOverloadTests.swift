import CurlClient
import Foundation
import Testing

@testable import GatehouseCore

/// Hook calls libcurl does not complete — refused because the gateway's calls out are all
/// taken, cancelled with their sign-in, cut by the client's shutdown — over real libcurl, to a
/// loopback listener that never answers.
@Suite("Hooks when their call is not completed")
struct HookOverloadTests {
    /// A sign-in's hook payload for a new GitHub account of id `federatedId`.
    static func payload(_ federatedId: String) -> HookRequest.Payload {
        HookRequest.Payload(
            account: .init(
                uid: nil, email: nil, emailVerified: false, displayName: nil, providers: ["github.com"], customClaims: [:], isNew: true),
            profile: .init(ProviderProfile(providerId: "github.com", federatedId: federatedId, username: "user\(federatedId)")),
            idTokenClaims: nil,
            context: .init(
                providerId: "github.com", mode: .signIn, flow: .redirect, clientAddress: "127.0.0.1", userAgent: nil, returnToOrigin: nil,
                platform: nil))
    }

    /// A Standard Webhooks signing secret.
    static let secret = "whsec_" + Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()

    /// Hooks calling a receiver that refuses connections (`127.0.0.1:1`) under `policy`, whose
    /// breaker would open after one failure met by two identities, for ten minutes.
    static func hooks(_ policy: HookFailurePolicy, http: CurlHTTPClient) -> HookClient {
        HookClient(
            configuration: HookConfiguration(urls: [.beforeCreate: "http://127.0.0.1:1/hook"], secrets: [secret], onFailure: policy), http: http,
            breaker: CircuitBreakerSettings(failureThreshold: 1, openDuration: 600))
    }

    @Test(
        "a hook call refused for want of a slot refuses the sign-in (hook-unavailable, Retry-After: 1) under the allow policy too, and no breaker counts it; an unreachable receiver is still the policy's"
    )
    func overloadDoesNotSkipTheHook() async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let http = CurlHTTPClient(configuration: .init(timeout: SilentListener.held, maxTransfers: 1, maxWaitingTransfers: 0))
        defer { http.shutdown() }
        let allowing = Self.hooks(.allow, http: http)
        let denying = Self.hooks(.deny, http: http)
        let holding = try await listener.hold(http)

        // Three identities each, under both policies: refused, never skipped.
        for (index, hooks) in [allowing, allowing, allowing, denying, denying, denying].enumerated() {
            let error = await #expect(throws: GatehouseError.self) { try await hooks.ask(.beforeCreate, Self.payload("\(index)")) }
            #expect(error?.code == .hookUnavailable && error?.retryAfter == 1, "\(String(describing: error))")
        }
        #expect(http.load.refused == 6)

        holding.cancel()
        _ = await holding.result
        // Had the breakers counted the refusals, they would be open now, refusing for ten minutes
        // without a call. Instead the calls are made, and meet the unreachable receiver.
        #expect(try await allowing.ask(.beforeCreate, Self.payload("7")) == .nothing)
        let unreachable = await #expect(throws: GatehouseError.self) { try await denying.ask(.beforeCreate, Self.payload("8")) }
        #expect(unreachable?.code == .hookUnavailable && unreachable?.retryAfter == 1, "\(String(describing: unreachable))")
        #expect(http.load.refused == 6)
    }

    /// A sign-in's hook call in a task of its own.
    typealias Asking = Task<HookAllowance, any Error>

    /// A sign-in asking the `before-create` hook under `policy`, at `listener` (which never
    /// answers), once libcurl has the call in flight.
    static func askInFlight(_ policy: HookFailurePolicy, listener: SilentListener, http: CurlHTTPClient) async throws -> Asking {
        let hooks = HookClient(
            configuration: HookConfiguration(
                urls: [.beforeCreate: "http://127.0.0.1:\(listener.port)/hook"], secrets: [Self.secret], timeout: 3600, onFailure: policy),
            http: http)
        let asking = Task { try await hooks.ask(.beforeCreate, Self.payload("1")) }
        var inFlight = false
        for _ in 0..<500 where !inFlight {
            inFlight = http.load.inFlight == 1
            if !inFlight { try await Task.sleep(for: .milliseconds(20)) }
        }
        try #require(inFlight, "the hook call started")
        return asking
    }

    @Test(
        "a hook call cancelled with its sign-in (a client gone, a shutdown) ends the sign-in under the allow policy too: it never lets it through unasked"
    )
    func cancelledCallDoesNotSkipTheHook() async throws {
        let listener = try SilentListener()
        defer { listener.close() }
        let http = CurlHTTPClient(configuration: .init(timeout: SilentListener.held))
        defer { http.shutdown() }
        let asking = try await Self.askInFlight(.allow, listener: listener, http: http)
        asking.cancel()
        let outcome = await asking.result
        let allowedUnasked = (try? outcome.get()) != nil
        #expect(!allowedUnasked, "\(outcome)")
        #expect(throws: CancellationError.self) { try outcome.get() }
    }

    @Test(
        "a hook call whose libcurl client shuts down under a sign-in that goes on is a failure like any other: the failure policy decides (allow: on unasked; deny: hook-unavailable), not a cancellation"
    )
    func clientShutDownIsAFailure() async throws {
        for policy in [HookFailurePolicy.allow, .deny] {
            let listener = try SilentListener()
            defer { listener.close() }
            let http = CurlHTTPClient(configuration: .init(timeout: SilentListener.held))
            defer { http.shutdown() }
            let asking = try await Self.askInFlight(policy, listener: listener, http: http)
            http.shutdown()
            let outcome = await asking.result
            switch policy {
            case .allow:
                #expect(try outcome.get() == .nothing, "\(outcome)")
            case .deny:
                let error = #expect(throws: GatehouseError.self) { try outcome.get() }
                #expect(error?.code == .hookUnavailable, "\(String(describing: error))")
            }
        }
    }
}
