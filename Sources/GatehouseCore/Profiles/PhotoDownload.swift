import Synchronization

/// One photo transfer from a provider, shared by every caller that asked for the same photo
/// while it ran (single flight): each caller streams the bytes as they arrive, from the
/// first one, and the whole image ends up in the cache with its strong `ETag`.
///
/// The transfer runs on its own task and reads the provider's body at the provider's pace,
/// never at the pace of the slowest caller; the bytes are held once (at most the photo size
/// cap) so that a caller joining late still gets them all. Callers keep no buffers of their
/// own: each reads the shared bytes from its own offset, one piece at a time as its connection
/// takes them, and once the image is whole every caller reads the bytes the cache keeps.
/// A caller going away stops nothing.
public final class PhotoDownload: Sendable {
    /// What a caller needs before the first byte: the response head.
    public struct Head: Sendable {
        /// The provider's image content type.
        public var contentType: String
        /// The size the provider declared, when it did.
        public var contentLength: Int?
        /// The tag of the image (`ProviderPhoto.entityTag`), the same as the cached photo's;
        /// `nil` while an image without the provider's validator streams (its tag comes from
        /// its bytes, once whole).
        public var etag: String?
    }

    private struct State {
        var head: Head?
        /// The pieces received so far, while the transfer runs (dropped once it is whole).
        var chunks: [[UInt8]] = []
        /// The bytes in `chunks`.
        var received = 0
        var photo: ProfileService.Photo?
        var failure: (any Error)?
        var headWaiters: [CheckedContinuation<Head, any Error>] = []
        var photoWaiters: [CheckedContinuation<ProfileService.Photo, any Error>] = []
        /// Readers waiting for more bytes (or the end).
        var readers: [CheckedContinuation<Void, Never>] = []
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

    /// Whether callers have been given a head: from then on the transfer is this source's.
    var headDelivered: Bool { state.withLock { $0.head != nil } }

    /// The image bytes from the first one, in pieces: those received so far, then the rest as
    /// they arrive. Ends with the transfer, or throws if it fails half-way.
    public func chunks() -> Pieces { Pieces(download: self) }

    /// The image's pieces for one caller (see ``chunks()``).
    public struct Pieces: AsyncSequence, Sendable {
        /// One piece: a slice of the bytes the download holds (no copy per caller).
        public typealias Element = PhotoPiece
        let download: PhotoDownload

        /// A reader at the first byte.
        public func makeAsyncIterator() -> Reader { Reader(download: download) }

        /// Reads from its own offset; holds nothing but that offset between pieces.
        public struct Reader: AsyncIteratorProtocol {
            let download: PhotoDownload
            var offset = 0
            /// Where the next piece is while the transfer runs: its index and first byte.
            var chunkIndex = 0
            var chunkStart = 0

            /// The next piece, `nil` at the end; throws what ended the transfer early.
            public mutating func next() async throws -> PhotoPiece? {
                while true {
                    switch download.piece(at: offset, chunkIndex: chunkIndex, chunkStart: chunkStart) {
                    case .bytes(let piece, let index, let start):
                        offset += piece.count
                        (chunkIndex, chunkStart) = (index, start)
                        return piece
                    case .end:
                        return nil
                    case .failed(let error):
                        throw error
                    case .wait:
                        await download.waitForMore(than: offset)
                    }
                }
            }
        }
    }

    /// What a reader at `offset` gets now.
    enum Piece {
        /// Bytes, and where the piece after them starts (chunk index and its first byte).
        case bytes(PhotoPiece, Int, Int)
        case end
        case failed(any Error)
        case wait
    }

    /// The largest piece handed out of a whole image (a connection writes one at a time).
    static let pieceBytes = 64 << 10

    fileprivate func piece(at offset: Int, chunkIndex: Int, chunkStart: Int) -> Piece {
        state.withLock { s in
            if let photo = s.photo {
                guard offset < photo.bytes.count else { return .end }
                let end = min(offset + Self.pieceBytes, photo.bytes.count)
                return .bytes(.kept(photo.bytes, offset..<end), 0, 0)
            }
            if let failure = s.failure { return .failed(failure) }
            // The last byte received so far is held back: it may be the image's last, which
            // no caller gets before the whole image is in the cache (`receive`).
            let available = s.received - 1
            guard offset < available else { return .wait }
            // Pieces only grow at the end while the transfer runs: walk from the last position.
            var index = chunkIndex
            var start = chunkStart
            while start + s.chunks[index].count <= offset {
                start += s.chunks[index].count
                index += 1
            }
            // At most one piece's size, whatever size libcurl's reads were gathered into (a fast
            // provider's whole image can arrive as one): each caller copies only that much
            // into its connection at a time.
            let chunk = s.chunks[index]
            let from = offset - start
            let to = min(from + Self.pieceBytes, chunk.count, available - start)
            let piece = PhotoPiece.received(chunk[from..<to])
            return to == chunk.count ? .bytes(piece, index + 1, start + chunk.count) : .bytes(piece, index, start)
        }
    }

    /// Returns once more than `offset` bytes have arrived or the transfer has ended.
    fileprivate func waitForMore(than offset: Int) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready = state.withLock { s -> Bool in
                if s.received - 1 > offset || s.photo != nil || s.failure != nil { return true }
                s.readers.append(continuation)
                return false
            }
            if ready { continuation.resume() }
        }
    }

    // MARK: The transfer

    /// Reads the provider's photo to its end, passing each chunk on as it comes, and returns
    /// the whole image with its `ETag`, as `whole` keeps it from the pieces received, its
    /// content type and tag. Body failures are mapped for `providerId`.
    func receive(
        _ source: ProviderPhoto, providerId: String,
        whole: @Sendable (_ chunks: [[UInt8]], _ contentType: String, _ etag: String) async -> ProfileService.Photo
    ) async throws -> ProfileService.Photo {
        let type: RasterImage
        // The chunks are kept as they come; readers stop one byte short of what has arrived
        // (`piece`), so the very last byte waits until the whole image is in the cache: a
        // caller that has every byte can rely on the next request being a cache hit.
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
            // The callers' answers declare the provider's length (`Head.contentLength`): a body
            // of any other length would break their framing (libcurl ignores the declared length
            // of a chunked answer, and a hostile one sends both), so it fails the transfer
            // before more than the declared bytes, or the last one, reach anyone.
            var total = 0
            func pass(_ chunk: [UInt8]) throws {
                total += chunk.count
                if let declared = source.contentLength, total > declared {
                    throw GatehouseError.photoUnavailable(providerId, cause: "the photo is longer than its declared \(declared) bytes")
                }
                deliver(chunk)
            }
            for chunk in held { try pass(chunk) }
            while let chunk = try await iterator.next() { try pass(chunk) }
            if let declared = source.contentLength, total != declared {
                throw GatehouseError.photoUnavailable(providerId, cause: "the photo is shorter than its declared \(declared) bytes")
            }
        } catch let error as GatehouseError {
            throw error
        } catch {
            throw UpstreamErrors.transport(error, providerId: providerId)
        }
        // The pieces kept for the callers are the image: `whole` joins them once into what the
        // cache keeps (or keeps the bytes kept before, when the image did not change), then
        // they go (`end`), and the last byte is released with the photo.
        let chunks = state.withLock { $0.chunks }
        return await whole(chunks, type.rawValue, source.entityTag ?? ProviderPhoto.entityTag(of: chunks, contentType: type.rawValue))
    }

    /// Keeps a chunk (for every caller, late joiners included) and wakes the waiting readers.
    private func deliver(_ chunk: [UInt8]) {
        guard !chunk.isEmpty else { return }
        let readers = state.withLock { s in
            s.chunks.append(chunk)
            s.received += chunk.count
            defer { s.readers = [] }
            return s.readers
        }
        for reader in readers { reader.resume() }
    }

    /// Ends the download with the whole photo (readers finish from it, waiters get it) or with
    /// an error: before the head every caller gets it as their answer; after it, the readers
    /// throw and the callers' connections are cut short.
    func end(_ result: Result<ProfileService.Photo, any Error>) {
        let (readers, heads, photos) = state.withLock { s in
            switch result {
            case .success(let photo):
                s.photo = photo
            case .failure(let error):
                s.failure = error
            }
            // Readers go on from the whole photo (the bytes the cache keeps): the pieces go.
            s.chunks = []
            defer {
                s.readers = []
                s.headWaiters = []
                s.photoWaiters = []
            }
            return (s.readers, s.headWaiters, s.photoWaiters)
        }
        for reader in readers { reader.resume() }
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
