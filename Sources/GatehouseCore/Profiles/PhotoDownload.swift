import Synchronization

/// One photo transfer from a provider, shared by every caller that asked for the same photo
/// while it ran (single flight): each caller streams the bytes as they arrive, from the
/// first one, and the whole image ends up in the cache with its strong `ETag`.
///
/// The transfer runs on its own task and reads the provider's body at the provider's pace,
/// never at the pace of the slowest caller; the bytes are held (at most the photo size cap)
/// so that a caller joining late still gets them all. A caller going away stops nothing.
public final class PhotoDownload: Sendable {
    /// What a caller needs before the first byte: the response head.
    public struct Head: Sendable {
        /// The provider's image content type.
        public var contentType: String
        /// The size the provider declared, when it did.
        public var contentLength: Int?
        /// The tag of the image (`ProviderPhoto.entityTag`), the same as the cached photo's.
        public var etag: String
    }

    private struct State {
        var head: Head?
        var chunks: [[UInt8]] = []
        var photo: ProfileService.Photo?
        var failure: (any Error)?
        var headWaiters: [CheckedContinuation<Head, any Error>] = []
        var photoWaiters: [CheckedContinuation<ProfileService.Photo, any Error>] = []
        var subscribers: [Int: AsyncThrowingStream<[UInt8], any Error>.Continuation] = [:]
        var nextSubscriber = 0
    }

    private let state = Mutex(State())

    /// A download whose head has not arrived yet.
    init() {}

    // MARK: Callers

    /// Waits for the response head, or throws what ended the transfer before it.
    public func head() async throws -> Head {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Result<Head, any Error>? = state.withLock { s in
                if let head = s.head { return .success(head) }
                if let failure = s.failure { return .failure(failure) }
                s.headWaiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    /// Waits for the whole photo (with its `ETag`), or throws what ended the transfer.
    public func photo() async throws -> ProfileService.Photo {
        try await withCheckedThrowingContinuation { continuation in
            let ready: Result<ProfileService.Photo, any Error>? = state.withLock { s in
                if let photo = s.photo { return .success(photo) }
                if let failure = s.failure { return .failure(failure) }
                s.photoWaiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(with: ready) }
        }
    }

    /// The whole photo if the transfer has already ended with it (nothing left to stream).
    public var completed: ProfileService.Photo? { state.withLock { $0.photo } }

    /// The image bytes from the first one: those received so far at once, then the rest as
    /// they arrive. Ends with the transfer, or throws if it fails half-way.
    public func chunks() -> AsyncThrowingStream<[UInt8], any Error> {
        let (stream, continuation) = AsyncThrowingStream<[UInt8], any Error>.makeStream()
        // Under the lock, so that no chunk is appended between the replay and the subscription.
        let id: Int? = state.withLock { s in
            for chunk in s.chunks { continuation.yield(chunk) }
            if s.photo != nil {
                continuation.finish()
                return nil
            }
            if let failure = s.failure {
                continuation.finish(throwing: failure)
                return nil
            }
            let id = s.nextSubscriber
            s.nextSubscriber += 1
            s.subscribers[id] = continuation
            return id
        }
        if let id {
            continuation.onTermination = { [weak self] _ in
                _ = self?.state.withLock { $0.subscribers.removeValue(forKey: id) }
            }
        }
        return stream
    }

    // MARK: The transfer

    /// Reads the provider's photo to its end, passing each chunk on as it comes, and returns
    /// the whole image with its `ETag`. Body failures are mapped for `providerId`.
    func receive(
        _ source: ProviderPhoto, providerId: String, whole: @Sendable (ProfileService.Photo) async -> Void
    ) async throws -> ProfileService.Photo {
        let type: RasterImage
        // The very last byte is held back until the whole image is in the cache: a caller that
        // has every byte can rely on the next request being a cache hit.
        var last: [UInt8] = []
        func pass(_ chunk: [UInt8]) {
            guard !chunk.isEmpty else { return }
            let combined = last + chunk
            deliver(Array(combined.dropLast()))
            last = [combined[combined.count - 1]]
        }
        do {
            var iterator = source.body.makeAsyncIterator()
            // The head waits for the leading bytes: an answer that only claims to be an image
            // is refused before any caller sees a byte of it.
            var leading: [UInt8] = []
            var held: [[UInt8]] = []
            while leading.count < RasterImage.signatureLength, let chunk = try await iterator.next() {
                leading += chunk.prefix(RasterImage.signatureLength - leading.count)
                if !chunk.isEmpty { held.append(chunk) }
            }
            guard let declared = RasterImage(contentType: source.contentType), declared.matches(leading) else {
                throw GatehouseError.photoUnavailable(providerId, cause: "the photo's leading bytes are not those of \(source.contentType)")
            }
            type = declared
            let head = Head(contentType: type.rawValue, contentLength: source.contentLength, etag: source.entityTag)
            let waiters = state.withLock { s in
                s.head = head
                defer { s.headWaiters = [] }
                return s.headWaiters
            }
            for waiter in waiters { waiter.resume(returning: head) }
            for chunk in held { pass(chunk) }
            while let chunk = try await iterator.next() { pass(chunk) }
        } catch let error as GatehouseError {
            throw error
        } catch {
            throw UpstreamErrors.transport(error, providerId: providerId)
        }
        // The chunks kept for late joiners are the image: no second copy while it arrives.
        let bytes = state.withLock { Array($0.chunks.joined()) } + last
        let photo = ProfileService.Photo(bytes: bytes, contentType: type.rawValue, etag: source.entityTag)
        await whole(photo)
        deliver(last)
        return photo
    }

    /// Keeps a chunk for late joiners and passes it to every caller streaming now.
    private func deliver(_ chunk: [UInt8]) {
        guard !chunk.isEmpty else { return }
        state.withLock { s in
            s.chunks.append(chunk)
            for subscriber in s.subscribers.values { subscriber.yield(chunk) }
        }
    }

    /// Ends the download with the whole photo (streams finish, waiters get it) or with an
    /// error: before the head every caller gets it as their answer; after it, the streams
    /// stop and the callers' connections are cut short.
    func end(_ result: Result<ProfileService.Photo, any Error>) {
        let (subscribers, heads, photos) = state.withLock { s in
            switch result {
            case .success(let photo): s.photo = photo
            case .failure(let error): s.failure = error
            }
            defer {
                s.subscribers = [:]
                s.headWaiters = []
                s.photoWaiters = []
            }
            return (Array(s.subscribers.values), s.headWaiters, s.photoWaiters)
        }
        for subscriber in subscribers {
            if case .failure(let error) = result { subscriber.finish(throwing: error) } else { subscriber.finish() }
        }
        // Head waiters are left only when the transfer failed before its head.
        for waiter in heads {
            waiter.resume(with: result.map { Head(contentType: $0.contentType, contentLength: $0.bytes.count, etag: $0.etag) })
        }
        for waiter in photos { waiter.resume(with: result) }
    }
}

/// The photo downloads running now, by cache key: whoever asks for a photo being downloaded
/// joins that download instead of starting another.
final class PhotoDownloads: Sendable {
    private let running = Mutex<[String: PhotoDownload]>([:])

    /// The download running for `key`, or a new one that `start` is handed to run.
    func join(_ key: String, start: (PhotoDownload) -> Void) -> PhotoDownload {
        let (download, isNew) = running.withLock { running -> (PhotoDownload, Bool) in
            if let download = running[key] { return (download, false) }
            let download = PhotoDownload()
            running[key] = download
            return (download, true)
        }
        if isNew { start(download) }
        return download
    }

    /// Forgets a finished download (not a newer one started for the same key since).
    func remove(_ key: String, _ download: PhotoDownload) {
        running.withLock { running in
            if running[key] === download { running[key] = nil }
        }
    }
}
