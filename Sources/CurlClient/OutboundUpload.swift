import Synchronization

/// A request body sent while it is produced: libcurl reads it chunk by chunk from an async
/// sequence, and the sequence is not asked for more while libcurl has enough queued
/// (back-pressure), so a large body never sits whole in memory.
///
/// A body can be sent a second time (a retry after a refreshed token) only if it ended within
/// `replayLimit` bytes, which are kept for that; a larger body is gone once sent, and a second
/// `stream` of the same request fails with `bodyNotReplayable` before any I/O.
public final class OutboundUpload: Sendable {
    /// The body's length when known in advance (sent as `Content-Length`); `nil` sends it
    /// chunked (HTTP/1.1) or as HTTP/2 data frames until the sequence ends.
    public let length: Int?
    /// The most bytes kept for a second sending.
    public let replayLimit: Int
    /// Feeds each chunk of the source, in order, to its argument.
    private let produce: @Sendable (_ deliver: ([UInt8]) async throws -> Void) async throws -> Void
    private let state = Mutex(ReplayState.fresh)

    private enum ReplayState {
        /// Not sent yet: the source is still to be read.
        case fresh
        /// The source is being (or was partly) read: it cannot be read again.
        case spent
        /// The whole body, kept because it fit within `replayLimit`.
        case kept([[UInt8]])
    }

    /// A body read from `source` (each element one chunk; empty chunks are skipped).
    public init<Source: AsyncSequence & Sendable>(length: Int? = nil, replayLimit: Int = 64 << 10, _ source: Source)
    where Source.Element == [UInt8] {
        self.length = length
        self.replayLimit = replayLimit
        self.produce = { deliver in
            for try await chunk in source where !chunk.isEmpty {
                try await deliver(chunk)
            }
        }
    }

    /// Claims the body for one sending: `nil` when it is to be read from the source (the first
    /// time), the kept chunks when it is sent again, or `bodyNotReplayable` before any I/O.
    func claim() throws -> [[UInt8]]? {
        try state.withLock { state -> [[UInt8]]? in
            switch state {
            case .fresh:
                state = .spent
                return nil
            case .spent:
                throw OutboundError(
                    kind: .bodyNotReplayable,
                    message: "the request body was streamed once and is larger than the \(replayLimit) bytes kept to resend it")
            case .kept(let chunks):
                return chunks
            }
        }
    }

    /// Sends the claimed body into `channel`: the kept chunks, or the source's (keeping them
    /// while they fit within `replayLimit`).
    func send(_ kept: [[UInt8]]?, into channel: UploadChannel) async throws {
        if let kept {
            for chunk in kept { try await channel.write(chunk) }
            return
        }
        var chunks: [[UInt8]]? = []
        var total = 0
        try await produce { chunk in
            total += chunk.count
            if total <= replayLimit { chunks?.append(chunk) } else { chunks = nil }
            try await channel.write(chunk)
        }
        if let chunks { state.withLock { $0 = .kept(chunks) } }
    }
}
