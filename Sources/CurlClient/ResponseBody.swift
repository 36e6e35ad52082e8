import Synchronization

/// The body of a streaming response, as an async sequence of byte chunks.
///
/// Dropping every copy of it (and its iterators) before the end aborts the transfer, so an
/// abandoned download never keeps a paused connection alive.
public struct ResponseBody: AsyncSequence, Sendable {
    /// A chunk of body bytes.
    public typealias Element = [UInt8]

    private let consumer: ConsumerToken

    init(channel: BodyChannel) {
        self.consumer = ConsumerToken(channel: channel)
    }

    /// The whole body, taken at once, when it has already arrived (every chunk buffered and
    /// the transfer ended); `nil`, with nothing taken, while more may come. Never waits.
    /// Throws the body's failure when it ended with one.
    public func takeIfComplete() throws -> [UInt8]? {
        try consumer.channel.takeIfComplete()
    }

    /// Creates the iterator; there is one body, so iterate it once.
    public func makeAsyncIterator() -> Iterator {
        Iterator(consumer: consumer)
    }

    /// Pulls chunks from the channel.
    public struct Iterator: AsyncIteratorProtocol {
        let consumer: ConsumerToken

        /// The next chunk, or `nil` at the end of the body.
        public mutating func next() async throws -> [UInt8]? {
            try await consumer.channel.next()
        }
    }
}

/// Cancels the transfer when the last consumer-side reference goes away early.
final class ConsumerToken: Sendable {
    let channel: BodyChannel

    init(channel: BodyChannel) {
        self.channel = channel
    }

    deinit {
        channel.abandon()
    }
}

/// The buffer between the driver thread (producer) and the body's consumer, with back-pressure.
final class BodyChannel: Sendable {
    private struct State {
        var chunks: [[UInt8]] = []
        var firstChunk = 0
        var buffered = 0
        var paused = false
        var end: (any Error)?? = nil
        var waiter: CheckedContinuation<[UInt8]?, any Error>?
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

    /// Producer: takes a copy of the bytes, or answers `false` when the consumer is too far behind.
    func offer(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let chunk = [UInt8](bytes)
        let (accepted, waiter) = state.withLock { s -> (Bool, CheckedContinuation<[UInt8]?, any Error>?) in
            if s.end != nil { return (true, nil) }  // nobody reads any more: discard
            if let waiter = s.waiter {
                s.waiter = nil
                return (true, waiter)
            }
            if s.buffered >= highWater {
                s.paused = true
                return (false, nil)
            }
            s.chunks.append(chunk)
            s.buffered += chunk.count
            return (true, nil)
        }
        waiter?.resume(returning: chunk)
        return accepted
    }

    /// Producer: the body ended, with or without an error.
    func finish(error: (any Error)?) {
        let waiter = state.withLock { s -> CheckedContinuation<[UInt8]?, any Error>? in
            if s.end == nil { s.end = .some(error) }
            s.transfer = nil  // breaks the transfer <-> channel cycle
            defer { s.waiter = nil }
            return s.waiter
        }
        if let error {
            waiter?.resume(throwing: error)
        } else {
            waiter?.resume(returning: nil)
        }
    }

    /// Consumer: the next chunk, waiting for one if needed; cancellation aborts the transfer.
    func next() async throws -> [UInt8]? {
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<[UInt8]?, any Error>) in
                enum Step {
                    case chunk([UInt8], resume: Transfer?)
                    case end((any Error)?)
                    case wait
                }
                let step = state.withLock { s -> Step in
                    if s.firstChunk < s.chunks.count {
                        let chunk = s.chunks[s.firstChunk]
                        s.firstChunk += 1
                        if s.firstChunk == s.chunks.count {
                            s.chunks.removeAll(keepingCapacity: true)
                            s.firstChunk = 0
                        }
                        s.buffered -= chunk.count
                        var resume: Transfer?
                        if s.paused, s.buffered <= highWater / 2, let transfer = s.transfer {
                            s.paused = false
                            resume = transfer
                        }
                        return .chunk(chunk, resume: resume)
                    }
                    if let end = s.end { return .end(end) }
                    s.waiter = continuation
                    return .wait
                }
                switch step {
                case .chunk(let chunk, let resume):
                    resume?.requestResume()
                    continuation.resume(returning: chunk)
                case .end(let error):
                    if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: nil) }
                case .wait:
                    break
                }
            }
        } onCancel: {
            abandon()
        }
    }

    /// Consumer: every buffered chunk joined, when the body has ended; `nil` otherwise.
    func takeIfComplete() throws -> [UInt8]? {
        try state.withLock { s -> [UInt8]? in
            guard case .some(let end) = s.end else { return nil }
            if let end { throw end }
            var whole: [UInt8] = []
            whole.reserveCapacity(s.buffered)
            for chunk in s.chunks[s.firstChunk...] { whole += chunk }
            s.chunks.removeAll()
            s.firstChunk = 0
            s.buffered = 0
            return whole
        }
    }

    /// Consumer: stop the transfer; nothing more will be read.
    func abandon() {
        let (transfer, waiter) = state.withLock { s -> (Transfer?, CheckedContinuation<[UInt8]?, any Error>?) in
            guard s.end == nil else { return (nil, nil) }
            s.end = .some(OutboundError(kind: .cancelled, message: "the request was cancelled"))
            s.chunks.removeAll()
            s.buffered = 0
            defer { s.waiter = nil }
            return (s.transfer, s.waiter)
        }
        waiter?.resume(throwing: OutboundError(kind: .cancelled, message: "the request was cancelled"))
        transfer?.requestCancel()
    }
}
