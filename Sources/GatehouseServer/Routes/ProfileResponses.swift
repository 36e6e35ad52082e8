import GatehouseCore
import HTTPTypes
import Hummingbird
import NIOCore

/// The profile and photo answers the user's routes (`/v1/me…`) and the services' routes
/// (`/v1/users/{uid}…`) share: one way to mark stale answers, check photo sizes, tag,
/// revalidate and stream photos.
enum ProfileResponses {
    /// Photo sizes Graph serves (design §2); other providers scale to the same set.
    static let photoSizes: Set<Int> = [48, 64, 96, 120, 240, 360, 432, 504, 648]

    /// A provider profile answer, marked when it comes stale from the cache; its body is
    /// reused from `answers` while the identity's profile is unchanged.
    static func profile(_ served: ProfileService.Served<ProviderProfile>, answers: EncodedAnswers<ProviderProfileView>) throws -> Response {
        let profile = served.value
        var response = try answers.response(ProviderProfileView(profile), key: "\(profile.providerId)|\(profile.federatedId)")
        markStale(&response.headers, age: served.staleAge)
        return response
    }

    /// `Age` and `Warning: 110` (RFC 9111 §5.1, RFC 7234 §5.5.1) on an answer served from the
    /// cache because its provider is failing, so that callers can tell it is not live.
    static func markStale(_ headers: inout HTTPFields, age: Int?) {
        guard let age else { return }
        headers[.age] = String(age)
        headers[.warning] = "110 gatehouse \"Response is Stale\""
    }

    /// The photo answer of `/v1/me/photo` and `/v1/users/{uid}/photo`: `?size=` checked; from
    /// the cache, or on a miss streamed as the provider sends it; both with the same `ETag`
    /// (derived at the provider's head: `ProviderPhoto.entityTag`) and `304` on `If-None-Match`.
    /// (`ProfileService` answers a transfer that is already whole as a stored photo.)
    /// Bodies are written paced by the connection's `eventLoop` (`write(_:pacedBy:)`), so a
    /// slow reader holds back the writer instead of a queue of the image. `query` is the
    /// request's, decoded once by the caller (which may read `refresh` from it too).
    static func photo(
        _ request: Request, query: [String: String], eventLoop: any EventLoop, profiles: ProfileService, uid: String, refresh: Bool = false
    ) async throws -> Response {
        var size: Int?
        if let text = query["size"] {
            guard let value = Int(text), photoSizes.contains(value) else {
                throw GatehouseError.invalidArgument("size must be one of \(photoSizes.sorted().map(String.init).joined(separator: ", ")).")
            }
            size = value
        }
        let served = try await profiles.photo(uid: uid, providerId: query["provider"], size: size, refresh: refresh)
        let tags = (request.headers[.ifNoneMatch] ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let photo: ProfileService.Photo
        switch served.value {
        case .stored(let stored):
            photo = stored
        case .downloading(let download):
            // A tag known at the head (the provider's validator): a revalidation is answered
            // without the body (the transfer goes on and fills the cache), anything else
            // streams with the tag. An image without one streams untagged: its tag comes from
            // its bytes, which the cached answers carry.
            let head = try await download.head()
            var headers: HTTPFields = [.cacheControl: photoCacheControl]
            if let etag = head.etag { headers[.eTag] = etag }
            if head.etag.map(tags.contains) == true || tags.contains("*") {
                return Response(status: .notModified, headers: headers)
            }
            headers[.contentType] = head.contentType
            headers[.contentSecurityPolicy] = photoContentSecurityPolicy
            let body = ResponseBody(contentLength: head.contentLength) { writer in
                for try await piece in download.chunks() {
                    try await writer.write(ByteBuffer(photo: piece), pacedBy: eventLoop)
                    profiles.countPhotoBytes(piece.count)
                }
                try await writer.finish(nil)
            }
            return Response(status: .ok, headers: headers, body: body)
        }
        var headers: HTTPFields = [.eTag: photo.etag, .cacheControl: photoCacheControl]
        markStale(&headers, age: served.staleAge)
        if tags.contains(photo.etag) || tags.contains("*") {
            return Response(status: .notModified, headers: headers)
        }
        headers[.contentType] = photo.contentType
        headers[.contentSecurityPolicy] = photoContentSecurityPolicy
        return Response(
            status: .ok, headers: headers, body: storedPhotoBody(photo.bytes, eventLoop: eventLoop, written: profiles.countPhotoBytes))
    }

    /// Slices of a stored photo written one at a time, each after the previous one reached the
    /// channel (`write(_:pacedBy:)`): a connection holds about one slice beyond NIO's high-water
    /// mark, however slowly its reader reads (a slice of a `PhotoBuffer` shares the kept bytes,
    /// up to NIO's 16 MiB slice offset). `written` counts each slice as it goes (`gatehouse_photo_bytes_total`:
    /// a reader that leaves early is not counted for what it never got).
    static func storedPhotoBody(_ bytes: any PhotoBytes, eventLoop: any EventLoop, written: @escaping @Sendable (Int) -> Void) -> ResponseBody {
        if bytes.count <= photoSliceBytes {
            written(bytes.count)
            return ResponseBody(byteBuffer: ByteBuffer(photo: bytes, range: 0..<bytes.count))
        }
        return ResponseBody(contentLength: bytes.count) { writer in
            var start = 0
            while start < bytes.count {
                let end = min(start + photoSliceBytes, bytes.count)
                try await writer.write(ByteBuffer(photo: bytes, range: start..<end), pacedBy: eventLoop)
                written(end - start)
                start = end
            }
            try await writer.finish(nil)
        }
    }

    /// The slice size of a stored photo's answer (a 40 KB avatar goes in one write).
    static let photoSliceBytes = 64 << 10

    /// Photos are the user's own (private) and change rarely.
    static let photoCacheControl = "private, max-age=300"

    /// A photo opened as a document runs nothing and loads nothing (with `nosniff`, which
    /// every answer carries, a browser never reads it as anything but its image type).
    static let photoContentSecurityPolicy = "default-src 'none'; sandbox"
}

/// A provider profile as `GET /v1/me/providers/{id}/profile` shows it: the normalized fields
/// plus `rawUserInfo`, without the provider's photo URL.
struct ProviderProfileView: Encodable, Equatable, Sendable {
    let profile: ProviderProfile

    init(_ profile: ProviderProfile) { self.profile = profile }

    enum CodingKeys: String, CodingKey {
        case providerId, federatedId, username, displayName, givenName, familyName, email, emailVerified, profileURL, tenantId, locale,
            jobTitle, rawUserInfo
    }

    func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(profile.providerId, forKey: .providerId)
        try c.encode(profile.federatedId, forKey: .federatedId)
        try c.encode(profile.username, forKey: .username)
        try c.encode(profile.displayName, forKey: .displayName)
        try c.encode(profile.givenName, forKey: .givenName)
        try c.encode(profile.familyName, forKey: .familyName)
        try c.encode(profile.email, forKey: .email)
        try c.encode(profile.emailCountsAsVerified, forKey: .emailVerified)
        try c.encode(profile.profileURL, forKey: .profileURL)
        try c.encode(profile.tenantId, forKey: .tenantId)
        try c.encode(profile.locale, forKey: .locale)
        try c.encode(profile.jobTitle, forKey: .jobTitle)
        try c.encode(profile.rawUserInfo, forKey: .rawUserInfo)
    }
}
