import GatehouseCore
import HTTPTypes
import Hummingbird
import Logging

/// Wraps the router so every error leaves as `application/problem+json`: unknown routes
/// (`404 not-found`), wrong methods (`405 method-not-allowed` with `Allow`), framework
/// errors, and unexpected failures (`500 internal`, logged with the request id, never shown).
/// It also sets the security headers every answer carries.
struct ProblemResponder<Inner: HTTPResponder>: HTTPResponder where Inner.Context == GatehouseRequestContext {
    let inner: Inner
    let routes: RouteTable
    let metrics: ServerMetrics
    let browser: BrowserPolicy
    /// Told of resource refusals, which `/readyz` reports.
    let storageHealth: StorageHealth
    let logger: Logger

    func respond(to request: Request, context: GatehouseRequestContext) async throws -> Response {
        let started = ContinuousClock.now
        var response: Response
        do {
            if let preflight = browser.preflight(request) {
                response = preflight
            } else {
                response = try await inner.respond(to: request, context: context)
            }
            if response.status.code >= 400, response.headers[.contentType] != "application/problem+json" {
                response = rewrite(response, request: request)
            }
        } catch let error as GatehouseError {
            if let cause = error.logDetail {
                logger.notice("upstream failure", metadata: ["request.id": "\(context.id)", "error.code": "\(error.code)", "cause": "\(cause)"])
            }
            response = error.problemResponse()
        } catch StorageError.unavailable {
            logger.warning("storage unavailable", metadata: ["request.id": "\(context.id)"])
            response = GatehouseError.storageUnavailable().problemResponse()
        } catch StorageError.exhausted(let condition) {
            // An operator's problem (a full disk, no connection slots): loud, and named.
            logger.error("storage unavailable", metadata: ["request.id": "\(context.id)", "condition": "\(condition)"])
            storageHealth.recordExhausted(condition)
            response = GatehouseError.storageUnavailable().problemResponse()
        } catch let error as any HTTPResponseError {
            response = rewrite(Response(status: error.status), request: request)
        } catch {
            var metadata: Logger.Metadata = ["request.id": "\(context.id)", "error.type": "\(String(reflecting: type(of: error)))"]
            if let store = error as? any StoreFailureSummary { metadata["store.error"] = "\(store.storeFailureSummary)" }
            logger.error("request failed", metadata: metadata)
            response = GatehouseError.internalError().problemResponse()
        }
        response.headers[.xContentTypeOptions] = "nosniff"
        browser.decorate(&response, for: request)
        if request.uri.path.hasPrefix("/v1/auth") {
            response.headers[HTTPField.Name("Referrer-Policy")!] = "no-referrer"
        }
        // The query string is never logged: callbacks carry codes and state in it.
        let elapsed = ContinuousClock.now - started
        metrics.request(
            method: request.method.rawValue, route: routes.template(method: request.method.rawValue, path: request.uri.path) ?? "unmatched",
            status: Int(response.status.code), duration: elapsed)
        logger.info(
            "request",
            metadata: [
                "request.id": "\(context.id)", "http.method": "\(request.method.rawValue)", "http.path": "\(request.uri.path)",
                "http.status": "\(response.status.code)",
                "duration.ms": "\(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000)",
            ])
        return response
    }

    private func rewrite(_ response: Response, request: Request) -> Response {
        switch response.status.code {
        case 404:
            let allowed = routes.methods(matching: request.uri.path)
            if !allowed.isEmpty, !allowed.contains(request.method.rawValue) {
                var problem = GatehouseError(
                    code: .methodNotAllowed, status: 405, title: "Method not allowed",
                    detail: "\(request.method.rawValue) is not supported here; use \(allowed.joined(separator: ", "))."
                ).problemResponse()
                problem.headers[.allow] = allowed.joined(separator: ", ")
                return problem
            }
            return GatehouseError.notFound().problemResponse()
        case 413:
            return GatehouseError(code: .invalidArgument, status: 413, title: "Request too large", detail: "The request body is too large.")
                .problemResponse()
        case 500...:
            return GatehouseError.internalError().problemResponse()
        default:
            return GatehouseError.invalidArgument("The request could not be processed (HTTP \(response.status.code)).").problemResponse()
        }
    }
}
