import Foundation
import Hummingbird

/// The control path (`/_emulator/…`) used by tests and by anyone checking a gateway.
struct ControlRoutes {
    let state: EmulatorState
    let oidcState: OIDCState
    let microsoftState: MicrosoftState
    let keys: SigningKeys
    let configuration: EmulatorConfiguration

    func register(on router: Router<BasicRequestContext>) {
        router.get("/_emulator/users") { _, _ in
            Response.json(SeededUsers.listing())
        }
        router.get("/_emulator/stats/not-modified") { _, _ in
            Response.json(await state.notModifiedStatistics())
        }
        router.get("/_emulator/stats") { _, _ in
            Response.json(await state.statistics())
        }
        router.post("/_emulator/expire-tokens") { _, _ in
            Response.json(["expired": await state.expireAllTokens() + oidcState.expireAll() + microsoftState.expireAccessTokens()])
        }
        // Microsoft's access tokens only (its refresh tokens keep working), so a test can force refreshes.
        router.post("/_emulator/microsoft/expire-tokens") { _, _ in
            Response.json(["expired": await microsoftState.expireAccessTokens()])
        }
        // Bytes the drive upload route has received: a test sees a streamed body arrive.
        router.get("/_emulator/microsoft/uploaded-bytes") { _, _ in
            Response.json(["receivedBytes": await microsoftState.uploadedBytes])
        }
        router.post("/_emulator/microsoft/revoke-refresh-tokens") { _, _ in
            Response.json(["revoked": await microsoftState.revokeRefreshTokens()])
        }
        router.post("/_emulator/rotate-keys") { _, _ in
            Response.json(["rotated": await keys.rotate()])
        }
        router.post("/_emulator/oidc/tamper") { request, _ in
            var request = request
            let object = try await Self.jsonObject(&request)
            guard let issuer = object["issuer"] as? String, issuer == "microsoft" || OIDCIssuerSpec.all.contains(where: { $0.name == issuer }),
                let mode = (object["mode"] as? String).flatMap(TamperMode.init(rawValue:))
            else {
                return Response.json(
                    ["error": "{\"issuer\": \"oidc|yahoo|microsoft\", \"mode\": one of \(TamperMode.allCases.map(\.rawValue))} is required"],
                    status: .badRequest)
            }
            await oidcState.arm(mode, issuer: issuer)
            return Response.json(["issuer": issuer, "mode": mode.rawValue], status: .created)
        }
        // A user whose `picture` is whatever URL they chose (a loopback port, another host).
        router.post("/_emulator/oidc/picture") { request, _ in
            var request = request
            let object = try await Self.jsonObject(&request)
            guard let issuer = object["issuer"] as? String, let hint = object["hint"] as? String, let url = object["url"] as? String,
                let user = SeededUsers.oidc.first(where: { $0.issuer == issuer && $0.hint == hint })
            else {
                return Response.json(["error": "{\"issuer\", \"hint\", \"url\"} naming a seeded user is required"], status: .badRequest)
            }
            await oidcState.setPicture(url, subject: user.subject)
            return Response.json(["issuer": issuer, "hint": hint, "picture": url], status: .created)
        }
        router.delete("/_emulator/oidc/tamper") { _, _ in
            await oidcState.clearTampers()
            return Response(status: .noContent)
        }
        // An ID token minted for a seeded user, as a native app would get one (for `POST /v1/auth/idtoken` checks).
        router.post("/_emulator/oidc/id-token") { request, _ in
            var request = request
            let base = request.baseURL
            let object = try await Self.jsonObject(&request)
            guard let issuer = object["issuer"] as? String, let spec = OIDCIssuerSpec.all.first(where: { $0.name == issuer }),
                let hint = object["hint"] as? String, let user = SeededUsers.oidc.first(where: { $0.issuer == issuer && $0.hint == hint })
            else {
                return Response.json(["error": "{\"issuer\", \"hint\"} naming a seeded user is required"], status: .badRequest)
            }
            let audience = object["audience"] as? String ?? configuration.oidcClients[issuer]?.first?.id ?? ""
            let routes = OIDCRoutes(spec: spec, clients: [], state: oidcState, keys: keys, codeLifetime: configuration.codeLifetime)
            let token = try await routes.idToken(
                for: user, audience: audience, nonce: object["nonce"] as? String, scopes: ["openid", "profile", "email"], base: base,
                audiences: object["audiences"] as? [String], authorizedParty: object["azp"] as? String)
            return Response.json(["idToken": token])
        }
        router.post("/_emulator/faults") { request, _ in
            var request = request
            // A fault's body may stand for a large hostile answer (thousands of paging links).
            let object = try await Self.jsonObject(&request, limit: 16 << 20)
            guard let endpoint = object["endpoint"] as? String, !endpoint.isEmpty
            else {
                return Response.json(["error": "a JSON object with an \"endpoint\" (\"METHOD /path\") is required"], status: .badRequest)
            }
            // HTTP's status codes are three digits (RFC 9110 §15); another would stop the server
            // as it builds the answer.
            if let status = object["status"] as? Int, !(100...599).contains(status) {
                return Response.json(["error": "\"status\" must be an HTTP status code, 100 to 599"], status: .badRequest)
            }
            for name in ["delayMs", "holdMs", "pauseBodyMs"] {
                if let milliseconds = object[name] as? Int, !(0...86_400_000).contains(milliseconds) {
                    return Response.json(["error": "\"\(name)\" must be 0 to 86,400,000 (a day)"], status: .badRequest)
                }
            }
            let fault = Fault(
                endpoint: endpoint,
                status: object["status"] as? Int,
                headers: (object["headers"] as? [String: Any])?.compactMapValues { "\($0)" } ?? [:],
                body: object["body"] as? String ?? "",
                bodyBytes: min(object["bodyBytes"] as? Int ?? 0, 64 << 20),
                delayMilliseconds: object["delayMs"] as? Int ?? 0,
                holdMilliseconds: object["holdMs"] as? Int ?? 0,
                remaining: object["times"] as? Int,
                pauseBodyMilliseconds: object["pauseBodyMs"] as? Int ?? 0,
                chunked: object["chunked"] as? Bool ?? false)
            await state.addFault(fault)
            return Response.json(["endpoint": endpoint], status: .created)
        }
        router.post("/_emulator/faults/release") { _, _ in
            await state.releasePausedBodies()
            return Response(status: .noContent)
        }
        router.delete("/_emulator/faults") { _, _ in
            await state.clearFaults()
            return Response(status: .noContent)
        }
    }

    /// The body as a JSON object; anything else reads as an empty object.
    static func jsonObject(_ request: inout Request, limit: Int = 64 << 10) async throws -> [String: Any] {
        let body = try await request.collectBody(upTo: limit)
        return (try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any]) ?? [:]
    }
}
