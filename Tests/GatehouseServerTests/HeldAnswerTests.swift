import Hummingbird
import NIOCore
import NIOPosix
import Synchronization
import Testing

@testable import GatehouseCore
@testable import GatehouseServer

/// A provider's answer read whole under the answer budget (Graph's JSON, its paging links
/// rewritten), as the passthrough route writes it.
@Suite("Held answers")
struct HeldAnswerTests {
    /// What a connection was handed: each piece's size, and the budget's bytes in use then.
    final class Handed: Sendable {
        let pieces = Mutex<[(bytes: Int, held: Int)]>([])
        let finished = Mutex<Int?>(nil)
    }

    /// A connection's writer that records what it is handed.
    struct RecordingWriter: ResponseBodyWriter {
        let handed: Handed
        let budget: ByteBudget

        mutating func write(_ buffer: ByteBuffer) async throws {
            let entry = (bytes: buffer.readableBytes, held: budget.inUse)
            handed.pieces.withLock { $0.append(entry) }
        }

        consuming func finish(_ trailingHeaders: HTTPFields?) async throws {
            let held = budget.inUse
            handed.finished.withLock { $0 = held }
        }
    }

    @Test(
        "a held answer goes out in pieces of at most 64 KiB, and the budget counts its bytes until the last piece is handed over; it gives them back once the body is written"
    )
    func heldUntilTheLastPiece() async throws {
        let budget = ByteBudget(limit: 1 << 20, ownerLimit: 1 << 20, groupLimit: 1 << 20, groupOwnerLimit: 1 << 20)
        let size = 300_000
        let handed = Handed()
        // The answer and its response as the server holds them while writing, and lets go of
        // once written.
        func respond() async throws {
            let hold = ByteBudget.Hold(on: budget, owner: "key:a")
            #expect(hold.grow(by: size))
            let answer = ProviderAPIAnswer(
                status: 200, headers: [("content-type", "application/json")], body: .whole((0..<size).map { UInt8($0 % 251) }),
                template: try APITemplate("GET /v1.0/me/messages"), hold: hold)
            let response = ProviderAPIRoutes.response(answer, eventLoop: MultiThreadedEventLoopGroup.singleton.next())
            try await response.body.write(RecordingWriter(handed: handed, budget: budget))
        }
        try await respond()
        let pieces = handed.pieces.withLock { $0 }
        #expect(pieces.map(\.bytes) == [65_536, 65_536, 65_536, 65_536, 37_856])
        let heldThroughout = pieces.allSatisfy { $0.held == size }
        #expect(heldThroughout, "\(pieces)")
        let heldAtFinish = handed.finished.withLock { $0 }
        #expect(heldAtFinish == size)
        #expect(budget.inUse == 0, "given back once the response is gone")
    }
}
