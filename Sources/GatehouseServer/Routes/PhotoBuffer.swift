import GatehouseCore
import NIOCore

/// A kept photo in one `ByteBuffer` (`GatewayConfiguration.photoBytes`): answers send slices
/// of it, which share its storage, so a photo from the cache is sent without a copy of its
/// bytes per answer (a copy per answer, with the fresh pages it writes into, costs about a
/// tenth of a cached 40 KB photo's CPU).
///
/// NIO gives a buffer a power of two of storage (a 40 KB photo holds 64 KB), which is what the
/// photo cache charges for it (`storageBytes`); a slice that starts past 16 MiB into the buffer
/// is a copy (NIO's slice offsets stop there), which only photos above that size have.
public struct PhotoBuffer: PhotoBytes {
    /// The bytes, all readable.
    let buffer: ByteBuffer

    /// How many bytes.
    public var count: Int { buffer.readableBytes }

    /// The buffer's storage, a power of two.
    public var storageBytes: Int { buffer.capacity }

    /// Runs `body` over the bytes in `range`.
    public func withUnsafeBytes<R>(in range: Range<Int>, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try buffer.withUnsafeReadableBytes { try body(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    /// A transfer's pieces joined into one buffer.
    public static func joining(_ chunks: [[UInt8]]) -> any PhotoBytes {
        var buffer = ByteBufferAllocator().buffer(capacity: chunks.reduce(0) { $0 + $1.count })
        for chunk in chunks { buffer.writeBytes(chunk) }
        return PhotoBuffer(buffer: buffer)
    }
}

extension ByteBuffer {
    /// The bytes in `range` of a kept photo: a slice sharing a `PhotoBuffer`'s storage, or a
    /// copy of bytes kept in another form.
    init(photo bytes: any PhotoBytes, range: Range<Int>) {
        if let kept = bytes as? PhotoBuffer, let slice = kept.buffer.getSlice(at: kept.buffer.readerIndex + range.lowerBound, length: range.count) {
            self = slice
        } else {
            self = bytes.withUnsafeBytes(in: range) { ByteBuffer(bytes: $0) }
        }
    }

    /// A piece of a photo for one caller: a copy of bytes the transfer received, or a slice of
    /// the kept photo.
    init(photo piece: PhotoPiece) {
        switch piece {
        case .received(let bytes): self.init(bytes: bytes)
        case .kept(let bytes, let range): self.init(photo: bytes, range: range)
        }
    }
}
