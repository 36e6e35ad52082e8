import CurlClient

/// Fetching a photo that lives at a public URL (GitHub avatars, OIDC `picture`).
enum PublicPhoto {
    /// GETs `url` without any credential; `404` → `no-photo`, a non-image answer → `upstream-unavailable`.
    static func fetch(_ url: String, http: UpstreamHTTP) async throws -> ProviderPhoto {
        let providerId = http.providerId
        // Public images: no token is ever sent to the image host.
        let response = try await http.execute(OutboundRequest(url: url, headers: ["Accept": "image/*"], maxResponseBytes: 5 << 20))
        if response.status == 404 { throw GatehouseError.noPhoto() }
        guard response.status == 200 else { throw UpstreamErrors.status(response, providerId: providerId) }
        let contentType = response.headers["content-type"] ?? ""
        guard contentType.lowercased().hasPrefix("image/") else {
            throw GatehouseError.upstreamUnavailable(providerId, detail: "\(providerId)'s photo answer is not an image.")
        }
        return ProviderPhoto(bytes: response.body, contentType: contentType)
    }
}
