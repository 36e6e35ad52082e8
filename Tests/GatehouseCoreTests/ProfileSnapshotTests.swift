import Foundation
import Testing

@testable import GatehouseCore

/// The stored form of provider profiles.
@Suite("Profile snapshots")
struct ProfileSnapshotTests {
    static let profile = ProviderProfile(
        providerId: "github.com", federatedId: "583231", username: "octocat", email: "octocat@github.com", emailVerified: true,
        rawUserInfo: .object(["login": .string("octocat")]))

    @Test("written with the current version and read back unchanged")
    func roundTrip() throws {
        let data = try ProfileSnapshot.encode(Self.profile)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect(object["version"] as? Int == ProfileSnapshot.currentVersion)
        #expect(object["federatedId"] as? String == "583231")
        #expect(try ProfileSnapshot.decode(data, uid: "u", providerId: "github.com", federatedId: "583231") == Self.profile)
    }

    @Test("a snapshot stored before versions existed is version 1")
    func legacy() throws {
        let legacy = try JSONCoding.encoder().encode(Self.profile)
        #expect(try ProfileSnapshot.decode(legacy, uid: nil, providerId: "github.com", federatedId: "583231") == Self.profile)
    }

    @Test("unreadable, newer, or another identity's: an error naming the row, never a value")
    func refused() throws {
        let valid = try ProfileSnapshot.encode(Self.profile)
        var newer = try #require(try JSONSerialization.jsonObject(with: valid) as? [String: Any])
        newer["version"] = ProfileSnapshot.currentVersion + 1
        let cases: [(Data, String, String)] = [
            (Data("{".utf8), "583231", "unreadable (not JSON)"),
            (Data(#"{"providerId":"github.com"}"#.utf8), "583231", "unreadable (no federatedId)"),
            (try JSONSerialization.data(withJSONObject: newer), "583231", "written by a newer Gatehouse"),
            (valid, "42", "another identity"),
        ]
        for (data, federatedId, reason) in cases {
            let error = #expect(throws: CorruptProfileSnapshot.self) {
                try ProfileSnapshot.decode(data, uid: "u1", providerId: "github.com", federatedId: federatedId)
            }
            #expect(error?.reason.contains(reason) == true, "\(error?.reason ?? "")")
            #expect(error?.description.contains("github.com link of account u1") == true)
        }
    }
}

/// What a profile weighs in the caches that keep it.
@Suite struct ProfileFootprintTests {
    @Test("a profile weighs at least its raw answer's text, each member and value, and its own fields")
    func weighsItsAnswer() {
        let small = ProviderProfile(providerId: "oidc.x", federatedId: "1", rawUserInfo: .object(["sub": .string("1")]))
        let bio = String(repeating: "x", count: 256 << 10)
        let large = ProviderProfile(
            providerId: "oidc.x", federatedId: "1", displayName: "Olive",
            rawUserInfo: .object(["sub": .string("1"), "bio": .string(bio), "groups": .array((0..<100).map { .string("group-\($0)") })]))
        #expect(small.approximateBytes < 512)
        #expect(large.approximateBytes >= bio.utf8.count + 100 * 32 + small.approximateBytes)
    }

    @Test("a container weighs its own block: a thousand empty objects or one-member objects are not charged as a thousand scalars")
    func containersWeighTheirBlocks() {
        let emptyObjects = JSONValue.array(Array(repeating: .object([:]), count: 1000))
        let oneMember = JSONValue.array(Array(repeating: .object(["": .number(0)]), count: 1000))
        let nested = JSONValue.array(Array(repeating: .array([.number(0)]), count: 1000))
        // Parsed, each costs its container's allocation besides its values (about 150, 190
        // and 90 bytes each in a Swift heap).
        #expect(emptyObjects.approximateBytes >= 1000 * 96)
        #expect(oneMember.approximateBytes >= 1000 * 192)
        #expect(nested.approximateBytes >= 1000 * 96)
    }
}
