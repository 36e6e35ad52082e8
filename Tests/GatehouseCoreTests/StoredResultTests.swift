import Foundation
import Testing

@testable import GatehouseCore

/// The callback stores a sign-in's answer encoded, without tokens; the fetch adds them.
@Suite struct StoredResultTests {
    /// A result as the callback has it (decoded from what `/v1/auth/result` answers).
    static func result() throws -> SignInResult {
        let json = #"""
            {"additionalUserInfo":{"profile":{"id":7,"login":"octo\"cat","plan":null,"tags":["a","b"]},"username":"octocat"},
             "isNewUser":true,"operationType":"signIn","providerId":"github.com",
             "user":{"uid":"u-1","displayName":"Octo Cat","email":"octo@example.com","emailVerified":true,"photoURL":"/v1/me/photo",
                     "providers":[{"providerId":"github.com","federatedId":"7","username":"octocat","email":"octo@example.com",
                                   "emailVerified":true,"scopes":["read:user"]}],
                     "createdAt":"2026-11-25T10:00:00Z","lastSignInAt":"2026-11-25T10:00:00Z","disabled":false}}
            """#
        return try JSONCoding.decoder().decode(SignInResult.self, from: Data(json.utf8))
    }

    @Test("the answer with tokens decodes to the result with those tokens; without a session it is the stored answer as it is")
    func tokensAreAdded() throws {
        let result = try Self.result()
        let tokenless = try result.tokenlessAnswer()
        let text = String(decoding: tokenless, as: UTF8.self)
        #expect(!text.contains("idToken") && !text.contains("refreshToken") && !text.contains("expiresIn"))
        let issued = GatewayTokenService.Issued(idToken: "eyJ.a\"b.c", refreshToken: "rt_1/2", expiresIn: 3600)
        let answer = try SignInResult.answer(tokenless, adding: issued)
        #expect(try JSONCoding.decoder().decode(SignInResult.self, from: answer) == result.with(issued))
        #expect(try JSONSerialization.jsonObject(with: answer) is [String: Any])
        #expect(try SignInResult.answer(tokenless, adding: nil) == tokenless)
        // A result that carried tokens before it was stored keeps none of them.
        let stale = try SignInResult.answer(try result.with(issued).tokenlessAnswer(), adding: nil)
        #expect(try JSONCoding.decoder().decode(SignInResult.self, from: stale) == result)
    }

    @Test("a result stored before answers were kept encoded still decodes, to the same answer")
    func legacySuccessDecodes() throws {
        let result = try Self.result()
        let legacy = try JSONCoding.encoder().encode(StoredResult.success(result, familyId: "f-1"))
        guard case .success(let decoded, let familyId) = try JSONCoding.decoder().decode(StoredResult.self, from: legacy) else {
            Issue.record("a legacy success did not decode as one")
            return
        }
        #expect(decoded == result && familyId == "f-1")
        let stored = try JSONCoding.encoder().encode(StoredResult.answer(try result.tokenlessAnswer(), familyId: nil, replaces: nil))
        guard case .answer(let answer, nil, nil) = try JSONCoding.decoder().decode(StoredResult.self, from: stored) else {
            Issue.record("an encoded answer did not decode as one")
            return
        }
        #expect(try JSONCoding.decoder().decode(SignInResult.self, from: answer) == result)
    }

    @Test("an answer stored before it named the session it replaces decodes with none; one that names it keeps it")
    func answerWithoutReplacesDecodes() throws {
        // As an instance of the version before stored it: no `replaces` member.
        let older = Data(#"{"answer":{"_0":"e30=","familyId":"f-1"}}"#.utf8)
        guard case .answer(let answer, "f-1", nil) = try JSONCoding.decoder().decode(StoredResult.self, from: older) else {
            Issue.record("an older answer did not decode")
            return
        }
        #expect(answer == Data("{}".utf8))
        let replacing = try JSONCoding.encoder().encode(StoredResult.answer(Data("{}".utf8), familyId: "f-2", replaces: "f-1"))
        guard case .answer(_, "f-2", "f-1") = try JSONCoding.decoder().decode(StoredResult.self, from: replacing) else {
            Issue.record("the replaced session was not kept")
            return
        }
    }
}
