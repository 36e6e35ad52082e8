import Crypto
import Foundation
import Hummingbird

/// OneDrive's simple upload (`PUT /v1.0/me/drive/items/{item-id}/content`, providers.md §2:
/// up to 250 MB in one request) behind `Files.ReadWrite`, for the gateway's streamed request
/// bodies. The body is read as it arrives and counted (`MicrosoftState.uploadedBytes`), so a
/// test can watch bytes reach the provider before its caller has sent them all.
struct GraphDriveRoutes {
    /// Graph's token check and the Microsoft state (the upload counter).
    let graph: GraphRoutes

    /// The largest file this emulated drive takes.
    static let maxFileBytes = 64 << 20

    /// Adds the upload route.
    func register(on router: Router<BasicRequestContext>) {
        router.put("/graph/v1.0/me/drive/items/:id/content") { request, context in
            // Unlike Graph, the body is read before the token is checked: a refusal that arrives
            // while the caller still sends can surface as a reset connection instead of the 401,
            // and the gateway's refresh-and-retry is what the tests look at.
            var hash = SHA256()
            var size = 0
            for try await buffer in request.body {
                size += buffer.readableBytes
                guard size <= Self.maxFileBytes else {
                    return MicrosoftErrors.graph("maxFileSizeExceeded", "The file is larger than this drive accepts.", status: .contentTooLarge)
                }
                buffer.withUnsafeReadableBytes { hash.update(bufferPointer: $0) }
                await graph.state.received(uploadBytes: buffer.readableBytes)
            }
            let id = context.parameters.get("id") ?? ""
            let digest = Hex.string(hash.finalize(), uppercase: true)
            return await graph.authorized(request) { _, token in
                guard GraphDataRoutes.granted(token, any: ["Files.ReadWrite", "Files.ReadWrite.All"]) else { return GraphDataRoutes.accessDenied() }
                return Response.json([
                    "id": id, "name": "\(id).bin", "size": size,
                    "file": ["mimeType": request.headers[.contentType] ?? "application/octet-stream", "hashes": ["sha256Hash": digest]],
                ])
            }
        }
    }
}
