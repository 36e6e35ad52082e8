import Foundation

/// A whole photo's bytes as the cache keeps them: held once, shared by every answer and by every
/// caller still streaming the transfer that fetched them.
///
/// The core keeps them in the form `GatewayConfiguration.photoBytes` makes. The HTTP layer
/// passes one it sends without copying (NIO's `ByteBuffer`, which the core does not import),
/// so that a photo served from the cache costs no copy of its bytes per answer; without one,
/// they stay an array.
public protocol PhotoBytes: Sendable {
    /// How many bytes.
    var count: Int { get }
    /// How much memory holding them takes (at least `count`): what the photo cache charges.
    var storageBytes: Int { get }
    /// Runs `body` over the bytes in `range` (within `0..<count`).
    func withUnsafeBytes<R>(in range: Range<Int>, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
}

extension PhotoBytes {
    /// Whether these are exactly the bytes of `chunks`, joined.
    public func equals(_ chunks: [[UInt8]]) -> Bool {
        var offset = 0
        for chunk in chunks {
            guard offset + chunk.count <= count else { return false }
            // memcmp: `elementsEqual` over the buffers steps byte by byte through their
            // iterators, about 60 µs for a 40 KB photo (a fortieth of the refetched photo's CPU).
            let same = withUnsafeBytes(in: offset..<offset + chunk.count) { kept in
                chunk.withUnsafeBytes { received in
                    received.isEmpty || memcmp(kept.baseAddress!, received.baseAddress!, received.count) == 0
                }
            }
            guard same else { return false }
            offset += chunk.count
        }
        return offset == count
    }
}

/// The default form: one array of exactly the photo's size.
extension Array: PhotoBytes where Element == UInt8 {
    /// The array's capacity.
    public var storageBytes: Int { capacity }

    /// Runs `body` over the bytes in `range`.
    public func withUnsafeBytes<R>(in range: Range<Int>, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[range])) }
    }

    /// The pieces a transfer received, joined into one array of exactly their size (an array
    /// grown by doubling would hold up to twice the image for as long as it is cached).
    public static func joining(_ chunks: [[UInt8]]) -> any PhotoBytes {
        var joined: [UInt8] = []
        joined.reserveCapacity(chunks.reduce(0) { $0 + $1.count })
        for chunk in chunks { joined.append(contentsOf: chunk) }
        return joined
    }
}

/// A piece of a photo for one caller (`PhotoDownload.chunks()`): bytes of the running transfer
/// as they came, or, once the photo is whole, a range of the bytes the cache keeps.
public enum PhotoPiece: Sendable {
    /// Bytes the transfer received (a slice of its pieces: no copy per caller).
    case received(ArraySlice<UInt8>)
    /// A range of the whole photo's kept bytes.
    case kept(any PhotoBytes, Range<Int>)

    /// How many bytes.
    public var count: Int {
        switch self {
        case .received(let bytes): bytes.count
        case .kept(_, let range): range.count
        }
    }
}
