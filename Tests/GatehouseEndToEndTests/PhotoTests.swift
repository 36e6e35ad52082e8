import Crypto
import CurlClient
import Foundation
import GatehouseCore
import GatehouseSQLite
import Testing

/// Photos on a cache miss stream from the provider to every caller that asked meanwhile; the
/// whole image lands in the cache with its strong `ETag`.
@Suite("Photo streaming")
struct PhotoStreamingTests {
    static let avatar = "GET /github-avatars/u/583231"

    /// Runs `body` with a deployment where octocat is signed in, his uid and a `photo:read` service key.
    static func withSignedIn(
        cacheLifetime: TimeInterval, gateway: @Sendable @escaping (inout GatewayConfiguration) -> Void = { _ in },
        _ body: (TestDeployment, _ uid: String, _ key: String) async throws -> Void
    ) async throws {
        try await withDeployment(profileCacheLifetime: cacheLifetime, gateway: gateway) { deployment in
            var browser = Browser(deployment)
            let resultID = try await browser.signIn(login: "octocat")
            let uid = try #require((try jsonObject(try await browser.result(resultID))["user"] as? [String: Any])?["uid"] as? String)
            let key = try await ServiceKeyService(storage: try GatehouseSQLiteStorageForSpec.open(deployment.databasePath))
                .create(name: "photos", scopes: ["photo:read"])
            try await body(deployment, uid, key.secret)
        }
    }

    static func request(_ deployment: TestDeployment, uid: String, key: String, headers: OutboundHeaders = [:]) -> OutboundRequest {
        var all = headers
        all.add("Authorization", "Bearer \(key)")
        return OutboundRequest(url: "\(deployment.gatewayURL)/v1/users/\(uid)/photo?size=96", headers: all)
    }

    @Test(
        "a miss streams: head (with its ETag) and first bytes arrive while GitHub still holds the rest; a second caller joins that transfer; then cached with the same ETag"
    )
    func missStreams() async throws {
        // GitHub sends the head and half the image, then waits until released. A gateway that
        // buffered would answer only after the release, which comes after both heads: it would
        // run into the photo timeout (120 s, long enough for a loaded machine to get to the
        // release) and fail, with no timing of the test's own.
        try await Self.withSignedIn(cacheLifetime: 60, gateway: { $0.photoTimeout = .seconds(120) }) { deployment, uid, key in
            _ = try await deployment.control("faults", #"{"endpoint": "\#(Self.avatar)", "pauseBodyMs": 3600000, "times": 1}"#)
            let first = try await deployment.client.stream(Self.request(deployment, uid: uid, key: key))
            var firstIterator = first.body.makeAsyncIterator()
            var firstBytes = try #require(try await firstIterator.next())
            // The tag is known at the head.
            #expect(first.head.status == 200)
            #expect(first.head.headers["content-type"] == "image/png")
            let streamedTag = try #require(first.head.headers["etag"])
            #expect(first.head.headers["cache-control"] == "private, max-age=300")
            #expect(!firstBytes.isEmpty)

            // Joins the running transfer: gets the bytes so far at once, the rest with the first caller.
            let second = try await deployment.client.stream(Self.request(deployment, uid: uid, key: key))
            #expect(second.head.status == 200)
            #expect(second.head.headers["etag"] == streamedTag)
            _ = try await deployment.control("faults/release", "{}")
            while let chunk = try await firstIterator.next() { firstBytes += chunk }
            let secondBytes = try await second.collect().body
            #expect(firstBytes.starts(with: [0x89, 0x50, 0x4E, 0x47]))
            #expect(secondBytes == firstBytes)
            #expect(first.head.headers["content-length"] == String(firstBytes.count))
            #expect(try await deployment.emulatorStats()[Self.avatar] == 1)

            // The whole image is in the cache before a caller gets its last byte: same bytes,
            // same tag, no new call; a revalidation with the streamed tag is 304.
            let cached = try await deployment.client.execute(Self.request(deployment, uid: uid, key: key))
            #expect(cached.status == 200)
            #expect(cached.body == firstBytes)
            #expect(cached.headers["etag"] == streamedTag)
            let revalidated = try await deployment.client.execute(
                Self.request(deployment, uid: uid, key: key, headers: ["If-None-Match": streamedTag]))
            #expect(revalidated.status == 304)
            #expect(try await deployment.emulatorStats()[Self.avatar] == 1)
        }
    }

    @Test(
        "the photo cache charges what a kept photo's buffer takes (NIO's power-of-two storage), not the image's size, and reports it as gatehouse_cache_used"
    )
    func cacheChargesStorage() async throws {
        try await Self.withSignedIn(cacheLifetime: 60) { deployment, uid, key in
            let image = try await deployment.client.execute(Self.request(deployment, uid: uid, key: key))
            #expect(image.status == 200)
            let size = image.body.count
            var storage = 1
            while storage < size { storage *= 2 }
            #expect(size < storage, "the avatar fixture is not a power of two, so the two charges differ")
            #expect(try await ResilienceTests.metric(deployment, "gatehouse_cache_used", ["cache": "photo"]) == Double(storage))
            #expect(try await deployment.emulatorStats()[Self.avatar] == 1)
        }
    }

    @Test("20 concurrent misses → one avatar call, twenty identical images")
    func concurrentMissesShareOneCall() async throws {
        try await Self.withSignedIn(cacheLifetime: 60) { deployment, uid, key in
            _ = try await deployment.control("faults", #"{"endpoint": "\#(Self.avatar)", "delayMs": 300, "times": 1}"#)
            let request = Self.request(deployment, uid: uid, key: key)
            let answers = try await withThrowingTaskGroup(of: OutboundResponse.self) { group in
                for _ in 0..<20 { group.addTask { try await deployment.client.execute(request) } }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(answers.map(\.status) == Array(repeating: 200, count: 20))
            #expect(Set(answers.map(\.body)).count == 1)
            #expect(answers[0].body.count > 100)
            #expect(try await deployment.emulatorStats()[Self.avatar] == 1)
        }
    }

    @Test("revalidation on a miss is answered at the provider's head: 304 when the tag matches, 200 with the tag when it does not")
    func revalidationOnMiss() async throws {
        try await Self.withSignedIn(cacheLifetime: 1) { deployment, uid, key in
            // Revalidation with a tag that does not match: streamed, with the tag.
            let tagged = try await deployment.client.execute(Self.request(deployment, uid: uid, key: key, headers: ["If-None-Match": "\"older\""]))
            #expect(tagged.status == 200)
            #expect(tagged.body.starts(with: [0x89, 0x50, 0x4E, 0x47]))
            let etag = try #require(tagged.headers["etag"])
            #expect(try await deployment.emulatorStats()[Self.avatar] == 1)

            deployment.clock.advance(by: 1.2)
            let notModified = try await deployment.client.execute(Self.request(deployment, uid: uid, key: key, headers: ["If-None-Match": etag]))
            #expect(notModified.status == 304)
            #expect(notModified.headers["etag"] == etag)
            #expect(notModified.body.isEmpty)
            #expect(try await deployment.emulatorStats()[Self.avatar] == 2)

            deployment.clock.advance(by: 1.2)
            let changed = try await deployment.client.execute(Self.request(deployment, uid: uid, key: key, headers: ["If-None-Match": "\"other\""]))
            #expect(changed.status == 200)
            #expect(changed.headers["etag"] == etag)
            #expect(changed.body == tagged.body)
            #expect(try await deployment.emulatorStats()[Self.avatar] == 3)
        }
    }

    @Test(
        "GitHub's avatar host stalling half-way past the photo timeout: the streamed answer is cut short, nothing is cached, the next caller gets a whole image"
    )
    func failureHalfWay() async throws {
        // Only the avatar host's timeout is short: the sign-in's GitHub API calls keep theirs,
        // so a loaded machine cannot fail the sign-in (it once did with a 2 s GitHub timeout).
        // 8 s: the whole image, the second time, must come within it on a loaded run too.
        try await Self.withSignedIn(cacheLifetime: 60, gateway: { $0.photoTimeout = .seconds(8) }) { deployment, uid, key in
            _ = try await deployment.control("faults", #"{"endpoint": "\#(Self.avatar)", "pauseBodyMs": 60000, "times": 1}"#)
            let cut = try await deployment.client.stream(Self.request(deployment, uid: uid, key: key))
            #expect(cut.head.status == 200)
            // The head promised the whole length; the connection ends before it.
            await #expect(throws: OutboundError.self) { _ = try await cut.collect() }

            let whole = try await deployment.client.execute(Self.request(deployment, uid: uid, key: key))
            #expect(whole.status == 200)
            #expect(whole.body.starts(with: [0x89, 0x50, 0x4E, 0x47]))
            #expect(whole.headers["content-length"] == String(whole.body.count))
            #expect(try await deployment.emulatorStats()[Self.avatar] == 2)
        }
    }
}

/// Which linked provider's photo `/photo` serves: `?provider=`, else the configured order,
/// else the first linked provider with a photo.
@Suite("Photo provider preference")
struct PhotoPreferenceTests {
    /// Calls per emulated picture host: GitHub's avatars and the OpenID issuer's pictures.
    static func pictureCalls(_ deployment: TestDeployment) async throws -> (github: Int, oidc: Int) {
        let stats = try await deployment.emulatorStats()
        let oidc = stats.filter { $0.key.hasPrefix("GET ") && $0.key.contains("/pictures/") }.values.reduce(0, +)
        return (stats[PhotoStreamingTests.avatar] ?? 0, oidc)
    }

    /// Runs `body` with octocat (GitHub avatar) signed in and Olive's OpenID identity (a `picture`) linked second.
    static func withTwoPhotos(order: [String], _ body: (TestDeployment, Browser) async throws -> Void) async throws {
        try await withDeployment(gateway: { $0.photoProviderOrder = order }) { deployment in
            var browser = Browser(deployment)
            #expect(try await browser.complete(login: "octocat").status == 200)
            #expect(try await browser.complete(login: "olive@oidc.example", provider: "oidc.emulator", mode: "link").status == 200)
            try await body(deployment, browser)
        }
    }

    @Test("default: the first linked provider's photo; ?provider= picks another; an unlinked provider is 404 provider-not-linked")
    func firstLinkedByDefault() async throws {
        try await Self.withTwoPhotos(order: []) { deployment, browser in
            var browser = browser
            let photo = "\(deployment.gatewayURL)/v1/me/photo"
            let github = try await browser.send(photo)
            #expect(github.status == 200)
            #expect(try await Self.pictureCalls(deployment) == (1, 0))
            let oidc = try await browser.send(photo + "?provider=oidc.emulator")
            #expect(oidc.status == 200)
            #expect(oidc.headers["content-type"] == "image/png")
            #expect(oidc.body != github.body)
            #expect(try await Self.pictureCalls(deployment) == (1, 1))
            let unlinked = try await browser.send(photo + "?provider=yahoo.com")
            #expect(unlinked.status == 404)
            #expect(try jsonObject(unlinked)["code"] as? String == "provider-not-linked")
        }
    }

    @Test(
        "default: the first linked provider's photo failing before its first byte leaves the photo to the next one, and its failure is remembered as its own: asked for by name it fails at once"
    )
    func nextProviderWhenTheFirstFails() async throws {
        try await Self.withTwoPhotos(order: []) { deployment, browser in
            var browser = browser
            _ = try await deployment.control("faults", #"{"endpoint": "\#(PhotoStreamingTests.avatar)", "status": 500, "times": 1}"#)
            let photo = try await browser.send("\(deployment.gatewayURL)/v1/me/photo")
            #expect(photo.status == 200, "\(photo.status): \(photo.bodyText)")
            #expect(photo.headers["content-type"] == "image/png", "the OpenID picture")
            #expect(try await Self.pictureCalls(deployment) == (1, 1))
            let named = try await browser.send("\(deployment.gatewayURL)/v1/me/photo?provider=github.com")
            #expect(named.status == 502, "\(named.status): \(named.bodyText)")
            #expect(try await Self.pictureCalls(deployment) == (1, 1), "not asked again within the failure's memory")
        }
    }

    @Test("GATEHOUSE_PHOTO_PROVIDERS=oidc.emulator: the OpenID picture first, though GitHub was linked first")
    func configuredOrder() async throws {
        try await Self.withTwoPhotos(order: ["oidc.emulator"]) { deployment, browser in
            var browser = browser
            let preferred = try await browser.send("\(deployment.gatewayURL)/v1/me/photo")
            #expect(preferred.status == 200)
            #expect(try await Self.pictureCalls(deployment) == (0, 1))
            let github = try await browser.send("\(deployment.gatewayURL)/v1/me/photo?provider=github.com")
            #expect(github.body != preferred.body)
            #expect(try await Self.pictureCalls(deployment) == (1, 1))
        }
    }
}

/// What the gateway accepts from a photo source: images only, under the size cap; Yahoo's
/// `picture` like any OpenID one.
@Suite("Photo sources")
struct PhotoSourceTests {
    @Test(
        "an answer that is not an image, or declares more than 5 MiB, is 502 photo-unavailable before any byte is passed on, and nothing is cached"
    )
    func refusedAnswers() async throws {
        try await PhotoStreamingTests.withSignedIn(cacheLifetime: 60) { deployment, uid, key in
            let avatar = PhotoStreamingTests.avatar
            _ = try await deployment.control(
                "faults",
                #"{"endpoint": "\#(avatar)", "status": 200, "headers": {"Content-Type": "text/html"}, "body": "<html>sign in</html>", "times": 1}"#)
            let html = try await deployment.client.execute(PhotoStreamingTests.request(deployment, uid: uid, key: key))
            #expect(html.status == 502)
            #expect(html.headers["content-type"]?.hasPrefix("application/problem+json") == true)
            // One uniform answer for every photo-source failure; the cause goes to the log.
            #expect(try jsonObject(html)["code"] as? String == "photo-unavailable")
            #expect(try jsonObject(html)["providerId"] as? String == "github.com")
            let holds = deployment.logs.lines.contains { $0.contains("upstream failure") && $0.contains("not an image") }
            #expect(holds)
            // A failed source is remembered for a minute (the negative cache): let it pass.
            deployment.clock.advance(by: 61)

            _ = try await deployment.control(
                "faults", #"{"endpoint": "\#(avatar)", "status": 200, "headers": {"Content-Type": "image/png"}, "bodyBytes": 6000000, "times": 1}"#)
            let large = try await deployment.client.execute(PhotoStreamingTests.request(deployment, uid: uid, key: key))
            #expect(large.status == 502)
            #expect(try jsonObject(large)["code"] as? String == "photo-unavailable")
            let holds2 = deployment.logs.lines.contains { $0.contains("upstream failure") && $0.contains("larger answer") }
            #expect(holds2)
            // A failed source is remembered for a minute (the negative cache): let it pass.
            deployment.clock.advance(by: 61)

            // Neither was cached: the next call goes to GitHub again and gets the real avatar.
            let real = try await deployment.client.execute(PhotoStreamingTests.request(deployment, uid: uid, key: key))
            #expect(real.status == 200)
            #expect(real.body.starts(with: [0x89, 0x50, 0x4E, 0x47]))
            #expect(try await deployment.emulatorStats()[avatar] == 3)
        }
    }

    @Test(
        "a photo host's breaker counts only the host failing, for two users' photos: a redirect, a 403 or a page instead of an image count for nothing, one avatar's 503s alone leave it closed, both users' 503s open it"
    )
    func oneUsersPhotoCannotOpenTheHostsBreaker() async throws {
        try await withDeployment { deployment in
            var octocat = Browser(deployment)
            #expect(try await octocat.complete(login: "octocat").status == 200)
            var pat = Browser(deployment)
            #expect(try await pat.complete(login: "private-pat").status == 200)
            let (avatar, patsAvatar) = (PhotoStreamingTests.avatar, "GET /github-avatars/u/1000002")
            let photo = "\(deployment.gatewayURL)/v1/me/photo?refresh=true"
            // Answers that a URL a user chose or shaped draws from a host that works count for
            // nothing: a 403, then four in a row, then one 503 for Pat's avatar leave the
            // breaker closed.
            try await TrustTests.fault(deployment, ["endpoint": avatar, "status": 403, "body": "{}", "times": 1])
            try await TrustTests.fault(
                deployment, ["endpoint": avatar, "status": 302, "headers": ["Location": "/elsewhere"], "body": "", "times": 2])
            try await TrustTests.fault(
                deployment, ["endpoint": avatar, "status": 200, "headers": ["Content-Type": "text/html"], "body": "<html></html>", "times": 2])
            try await TrustTests.fault(deployment, ["endpoint": patsAvatar, "status": 503, "body": "{}", "times": 1])
            for _ in 0..<5 {
                let refused = try await octocat.send(photo)
                #expect(refused.status == 502 && TrustTests.code(refused) == "photo-unavailable", "\(refused.status) \(refused.bodyText)")
            }
            #expect(try await pat.send(photo).status == 502)
            let served = try await octocat.send(photo)
            #expect(served.status == 200, "\(served.status) \(served.bodyText)")

            // The host failing for one user's photo alone, six times in a row, leaves it closed.
            try await TrustTests.fault(deployment, ["endpoint": avatar, "status": 503, "body": "{}", "times": 6])
            for _ in 0..<6 { #expect(try await octocat.send(photo).status == 502) }
            let pats = try await pat.send(photo)
            #expect(pats.status == 200, "\(pats.status) \(pats.bodyText)")

            // The host failing for both users' photos opens it: the next photo is not fetched.
            try await TrustTests.fault(deployment, ["endpoint": avatar, "status": 503, "body": "{}", "times": 3])
            try await TrustTests.fault(deployment, ["endpoint": patsAvatar, "status": 503, "body": "{}", "times": 3])
            for _ in 0..<3 {
                _ = try await octocat.send(photo)
                _ = try await pat.send(photo)
            }
            let before = try await deployment.emulatorStats()[patsAvatar] ?? 0
            let refused = try await pat.send(photo)
            #expect(refused.status == 502 && TrustTests.code(refused) == "photo-unavailable", "\(refused.status) \(refused.bodyText)")
            #expect(try await deployment.emulatorStats()[patsAvatar] ?? 0 == before)
        }
    }

    @Test(
        "a public photo whose body breaks off (no more bytes within the photo timeout), for two users three times each, never counts against its provider's breaker: profiles are still served"
    )
    func brokenPhotoBodiesLeaveTheProviderAlone() async throws {
        try await withDeployment(gateway: { $0.photoTimeout = .seconds(1) }) { deployment in
            var octocat = Browser(deployment)
            #expect(try await octocat.complete(login: "octocat").status == 200)
            var pat = Browser(deployment)
            #expect(try await pat.complete(login: "private-pat").status == 200)
            let photo = "\(deployment.gatewayURL)/v1/me/photo?refresh=true"
            // The head and the image's first half arrive, then nothing: the callers' answers
            // break off after their head, so only what the gateway counted is checked.
            let avatars = [PhotoStreamingTests.avatar, "GET /github-avatars/u/1000002"]
            for avatar in avatars {
                try await TrustTests.fault(deployment, ["endpoint": avatar, "pauseBodyMs": 20_000, "chunked": true, "times": 3])
            }
            for _ in 0..<3 {
                _ = try? await octocat.send(photo)
                _ = try? await pat.send(photo)
            }
            _ = try await deployment.control("faults/release", "{}")
            // Every one of the six reached its avatar (whose head came and whose body stalled).
            let stats = try await deployment.emulatorStats()
            let reached = avatars.map { stats[$0] ?? 0 }
            #expect(reached == [3, 3])
            #expect(try await ResilienceTests.metric(deployment, "gatehouse_circuit_state", ["provider": "github.com"]) == 0)
            let profile = try await octocat.send("\(deployment.gatewayURL)/v1/me/providers/github.com/profile?refresh=true")
            #expect(profile.status == 200, "\(profile.status) \(profile.bodyText)")
        }
    }

    @Test("Yahoo: the userinfo picture, through the gateway")
    func yahooPicture() async throws {
        try await withDeployment { deployment in
            var browser = Browser(deployment)
            #expect(try await browser.complete(login: "yuki@yahoo.example", provider: "yahoo.com").status == 200)
            let photo = try await browser.send("\(deployment.gatewayURL)/v1/me/photo")
            #expect(photo.status == 200)
            #expect(photo.headers["content-type"] == "image/png")
            #expect(photo.body.starts(with: [0x89, 0x50, 0x4E, 0x47]))
            let stats = try await deployment.emulatorStats()
            let holds = stats.filter { $0.key.hasPrefix("GET /yahoo") && $0.key.contains("/pictures/") }.values.reduce(0, +) == 1
            #expect(holds)
        }
    }
}
