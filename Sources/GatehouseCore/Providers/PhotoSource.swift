import CurlClient

/// Opening a photo download at a provider: the status, the content type and the declared
/// size are checked on the response head, before a byte is passed on to anyone.
enum PhotoSource {
    /// GETs `request`; `nil` on `404`, `provider-reauth-required`/`upstream-…` on other
    /// failures, `upstream-unavailable` for an answer that is not a raster image (JPEG, PNG,
    /// GIF, WebP) or is declared too large. The returned body streams; libcurl aborts it past
    /// the provider's `maxPhotoBytes` (`GATEHOUSE_MAX_PHOTO_BYTES`); its leading bytes are
    /// checked against the type by `PhotoDownload`. With `userURL` (a URL whose path a user
    /// chose or shaped), an answer other than a 5xx says something about that URL, not that
    /// the host fails: its error is `.refusedByUpstream`, which no breaker counts.
    static func open(_ request: OutboundRequest, http: UpstreamHTTP, userURL: Bool = false) async throws -> ProviderPhoto? {
        let maxBytes = http.maxPhotoBytes
        var request = request
        request.maxResponseBytes = maxBytes
        let providerId = http.providerId
        let response = try await http.stream(request, endpoint: .photo)
        if response.head.status == 404 { return nil }
        guard response.head.status == 200 else {
            // The (small) error body tells rate limits and dead tokens apart.
            var error = UpstreamErrors.status(try await http.collect(response), providerId: providerId)
            if userURL, !(500..<600).contains(response.head.status) { error.situation = .refusedByUpstream }
            throw error
        }
        guard let type = RasterImage(contentType: response.head.headers["content-type"] ?? "") else {
            throw GatehouseError.upstreamUnavailable(
                providerId, situation: userURL ? .refusedByUpstream : .usual,
                detail: "\(providerId)'s photo answer is not an image (JPEG, PNG, GIF or WebP).")
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
    /// `caller` names whose photo it is (`providerId|federatedId`): the photo host's breaker
    /// opens only on failures met by two of them.
    static func openPublic(_ url: String, caller: String, http: UpstreamHTTP) async throws -> ProviderPhoto {
        var request = OutboundRequest(url: url, headers: ["Accept": "image/*"], timeout: http.photoTimeout)
        request.addresses = http.photoAddresses
        // One uniform photo-unavailable, remembered for a while (ProfileService): no wait of
        // the breaker's in it.
        let refused = { (origin: String, _: Int?) in
            GatehouseError.photoUnavailable(http.providerId, cause: "the photo host \(origin) has been failing; not calling it for now")
        }
        let photo: ProviderPhoto?
        do {
            // The breaker judges the host by the error itself: only a host that fails (no
            // connection, no answer in time, a 5xx) counts, and only when two users' photos
            // met it. A redirect, a refusal or a page that is no image is an answer about this
            // URL, which a user may choose or shape: no user's URL switches a shared image
            // host off for everyone else.
            photo = try await http.photoHosts.run(url, caller: caller, refused: refused) { try await open(request, http: http, userURL: true) }
        } catch let error as GatehouseError where error.code != .photoUnavailable && error.situation != .overloaded {
            // The gateway's own overload stays itself: a uniform photo-unavailable would be
            // remembered against this user's photo, which was never asked for.
            throw GatehouseError.photoUnavailable(http.providerId, cause: "\(error.code): \(error.detail)")
        }
        guard var photo else { throw GatehouseError.noPhoto() }
        photo.fromPublicURL = true
        return photo
    }
}
