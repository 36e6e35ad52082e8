import CurlClient

/// Opening a photo download at a provider: the status, the content type and the declared
/// size are checked on the response head, before a byte is passed on to anyone.
enum PhotoSource {
    /// GETs `request`; `nil` on `404`, `provider-reauth-required`/`upstream-…` on other
    /// failures, `upstream-unavailable` for an answer that is not a raster image (JPEG, PNG,
    /// GIF, WebP) or is declared too large. The returned body streams; libcurl aborts it past
    /// the provider's `maxPhotoBytes` (`GATEHOUSE_MAX_PHOTO_BYTES`); its leading bytes are
    /// checked against the type by `PhotoDownload`.
    static func open(_ request: OutboundRequest, http: UpstreamHTTP) async throws -> ProviderPhoto? {
        let maxBytes = http.maxPhotoBytes
        var request = request
        request.maxResponseBytes = maxBytes
        let providerId = http.providerId
        let response = try await http.stream(request, endpoint: .photo)
        if response.head.status == 404 { return nil }
        guard response.head.status == 200 else {
            // The (small) error body tells rate limits and dead tokens apart.
            throw UpstreamErrors.status(try await http.collect(response), providerId: providerId)
        }
        guard let type = RasterImage(contentType: response.head.headers["content-type"] ?? "") else {
            throw GatehouseError.upstreamUnavailable(providerId, detail: "\(providerId)'s photo answer is not an image (JPEG, PNG, GIF or WebP).")
        }
        let declared = response.head.headers["content-length"].flatMap { Int($0) }
        if let declared, declared > maxBytes {
            throw UpstreamErrors.transport(OutboundError(kind: .responseTooLarge, message: "declared \(declared) bytes"), providerId: providerId)
        }
        var photo = ProviderPhoto(contentType: type.rawValue, contentLength: declared, body: response.body)
        photo.sourceURL = request.url
        photo.validator = response.head.headers["etag"] ?? response.head.headers["last-modified"]
        return photo
    }

    /// A photo at a URL the provider or the user chose (GitHub avatars, OIDC `picture`),
    /// already checked against the provider's allow-list; fetched without any credential (no
    /// token is ever sent to an image host), only from public addresses outside development
    /// mode. `404` → `no-photo`; every other failure is one uniform `photo-unavailable`.
    static func openPublic(_ url: String, http: UpstreamHTTP) async throws -> ProviderPhoto {
        var request = OutboundRequest(url: url, headers: ["Accept": "image/*"], timeout: http.photoTimeout)
        request.addresses = http.photoAddresses
        // One uniform photo-unavailable, remembered for a while (ProfileService): no wait of
        // the breaker's in it.
        let refused = { (origin: String, _: Int?) in
            GatehouseError.photoUnavailable(http.providerId, cause: "the photo host \(origin) has been failing; not calling it for now")
        }
        let photo = try await http.photoHosts.run(url, refused: refused) {
            do {
                return try await open(request, http: http)
            } catch let error as GatehouseError {
                throw GatehouseError.photoUnavailable(http.providerId, cause: "\(error.code): \(error.detail)")
            }
        }
        guard let photo else { throw GatehouseError.noPhoto() }
        return photo
    }
}
