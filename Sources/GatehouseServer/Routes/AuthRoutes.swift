import Foundation
import GatehouseCore
import HTTPTypes
import Hummingbird

/// `/v1/auth/…`: start, callback, result, ID-token sign-in, sign-out.
struct AuthRoutes {
    let gatehouse: Gatehouse

    func register(_ router: Router<BasicRequestContext>, table: inout RouteTable) {
        let cookies = gatehouse.configuration.cookies
        let signIn = gatehouse.signIn
        let sessions = gatehouse.sessions
        let transactionLifetime = Int(gatehouse.configuration.transactionLifetime)
        let sessionLifetime = Int(gatehouse.configuration.sessionLifetime)

        table.add(router, .get, "/v1/auth/{providerId}/start") { request, context in
            let providerId = context.parameters.get("providerId") ?? ""
            let start = try await signIn.start(
                providerId: providerId, query: request.queryPairs, existingBinding: request.cookie(cookies.transactionName),
                logger: context.logger)
            var response =
                request.wantsJSON
                ? try Response.json(["authorizationUrl": start.authorizationURL])
                : Response(status: .found, headers: [.location: start.authorizationURL, .cacheControl: "no-store"])
            response.headers.append(
                HTTPField(
                    name: .setCookie,
                    value: cookies.setCookie(name: cookies.transactionName, value: start.bindingValue, maxAge: transactionLifetime)))
            return response
        }

        let callback: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, context in
            var request = request
            var parameters = request.queryDictionary
            if request.method == .post {
                let body = try await request.collectBody(upTo: 64 << 10)
                for (key, value) in FormEncoding.decode(String(buffer: body)) where parameters[key] == nil { parameters[key] = value }
            }
            let completion = try await signIn.callback(
                providerId: context.parameters.get("providerId") ?? "", parameters: parameters,
                binding: request.cookie(cookies.transactionName), logger: context.logger)
            var response = Response(status: .seeOther, headers: [.location: completion.redirectURL, .cacheControl: "no-store"])
            if let session = completion.sessionValue {
                // A new session id at every sign-in; the old session, if any, ends (no fixation).
                try await sessions.signOut(session: request.cookie(cookies.sessionName), all: false)
                response.headers.append(
                    HTTPField(name: .setCookie, value: cookies.setCookie(name: cookies.sessionName, value: session, maxAge: sessionLifetime)))
            }
            return response
        }
        table.add(router, .get, "/v1/auth/{providerId}/callback", callback)
        table.add(router, .post, "/v1/auth/{providerId}/callback", callback)

        table.add(router, .post, "/v1/auth/result") { request, _ in
            var request = request
            let body = try await request.collectBody(upTo: 16 << 10)
            guard let object = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any],
                let id = object["result"] as? String
            else {
                throw GatehouseError.invalidArgument("The body must be a JSON object with a string member \"result\".")
            }
            return try Response.json(try await signIn.result(id: id))
        }

        table.add(router, .post, "/v1/auth/idtoken") { request, context in
            var request = request
            // JSON only: a cross-site HTML form cannot send it without a CORS preflight.
            guard request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true else {
                throw GatehouseError.invalidArgument("The body must be application/json.")
            }
            let body = try await request.collectBody(upTo: 32 << 10)
            guard let object = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any],
                let providerId = object["providerId"] as? String
            else {
                throw GatehouseError.invalidArgument("The body must be a JSON object with a string member \"providerId\".")
            }
            for key in ["idToken", "rawNonce", "accessToken"] where object[key] != nil && !(object[key] is String) {
                throw GatehouseError.invalidArgument("\(key) must be a string.")
            }
            let established = try await signIn.signIn(
                providerId: providerId, idToken: object["idToken"] as? String, rawNonce: object["rawNonce"] as? String,
                accessToken: object["accessToken"] as? String, logger: context.logger)
            var response = try Response.json(established.result)
            response.headers[.cacheControl] = "no-store"
            try await sessions.signOut(session: request.cookie(cookies.sessionName), all: false)
            response.headers.append(
                HTTPField(name: .setCookie, value: cookies.setCookie(name: cookies.sessionName, value: established.session, maxAge: sessionLifetime)))
            return response
        }

        table.add(router, .post, "/v1/auth/signout") { request, _ in
            let allParameter = request.queryDictionary["all"] ?? "false"
            guard allParameter == "true" || allParameter == "false" else {
                throw GatehouseError.invalidArgument("all must be true or false.")
            }
            let all = allParameter == "true"
            try await sessions.signOut(session: request.cookie(cookies.sessionName), all: all)
            var response = Response(status: .noContent, headers: [.cacheControl: "no-store"])
            response.headers.append(HTTPField(name: .setCookie, value: cookies.deleteCookie(name: cookies.sessionName)))
            return response
        }
    }
}
