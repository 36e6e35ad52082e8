import Hummingbird
import NIOCore

extension ResponseBodyWriter {
    /// Writes `buffer`, then waits for one turn of the connection's event loop, so that a
    /// body written from memory never queues more than about one write beyond the channel's
    /// high-water mark.
    ///
    /// Why: NIO's async writer forwards a write at once while it believes the channel writable,
    /// and the channel's "not writable any more" only reaches it from the event loop, after the
    /// queued writes ran there. A writer with the whole body at hand (a cached 4 MB photo)
    /// would otherwise queue all of it per connection before it is ever suspended (measured:
    /// ~90 MB of response buffers under 32 slow readers). One turn of the loop runs the write,
    /// so the next `write` sees the channel's writability and waits for the socket to drain.
    mutating func write(_ buffer: ByteBuffer, pacedBy eventLoop: any EventLoop) async throws {
        try await write(buffer)
        try await eventLoop.submit {}.get()
    }
}
