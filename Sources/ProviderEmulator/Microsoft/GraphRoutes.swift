import Foundation
import Hummingbird

/// Microsoft Graph under `/graph` (providers.md §2): `/v1.0/me`, photo metadata and binaries.
struct GraphRoutes {
    let state: MicrosoftState

    func register(on router: Router<BasicRequestContext>) {
        router.get("/graph/v1.0/me") { request, _ in
            await authorized(request) { user in Response.json(Self.me(user)) }
        }
        router.get("/graph/v1.0/me/photo") { request, _ in
            await authorized(request) { user in
                guard let size = user.photoSize else { return Self.noPhoto(user, metadata: true) }
                return Response.json(
                    [
                        "@odata.context": "https://graph.microsoft.com/v1.0/$metadata#users('\(user.oid)')/photo/$entity",
                        "@odata.mediaContentType": "image/jpeg", "@odata.mediaEtag": "\"\(Self.mediaTag(user, size))\"", "id": "\(size)X\(size)",
                        "width": size, "height": size,
                    ])
            }
        }
        router.get("/graph/v1.0/me/photo/$value") { request, _ in
            await authorized(request) { user in
                guard let size = user.photoSize else { return Self.noPhoto(user, metadata: false) }
                return Self.jpeg(user, size)
            }
        }
        router.get("/graph/v1.0/me/photos/:size/$value") { request, context in
            await authorized(request) { user in
                let segment = (context.parameters.get("size") ?? "").lowercased().split(separator: "x")
                guard segment.count == 2, segment[0] == segment[1], let size = Int(segment[0]), MicrosoftDirectory.photoSizes.contains(size) else {
                    return MicrosoftErrors.graph("ErrorInvalidSize", "The requested photo size is not supported.", status: .badRequest)
                }
                guard let uploaded = user.photoSize else { return Self.noPhoto(user, metadata: false) }
                // A size larger than the upload is not available.
                guard size <= uploaded else {
                    return MicrosoftErrors.graph(
                        "ImageNotFound", "Exception of type 'Microsoft.Fast.Profile.Core.Exception.ImageNotFoundException' was thrown.",
                        status: .notFound)
                }
                return Self.jpeg(user, size)
            }
        }
    }

    /// Runs `body` for the token's user, or answers Graph's 401 `InvalidAuthenticationToken`.
    func authorized(_ request: Request, _ body: (MicrosoftSeedUser) -> Response) async -> Response {
        await authorized(request) { user, _ in body(user) }
    }

    /// Runs `body` for the token's user and its grant, or answers Graph's 401 `InvalidAuthenticationToken`.
    func authorized(_ request: Request, _ body: (MicrosoftSeedUser, MicrosoftToken) -> Response) async -> Response {
        guard let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer "),
            let record = await state.access(String(header.dropFirst(7))), !record.expired, !record.revoked,
            let user = MicrosoftDirectory.users.first(where: { $0.hint == record.userHint })
        else {
            return MicrosoftErrors.graph(
                "InvalidAuthenticationToken", "Access token has expired or is not yet valid.", status: .unauthorized,
                headers: [
                    .wwwAuthenticate:
                        "Bearer realm=\"\", authorization_uri=\"https://login.microsoftonline.com/common/oauth2/authorize\", client_id=\"00000003-0000-0000-c000-000000000000\""
                ])
        }
        return body(user, record)
    }

    /// The work or personal shape of `/me`.
    static func me(_ user: MicrosoftSeedUser) -> [String: Any] {
        let null = NSNullValue.null
        return [
            "@odata.context": "https://graph.microsoft.com/v1.0/$metadata#users/$entity",
            "businessPhones": [String](), "displayName": user.displayName, "givenName": user.givenName, "surname": user.surname,
            "id": user.cid ?? user.oid, "jobTitle": user.jobTitle ?? null, "mail": user.mail ?? null, "mobilePhone": null,
            "officeLocation": null, "preferredLanguage": user.preferredLanguage ?? null, "userPrincipalName": user.userPrincipalName,
        ]
    }

    /// Each backend's "no photo" 404 (providers.md §2.2).
    static func noPhoto(_ user: MicrosoftSeedUser, metadata: Bool) -> Response {
        if user.isPersonal {
            return MicrosoftErrors.graph("ConsumerPhotoIsNotSupported", "Photo is not supported for consumer accounts.", status: .notFound)
        }
        return metadata
            ? MicrosoftErrors.graph(
                "ImageNotFound", "Exception of type 'Microsoft.Fast.Profile.Core.Exception.ImageNotFoundException' was thrown.", status: .notFound)
            : MicrosoftErrors.graph("ErrorItemNotFound", "The photo wasn't found.", status: .notFound)
    }

    static func jpeg(_ user: MicrosoftSeedUser, _ size: Int) -> Response {
        let level = UInt8(truncatingIfNeeded: user.oid.utf8.reduce(40) { $0 &+ Int($1) } % 160 + 48)
        return Response(
            status: .ok, headers: [.contentType: "image/jpeg", .eTag: "\"\(mediaTag(user, size))\""],
            body: ResponseBody(byteBuffer: ByteBuffer(bytes: FlatJPEG.jpeg(width: size, height: size, level: level))))
    }

    static func mediaTag(_ user: MicrosoftSeedUser, _ size: Int) -> String {
        String(format: "%08X", user.oid.utf8.reduce(UInt32(size)) { $0 &* 31 &+ UInt32($1) })
    }
}
