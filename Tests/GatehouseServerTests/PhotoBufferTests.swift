import GatehouseCore
import NIOCore
import Testing

@testable import GatehouseServer

/// A kept photo's bytes: joined once, compared with a new transfer's pieces, and sent as
/// slices that share the kept storage.
@Suite("Kept photo bytes")
struct PhotoBufferTests {
    /// Pieces of a 1,000-byte image as a transfer may receive them.
    let chunks: [[UInt8]] = [Array(0..<100), Array(repeating: 7, count: 1), Array((0..<899).map { UInt8($0 % 251) })]

    @Test("the buffer and the array forms join a transfer's pieces into exactly their bytes, and each recognizes them split otherwise")
    func joining() {
        let joined = chunks.flatMap { $0 }
        for kept in [PhotoBuffer.joining(chunks), [UInt8].joining(chunks)] {
            #expect(kept.count == 1_000)
            #expect(kept.storageBytes >= 1_000)
            let holds = kept.withUnsafeBytes(in: 0..<kept.count) { Array($0) } == joined
            #expect(holds)
            let holds2 = kept.withUnsafeBytes(in: 99..<102) { Array($0) } == [99, 7, 0]
            #expect(holds2)
            #expect(kept.equals(chunks))
            #expect(kept.equals([Array(joined[..<500]), Array(joined[500...])]))
            #expect(kept.equals([joined]))
            #expect(!kept.equals([Array(joined.dropLast())]), "a prefix is another image")
            #expect(!kept.equals([joined, [0]]), "so is a longer one")
            var changed = joined
            changed[999] ^= 1
            #expect(!kept.equals([changed]), "and one whose last byte differs")
            #expect(!kept.equals([]))
        }
    }

    @Test("an answer's bytes from a kept buffer are a slice of its storage, not a copy; from another form, a copy of the range")
    func slicesShareStorage() throws {
        let kept = try #require(PhotoBuffer.joining(chunks) as? PhotoBuffer)
        #expect(kept.storageBytes == 1_024, "NIO's storage is a power of two, and the cache charges it")
        let keptStart = kept.buffer.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) }
        let slice = ByteBuffer(photo: kept, range: 100..<600)
        #expect(slice.readableBytes == 500)
        let holds = slice.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) } == keptStart + 100
        #expect(holds)
        let holds2 = Array(slice.readableBytesView) == Array(chunks.flatMap { $0 }[100..<600])
        #expect(holds2)

        let array = [UInt8].joining(chunks)
        let copy = ByteBuffer(photo: array, range: 100..<600)
        #expect(Array(copy.readableBytesView) == Array(slice.readableBytesView))

        let received = ByteBuffer(photo: PhotoPiece.received(chunks[2][10..<20]))
        #expect(Array(received.readableBytesView) == Array(chunks[2][10..<20]))
        let piece = ByteBuffer(photo: PhotoPiece.kept(kept, 0..<1_000))
        let holds3 = piece.withUnsafeReadableBytes { UInt(bitPattern: $0.baseAddress) } == keptStart
        #expect(holds3)
        #expect(PhotoPiece.kept(kept, 5..<10).count == 5 && PhotoPiece.received(chunks[0][...]).count == 100)
    }
}
