import HTTPTypes
import Hummingbird

/// Counts every call to an emulated endpoint and applies injected faults before the real
/// handler runs. The control path itself is neither counted nor faulted.
struct TrafficMiddleware<Context: RequestContext>: RouterMiddleware {
    let state: EmulatorState

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let path = request.uri.path
        guard !path.hasPrefix("/_emulator") else {
            return try await next(request, context)
        }
        let endpoint = "\(request.method.rawValue) \(path)"
        await state.count(endpoint)
        if let fault = await state.takeFault(for: endpoint) {
            if fault.delayMilliseconds > 0 {
                try await Task.sleep(for: .milliseconds(fault.delayMilliseconds))
            }
            if let status = fault.status {
                var headers = HTTPFields()
                for (name, value) in fault.headers {
                    if let field = HTTPField.Name(name) { headers[field] = value }
                }
                if headers[.contentType] == nil { headers[.contentType] = "application/json; charset=utf-8" }
                return Response(
                    status: HTTPResponse.Status(code: status), headers: headers, body: ResponseBody(byteBuffer: ByteBuffer(string: fault.body)))
            }
        }
        return try await next(request, context)
    }
}
