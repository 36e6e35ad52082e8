import Foundation
import GatehouseCore
import HTTPTypes
import Testing

@testable import GatehouseServer

/// The HTTP layer alone chooses statuses and titles; the core only says what failed.
@Suite("Problem mapping")
struct ProblemMappingTests {
    /// The wire contract of each code in its usual situation (the OpenAPI document's table).
    static let usualStatuses: [GatehouseError.Code: Int] = [
        .accountExistsWithDifferentCredential: 409, .credentialAlreadyInUse: 409, .emailAlreadyInUse: 409, .idTokenExpired: 401, .internal: 500,
        .invalidArgument: 400, .invalidCustomParameter: 400, .invalidIDToken: 401, .invalidIdPResponse: 400, .invalidPendingToken: 400,
        .invalidRefreshToken: 400, .invalidResult: 400, .invalidReturnTo: 400, .invalidState: 400, .linkConfirmationRequired: 409,
        .methodNotAllowed: 405,
        .missingOrInvalidNonce: 400, .noPhoto: 404, .notFound: 404, .notReady: 503, .operationNotAllowed: 400, .originNotAllowed: 403,
        .permissionDenied: 403, .pathNotAllowed: 403, .insufficientProviderScope: 403, .photoUnavailable: 502, .providerAlreadyLinked: 409,
        .providerMisconfigured: 503,
        .providerNotLinked: 404, .providerReauthRequired: 409, .rateLimited: 429, .requiresRecentLogin: 401, .resultNotFound: 404,
        .signInCancelled: 403, .signInDenied: 403, .hookUnavailable: 503,
        .storageUnavailable: 503, .unauthenticated: 401, .unknownProvider: 404, .upstreamRateLimited: 429, .upstreamUnavailable: 502,
        .userDisabled: 403, .userMismatch: 400, .userNotFound: 404,
    ]

    @Test("every code has its documented status and its own title")
    func usualStatusesAndTitles() {
        #expect(Set(Self.usualStatuses.keys) == Set(GatehouseError.Code.allCases))
        var titles: Set<String> = []
        for code in GatehouseError.Code.allCases {
            let error = GatehouseError(code: code, detail: "x")
            #expect(Int(error.status.code) == Self.usualStatuses[code], "\(code)")
            #expect(!error.title.isEmpty)
            titles.insert(error.title)
        }
        #expect(titles.count == GatehouseError.Code.allCases.count, "titles are distinct")
    }

    @Test("situations choose the status: policy 403, hidden feature 404, too large 413, temporarily 503, timeout 504")
    func situations() {
        #expect(GatehouseError.operationNotAllowed("x", situation: .refusedByPolicy).status == .forbidden)
        #expect(GatehouseError.operationNotAllowed("x", situation: .hiddenFeature).status == .notFound)
        let tooLarge = GatehouseError(code: .invalidArgument, situation: .tooLarge, detail: "x")
        #expect(tooLarge.status == .contentTooLarge)
        #expect(tooLarge.title == "Request too large")
        #expect(GatehouseError.upstreamUnavailable("github.com", situation: .temporarilyUnavailable, detail: "x").status == .serviceUnavailable)
        #expect(GatehouseError.upstreamUnavailable("github.com", situation: .timedOut, detail: "x").status == .gatewayTimeout)
        #expect(GatehouseError.upstreamUnavailable("github.com", detail: "x").status == .badGateway)
    }

    @Test("a stored failure keeps its situation; one stored before situations existed decodes in its usual one")
    func storedFailures() throws {
        let timedOut = GatehouseError.upstreamUnavailable("github.com", situation: .timedOut, detail: "slow")
        let decoded = try JSONDecoder().decode(GatehouseError.self, from: JSONEncoder().encode(timedOut))
        #expect(decoded == timedOut)
        let legacy = #"{"code":"invalid-state","status":400,"title":"Invalid state","detail":"old","extensions":{}}"#
        let old = try JSONDecoder().decode(GatehouseError.self, from: Data(legacy.utf8))
        #expect(old.code == .invalidState)
        #expect(old.situation == .usual)
        #expect(old.status == .badRequest)
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(GatehouseError.self, from: Data(#"{"code":"no-such-code","detail":"x"}"#.utf8))
        }
    }
}
