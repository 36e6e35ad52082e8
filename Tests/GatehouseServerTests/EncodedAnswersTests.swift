import Foundation
import GatehouseCore
import Hummingbird
import Testing

@testable import GatehouseServer

/// Reused JSON bodies (issue #18): never an old body for a changed value.
@Suite struct EncodedAnswersTests {
    static func profile(_ name: String?) throws -> UnifiedProfile {
        let displayName = name.map { "\"\($0)\"" } ?? "null"
        let json =
            #"{"uid":"u1","displayName":\#(displayName),"emailVerified":false,"providers":[],"#
            + #""createdAt":"2026-11-24T00:00:00Z","lastSignInAt":"2026-11-24T00:00:00Z","disabled":false}"#
        return try JSONCoding.decoder().decode(UnifiedProfile.self, from: Data(json.utf8))
    }

    @Test("an unchanged value reuses its body; a changed one is encoded again; each body is what JSONCoding encodes")
    func bodiesFollowTheirValues() throws {
        let answers = EncodedAnswers<UnifiedProfile>(capacity: 8)
        for name in ["Ada", "Ada", "Grace", nil, "Ada"] {
            let value = try Self.profile(name)
            let expected = String(decoding: try JSONCoding.encoder().encode(value), as: UTF8.self)
            #expect(String(buffer: try answers.json(value, key: "u1")) == expected)
        }
    }
}
