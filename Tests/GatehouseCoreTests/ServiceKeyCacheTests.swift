import Foundation
import GatehouseCore
import Synchronization
import Testing

/// The service-key cache: bounded, dropped by revocations, never keeping a read a revocation overtook.
@Suite("Service key cache")
struct ServiceKeyCacheTests {
    static func key(_ id: String) -> ServiceKeyRecord {
        ServiceKeyRecord(id: id, name: id, secretHash: "hash-\(id)", scopes: ["profile:read"], createdAt: Date())
    }

    /// Counts the store reads a cache makes.
    final class Reads: Sendable {
        private let count = Mutex(0)
        var value: Int { count.withLock { $0 } }
        func read(_ key: ServiceKeyRecord) -> ServiceKeyRecord {
            count.withLock { $0 += 1 }
            return key
        }
    }

    @Test("a key is read once, then held; forgetting its id (a revocation) makes the next use read the store")
    func forgetDropsTheKey() async throws {
        let cache = ServiceKeyCache(lifetime: 3600)
        let reads = Reads()
        for _ in 1...3 { _ = try await cache.key(secretHash: "hash-a") { reads.read(Self.key("a")) } }
        #expect(reads.value == 1)
        cache.forget(keyId: "b")
        _ = try await cache.key(secretHash: "hash-a") { reads.read(Self.key("a")) }
        #expect(reads.value == 1, "another key's revocation keeps this one")
        cache.forget(keyId: "a")
        _ = try await cache.key(secretHash: "hash-a") { reads.read(Self.key("a")) }
        #expect(reads.value == 2)
        cache.forgetAll()
        #expect(cache.count == 0)
    }

    @Test("a read that a revocation overtook is answered but not kept: the next use reads the store again")
    func overtakenReadIsNotKept() async throws {
        let cache = ServiceKeyCache(lifetime: 3600)
        let reads = Reads()
        _ = try await cache.key(secretHash: "hash-a") {
            // The revocation commits (and is told) while this read is on its way back.
            cache.forget(keyId: "a")
            return reads.read(Self.key("a"))
        }
        #expect(cache.count == 0)
        _ = try await cache.key(secretHash: "hash-a") { reads.read(Self.key("a")) }
        #expect(reads.value == 2)
    }

    @Test("bounded: never more than its capacity; unknown secrets are not remembered; lifetime 0 keeps nothing")
    func bounded() async throws {
        let cache = ServiceKeyCache(lifetime: 3600, capacity: 4)
        for index in 0..<10 { _ = try await cache.key(secretHash: "hash-\(index)") { Self.key("\(index)") } }
        #expect(cache.count <= 4)
        _ = try await cache.key(secretHash: "unknown") { nil }
        #expect(cache.count <= 4)
        let off = ServiceKeyCache(lifetime: 0)
        _ = try await off.key(secretHash: "hash-a") { Self.key("a") }
        #expect(off.count == 0)
    }
}
