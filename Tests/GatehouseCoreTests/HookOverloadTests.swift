import CurlClient
import Foundation
import Glibc
import Testing

@testable import GatehouseCore

/// A hook call the gateway cannot make because its calls out are all taken: over real libcurl,
/// with the one slot held by a call to a loopback listener that never answers.
@Suite("Hooks when the gateway's calls out are taken")
struct HookOverloadTests {
    /// A TCP listener on 127.0.0.1 that accepts nothing: connections wait in its backlog and
    /// a request sent on one is never answered. Closed by `close()`.
    struct SilentListener {
        let descriptor: Int32
        let port: Int

        init() throws {
            let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            self.descriptor = descriptor
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = 0
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                    bind(descriptor, socketAddress, length) == 0 && listen(descriptor, 8) == 0
                        && getsockname(descriptor, socketAddress, &length) == 0
                }
            }
            guard descriptor >= 0, bound else { throw POSIXError(.EADDRNOTAVAIL) }
            port = Int(UInt16(bigEndian: address.sin_port))
        }

        func close() { _ = Glibc.close(descriptor) }
    }

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
        let http = CurlHTTPClient(configuration: .init(timeout: .seconds(60), maxTransfers: 1, maxWaitingTransfers: 0))
        defer { http.shutdown() }
        let allowing = Self.hooks(.allow, http: http)
        let denying = Self.hooks(.deny, http: http)
        let holding = Task { try await http.execute(OutboundRequest(url: "http://127.0.0.1:\(listener.port)/held")) }
        var held = false
        for _ in 0..<500 where !held {
            held = http.load.inFlight == 1
            if !held { try await Task.sleep(for: .milliseconds(20)) }
        }
        try #require(held)

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
}
