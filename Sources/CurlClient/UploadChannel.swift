import Synchronization

/// The buffer between an upload's producer (a task reading `OutboundUpload`'s source) and
/// libcurl's read callback on the driver thread, with back-pressure both ways: the producer
/// waits while `highWater` bytes are queued, and libcurl is paused while none are.
final class UploadChannel: Sendable {
    /// What the read callback hands libcurl.
    enum Read {
        /// This many bytes were copied into libcurl's buffer.
        case bytes(Int)
        /// The body is complete.
        case end
        /// Nothing queued yet: pause until the producer adds some.
        case pause
        /// The producer failed: abort the transfer.
        case abort
    }

    fileprivate struct State {
        var chunks: [[UInt8]] = []
        var firstChunk = 0
        /// Bytes of `chunks[firstChunk]` already handed to libcurl.
        var offset = 0
        var buffered = 0
        /// The producer is done: `.some(nil)` when the body is complete, else its error.
        var end: (any Error)?? = nil
        /// The transfer is over: nothing more will be read.
        var closed = false
        var readerPaused = false
        var writer: CheckedContinuation<Void, any Error>?
        var transfer: Transfer?
    }

    private let state = Mutex(State())
    private let highWater: Int

    init(highWater: Int) {
        self.highWater = max(1, highWater)
    }

    func attach(_ transfer: Transfer) {
        state.withLock { $0.transfer = transfer }
    }

    /// The producer's error, once it failed (what the caller sees instead of libcurl's abort).
    var failure: (any Error)? {
        state.withLock { state in
            if case .some(.some(let error)) = state.end { return error }
            return nil
        }
    }

    // MARK: Producer side

    /// Queues a chunk, first waiting while the queue is full; throws once the transfer is over
    /// or the waiting task is cancelled.
    func write(_ chunk: [UInt8]) async throws {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                let failure = state.withLock { state -> (any Error)? in
                    if state.closed { return Self.ended }
                    // Checked under the lock the cancellation handler takes: either it sees
                    // the stored continuation, or this sees the cancellation.
                    if Task.isCancelled { return CancellationError() }
                    if state.buffered >= highWater {
                        state.writer = continuation
                        return nil
                    }
                    continuation.resume()
                    return nil
                }
                if let failure { continuation.resume(throwing: failure) }
            }
        } onCancel: {
            let writer = state.withLock { state in
                defer { state.writer = nil }
                return state.writer
            }
            writer?.resume(throwing: CancellationError())
        }
        let wake = try state.withLock { state -> Transfer? in
            if state.closed { throw Self.ended }
            state.chunks.append(chunk)
            state.buffered += chunk.count
            return state.takeResume()
        }
        wake?.requestResume()
    }

    /// What a producer gets once the transfer no longer reads its body.
    private static let ended = OutboundError(kind: .cancelled, message: "the request ended before its body was sent")

    /// The producer is done, successfully (`nil`) or not. A failure after the transfer ended
    /// is its consequence, not its cause, and is not recorded as `failure`.
    func finish(error: (any Error)?) {
        let wake = state.withLock { state -> Transfer? in
            if state.end == nil, !state.closed { state.end = .some(error) }
            return state.takeResume()
        }
        wake?.requestResume()
    }

    // MARK: Driver side

    /// Copies queued bytes into libcurl's buffer (called by the read callback).
    func read(into buffer: UnsafeMutableRawBufferPointer) -> Read {
        let (result, writer) = state.withLock { state -> (Read, CheckedContinuation<Void, any Error>?) in
            var copied = 0
            while copied < buffer.count, state.firstChunk < state.chunks.count {
                let chunk = state.chunks[state.firstChunk]
                let count = min(buffer.count - copied, chunk.count - state.offset)
                chunk.withUnsafeBytes { source in
                    buffer.baseAddress!.advanced(by: copied).copyMemory(from: source.baseAddress!.advanced(by: state.offset), byteCount: count)
                }
                copied += count
                state.offset += count
                if state.offset == chunk.count {
                    state.firstChunk += 1
                    state.offset = 0
                }
            }
            if state.firstChunk == state.chunks.count {
                state.chunks.removeAll(keepingCapacity: true)
                state.firstChunk = 0
            }
            state.buffered -= copied
            var writer: CheckedContinuation<Void, any Error>?
            if state.buffered < highWater {
                writer = state.writer
                state.writer = nil
            }
            if copied > 0 { return (.bytes(copied), writer) }
            switch state.end {
            case .some(.none): return (.end, writer)
            case .some(.some): return (.abort, writer)
            case .none:
                state.readerPaused = true
                return (.pause, writer)
            }
        }
        writer?.resume()
        return result
    }

    /// The transfer is over (answered, failed or cancelled): a waiting producer stops.
    func close() {
        let writer = state.withLock { state -> CheckedContinuation<Void, any Error>? in
            state.closed = true
            state.chunks.removeAll()
            state.buffered = 0
            state.transfer = nil  // breaks the transfer <-> channel cycle
            defer { state.writer = nil }
            return state.writer
        }
        writer?.resume(throwing: Self.ended)
    }
}

extension UploadChannel.State {
    /// Who to un-pause when the reader waits for bytes that just arrived (once per pause).
    fileprivate mutating func takeResume() -> Transfer? {
        guard readerPaused, let transfer else { return nil }
        readerPaused = false
        return transfer
    }
}
