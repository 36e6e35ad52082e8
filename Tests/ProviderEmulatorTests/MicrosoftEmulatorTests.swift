import CurlClient
import Foundation
import JWTKit
import ProviderEmulator
import Testing

/// The emulated Microsoft identity platform and Graph against providers.md §1–§2.
@Suite struct MicrosoftEmulatorTests {
    static let client = EmulatorConfiguration.demoMicrosoftClient
    static let callback = "http://127.0.0.1:9/cb"
    static let verifier = "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"

    static func escape(_ text: String) -> String { text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "" }

    /// Authorizes `hint` at `tenant` and returns the redirect (or page) answer.
    static func authorize(_ base: String, _ http: CurlHTTPClient, tenant: String = "common", hint: String, scope: String, extra: String = "")
        async throws -> OutboundResponse
    {
        let query = [
            "client_id=\(client.id)", "redirect_uri=\(escape(callback))", "response_type=code", "scope=\(escape(scope))", "state=st",
            "nonce=nn", "login_hint=\(escape(hint))", "code_challenge=\(verifier)",
        ].joined(separator: "&")
        return try await http.execute(OutboundRequest(url: "\(base)/microsoft/\(tenant)/oauth2/v2.0/authorize?\(query)\(extra)"))
    }

    static func redeem(_ base: String, _ http: CurlHTTPClient, code: String, secret: String = client.secret) async throws -> OutboundResponse {
        let body = [
            "client_id=\(client.id)", "client_secret=\(escape(secret))", "grant_type=authorization_code", "code=\(escape(code))",
            "redirect_uri=\(escape(callback))", "code_verifier=\(verifier)",
        ].joined(separator: "&")
        return try await http.execute(OutboundRequest(method: "POST", url: "\(base)/microsoft/common/oauth2/v2.0/token", body: Array(body.utf8)))
    }

    /// A token answer for `hint` with `scope` (PKCE `plain`: the method is omitted).
    static func tokens(_ base: String, _ http: CurlHTTPClient, hint: String, scope: String) async throws -> [String: Any] {
        let code = try #require(try await authorize(base, http, hint: hint, scope: scope).locationQuery()["code"])
        return try await redeem(base, http, code: code).jsonObject()
    }

    @Test func discoveryHasTheRealIssuerQuirks() async throws {
        try await withEmulator { base, http in
            func issuer(_ tenant: String) async throws -> String? {
                try await http.execute(OutboundRequest(url: "\(base)/microsoft/\(tenant)/v2.0/.well-known/openid-configuration")).jsonObject()[
                    "issuer"] as? String
            }
            #expect(try await issuer("common") == "\(base)/microsoft/{tenantid}/v2.0")
            #expect(try await issuer("organizations") == "\(base)/microsoft/{tenantid}/v2.0")
            #expect(try await issuer("consumers") == "\(base)/microsoft/\(MicrosoftDirectory.consumersTenant)/v2.0")
            #expect(try await issuer(MicrosoftDirectory.tenantA.id) == "\(base)/microsoft/\(MicrosoftDirectory.tenantA.id)/v2.0")
            #expect(try await issuer("contoso.example") == "\(base)/microsoft/\(MicrosoftDirectory.tenantA.id)/v2.0")
            let unknown = try await http.execute(OutboundRequest(url: "\(base)/microsoft/nowhere.example/v2.0/.well-known/openid-configuration"))
            #expect(unknown.status == 400)
            let keys =
                try await http.execute(OutboundRequest(url: "\(base)/microsoft/common/discovery/v2.0/keys")).jsonObject()["keys"]
                as? [[String: Any]]
            #expect(keys?.first?["issuer"] as? String == "\(base)/microsoft/{tenantid}/v2.0")
            // Microsoft names no algorithm in its keys.
            let holds = keys?.isEmpty == false && keys?.allSatisfy { $0["alg"] == nil && $0["kty"] as? String == "RSA" } == true
            #expect(holds)
        }
    }

    @Test func idTokensCarryTidOidAndPairwiseSubAndVerify() async throws {
        try await withEmulator { base, http in
            let answer = try await Self.tokens(base, http, hint: "AdeleV@contoso.example", scope: "openid profile email offline_access User.Read")
            #expect(answer["refresh_token"] != nil)
            let idToken = try #require(answer["id_token"] as? String)
            let jwks = try await http.execute(OutboundRequest(url: "\(base)/microsoft/common/discovery/v2.0/keys"))
            let claims = try await JWTKeyCollection().add(jwksJSON: jwks.bodyText).verify(idToken, as: MicrosoftClaimsProbe.self)
            #expect(claims.tid == MicrosoftDirectory.tenantA.id)
            #expect(claims.iss == "\(base)/microsoft/\(MicrosoftDirectory.tenantA.id)/v2.0")
            #expect(claims.oid == "87d349ed-44d7-43e1-9a83-5f2406dee5bd")
            #expect(claims.sub != claims.oid)
            #expect(claims.xms_edov == true)
            let personal = try await Self.tokens(base, http, hint: "steven@outlook.example", scope: "openid profile User.Read")
            #expect(personal["refresh_token"] == nil)  // no offline_access
            let personalClaims = try await JWTKeyCollection().add(jwksJSON: jwks.bodyText).verify(
                try #require(personal["id_token"] as? String), as: MicrosoftClaimsProbe.self)
            #expect(personalClaims.oid == "00000000-0000-0000-fde9-26f844473904")
            #expect(personalClaims.tid == MicrosoftDirectory.consumersTenant)
            let noOpenID = try await Self.tokens(base, http, hint: "AdeleV@contoso.example", scope: "User.Read")
            #expect(noOpenID["id_token"] == nil)
            // Without the profile scope the token has no oid, as Microsoft's has none.
            let noProfile = try #require(
                try await Self.tokens(base, http, hint: "AdeleV@contoso.example", scope: "openid User.Read")["id_token"] as? String)
            var payload = String(noProfile.split(separator: ".")[1]).replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            payload += String(repeating: "=", count: (4 - payload.count % 4) % 4)
            let payloadBytes = try #require(Data(base64Encoded: payload))
            let noProfileClaims = try #require(try JSONSerialization.jsonObject(with: payloadBytes) as? [String: Any])
            #expect(noProfileClaims["oid"] == nil, "\(noProfileClaims)")
            #expect(noProfileClaims["tid"] as? String == MicrosoftDirectory.tenantA.id)
        }
    }

    @Test func codesAreSingleUseAndErrorsCarryAADSTSDetails() async throws {
        try await withEmulator { base, http in
            let code = try #require(try await Self.authorize(base, http, hint: "AdeleV@contoso.example", scope: "openid").locationQuery()["code"])
            let badSecret = try await Self.redeem(base, http, code: code, secret: "wrong")
            #expect(badSecret.status == 401)
            #expect(try badSecret.jsonObject()["error"] as? String == "invalid_client")
            #expect(try await Self.redeem(base, http, code: code).status == 200)
            let again = try await Self.redeem(base, http, code: code)
            #expect(again.status == 400)
            let error = try again.jsonObject()
            #expect(error["error"] as? String == "invalid_grant")
            #expect(error["error_codes"] as? [Int] == [54005])
            #expect((error["error_description"] as? String)?.contains("\r\nTrace ID: ") == true)
            #expect(error["trace_id"] is String && error["correlation_id"] is String && error["timestamp"] is String)
        }
    }

    @Test func tenantRestrictionAndFormPost() async throws {
        try await withEmulator { base, http in
            let foreign = try await Self.authorize(base, http, tenant: MicrosoftDirectory.tenantB.id, hint: "AdeleV@contoso.example", scope: "openid")
            #expect(try foreign.locationQuery()["error"] == "access_denied")
            let consumersWork = try await Self.authorize(base, http, tenant: "consumers", hint: "AdeleV@contoso.example", scope: "openid")
            #expect(try consumersWork.locationQuery()["code"] == nil)
            let organizationsPersonal = try await Self.authorize(base, http, tenant: "organizations", hint: "steven@outlook.example", scope: "openid")
            #expect(try organizationsPersonal.locationQuery()["code"] == nil)
            let posted = try await Self.authorize(base, http, hint: "AdeleV@contoso.example", scope: "openid", extra: "&response_mode=form_post")
            #expect(posted.status == 200)
            #expect(posted.bodyText.contains(#"<form method="POST""#) && posted.bodyText.contains(#"name="code""#))
        }
    }

    @Test func graphShapesPhotosAndErrors() async throws {
        try await withEmulator { base, http in
            func get(_ path: String, _ token: String) async throws -> OutboundResponse {
                try await http.execute(OutboundRequest(url: base + path, headers: ["Authorization": "Bearer \(token)"]))
            }
            let adele = try #require(try await Self.tokens(base, http, hint: "AdeleV@contoso.example", scope: "User.Read")["access_token"] as? String)
            let me = try await get("/graph/v1.0/me", adele).jsonObject()
            #expect(me["id"] as? String == "87d349ed-44d7-43e1-9a83-5f2406dee5bd")
            #expect(me["mail"] as? String == "AdeleV@contoso.example")
            let metadata = try await get("/graph/v1.0/me/photo", adele).jsonObject()
            #expect(metadata["width"] as? Int == 504)
            for size in MicrosoftDirectory.photoSizes {
                let photo = try await get("/graph/v1.0/me/photos/\(size)x\(size)/$value", adele)
                #expect(photo.status == (size <= 504 ? 200 : 404), "size \(size)")
                if size <= 504 { #expect(photo.headers["content-type"] == "image/jpeg" && photo.body.prefix(2) == [0xFF, 0xD8]) }
            }
            let steven = try #require(
                try await Self.tokens(base, http, hint: "steven@outlook.example", scope: "User.Read")["access_token"] as? String)
            let personal = try await get("/graph/v1.0/me", steven).jsonObject()
            #expect(personal["id"] as? String == "fde926f844473904")
            #expect(personal["mail"] is NSNull)
            let consumerPhoto = try await get("/graph/v1.0/me/photo/$value", steven)
            #expect(consumerPhoto.status == 404)
            #expect(((try consumerPhoto.jsonObject()["error"]) as? [String: Any])?["code"] as? String == "ConsumerPhotoIsNotSupported")
            let bob = try #require(try await Self.tokens(base, http, hint: "BobK@fabrikam.example", scope: "User.Read")["access_token"] as? String)
            #expect(try await get("/graph/v1.0/me/photo", bob).status == 404)
            _ = try await http.execute(OutboundRequest(method: "POST", url: "\(base)/_emulator/expire-tokens"))
            let expired = try await get("/graph/v1.0/me", adele)
            #expect(expired.status == 401)
            #expect(((try expired.jsonObject()["error"]) as? [String: Any])?["code"] as? String == "InvalidAuthenticationToken")
        }
    }
}

/// The Microsoft claims the tests read back after jwt-kit verified the signature.
struct MicrosoftClaimsProbe: JWTPayload {
    var iss: String
    var sub: String
    var tid: String
    var oid: String
    var xms_edov: Bool?
    func verify(using algorithm: some JWTAlgorithm) throws {}
}
