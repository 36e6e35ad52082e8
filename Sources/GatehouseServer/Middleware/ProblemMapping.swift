import GatehouseCore
import HTTPTypes
import Hummingbird
import Logging
import NIOHTTP1

/// How every error leaves as `application/problem+json`. Unknown routes are `404
/// not-found`, wrong methods `405 method-not-allowed` with `Allow`, framework errors keep
/// their status, a provider's answer on a passthrough route and an HTML page stay as they
/// are, store outages are `503 storage-unavailable`, a request body that broke off is `408`
/// (`400` when its framing is wrong), and anything unexpected is `500
/// internal`, logged with the request id and never shown. `GatewayMiddleware` maps what the
/// routes answer or throw through it: nothing is thrown past it.
struct ProblemMapping: Sendable {
    /// Tells `405` from `404`.
    let routes: RouteTable
    /// Told of resource refusals, which `/readyz` reports.
    let storageHealth: StorageHealth
    let logger: Logger

    /// A route's answer: a bare error status becomes a problem document.
    func checked(_ response: Response, for request: Request) -> Response {
        // A page rendered for a browser (the console's refusals) keeps its words: it names
        // the problem's code itself.
        guard response.status.code >= 400, response.headers[.contentType] != "application/problem+json",
            response.headers[.contentType]?.hasPrefix("text/html") != true,
            !routes.answersVerbatim(method: request.method.rawValue, path: request.uri.path)
        else { return response }
        return rewrite(response.status, request: request)
    }

    /// What a route threw, as a problem document.
    func response(for error: any Error, to request: Request) -> Response {
        if let error = error as? any HTTPResponseError, !(error is GatehouseError) { return rewrite(error.status, request: request) }
        return answer(problem(for: error), to: request)
    }

    /// The problem document of `problem`. The token endpoint's problems also carry RFC 6749
    /// §5.2's `error` (`TokenRoutes.oauthError`), whatever failed: an OAuth client reads that
    /// member, and one missing may make it drop a refresh token a retry would have used.
    private func answer(_ problem: GatehouseError, to request: Request) -> Response {
        guard TokenRoutes.isTokenPath(request.uri.path) else { return problem.problemResponse() }
        let oauth = TokenRoutes.oauthError(problem)
        return oauth.problemResponse(status: TokenRoutes.oauthStatus(oauth))
    }

    /// What a route threw, as a problem.
    private func problem(for error: any Error) -> GatehouseError {
        // Rethrown to match it with `catch` patterns (enum cases of `StorageError` among them).
        do {
            throw error
        } catch let error as GatehouseError {
            if let cause = error.logDetail {
                logger.notice("upstream failure", metadata: ["error.code": "\(error.code)", "cause": "\(cause)"])
            }
            return error
        } catch StorageError.unavailable {
            logger.warning("storage unavailable")
            return GatehouseError.storageUnavailable()
        } catch StorageError.exhausted(let condition) {
            // An operator's problem (a full disk, no connection slots): loud, and named.
            logger.error("storage unavailable", metadata: ["condition": "\(condition)"])
            storageHealth.recordExhausted(condition)
            return GatehouseError.storageUnavailable()
        } catch let error as HTTPParserError {
            // The request body's bytes broke off: the client's doing, or the listener closing a
            // body that stalled or trickled. Only that request is lost; nothing to alert on.
            logger.info("request body broke off", metadata: ["error.type": "\(error)"])
            if error == .invalidEOFState { return GatehouseError.requestBodyTimedOut() }
            return GatehouseError(code: .invalidArgument, detail: "The request body is not well-formed HTTP.")
        } catch {
            var metadata: Logger.Metadata = ["error.type": "\(String(reflecting: type(of: error)))"]
            if let store = error as? any StoreFailureSummary { metadata["store.error"] = "\(store.storeFailureSummary)" }
            logger.error("request failed", metadata: metadata)
            return GatehouseError.internalError()
        }
    }

    /// A framework's bare status as a problem document; a `404` of a path with other methods is
    /// `405 method-not-allowed`, with `Allow`.
    private func rewrite(_ status: HTTPResponse.Status, request: Request) -> Response {
        let allowed = status.code == 404 ? routes.methods(matching: request.uri.path) : []
        if !allowed.isEmpty, !allowed.contains(request.method.rawValue) {
            var problem = answer(
                GatehouseError(
                    code: .methodNotAllowed, detail: "\(request.method.rawValue) is not supported here; use \(allowed.joined(separator: ", "))."),
                to: request)
            problem.headers[.allow] = allowed.joined(separator: ", ")
            return problem
        }
        return answer(Self.problem(status: status), to: request)
    }

    /// A framework's bare status as a problem.
    private static func problem(status: HTTPResponse.Status) -> GatehouseError {
        switch status.code {
        case 404: GatehouseError.notFound()
        case 413: GatehouseError(code: .invalidArgument, situation: .tooLarge, detail: "The request body is too large.")
        case 500...: GatehouseError.internalError()
        default: GatehouseError.invalidArgument("The request could not be processed (HTTP \(status.code)).")
        }
    }
}
