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
            if fault.holdMilliseconds > 0 { await state.pause(milliseconds: fault.holdMilliseconds) }
            if let status = fault.status {
                var headers = HTTPFields()
                for (name, value) in fault.headers {
                    if let field = HTTPField.Name(name) { headers[field] = value }
                }
                if headers[.contentType] == nil { headers[.contentType] = "application/json; charset=utf-8" }
                let body = fault.bodyBytes > 0 ? ByteBuffer(repeating: 0, count: fault.bodyBytes) : ByteBuffer(string: fault.body)
                return Response(status: HTTPResponse.Status(code: status), headers: headers, body: ResponseBody(byteBuffer: body))
            }
            if fault.pauseBodyMilliseconds > 0 {
                return try await Self.pausingBody(
                    try await next(request, context), milliseconds: fault.pauseBodyMilliseconds, chunked: fault.chunked, state: state)
            }
        }
        return try await next(request, context)
    }

    /// The answer with its body cut in two: the head and the first half go out at once, the
    /// second half after the pause (a provider sending a large image slowly); `chunked`
    /// leaves the length out.
    static func pausingBody(_ response: Response, milliseconds: Int, chunked: Bool, state: EmulatorState) async throws -> Response {
        var response = response
        let collector = BodyCollector()
        try await response.body.write(collector)
        let bytes = collector.buffer
        let half = bytes.readableBytes / 2
        if chunked { response.headers[.contentLength] = nil }
        response.body = ResponseBody(contentLength: chunked ? nil : bytes.readableBytes) { writer in
            try await writer.write(bytes.getSlice(at: bytes.readerIndex, length: half)!)
            await state.pause(milliseconds: milliseconds)
            try await writer.write(bytes.getSlice(at: bytes.readerIndex + half, length: bytes.readableBytes - half)!)
            try await writer.finish(nil)
        }
        return response
    }
}

/// Gathers a response body in memory (the emulator's own answers are small).
final class BodyCollector: ResponseBodyWriter {
    var buffer = ByteBuffer()

    func write(_ buffer: ByteBuffer) async throws {
        var buffer = buffer
        self.buffer.writeBuffer(&buffer)
    }

    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
