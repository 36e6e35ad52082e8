import Foundation
import Testing

@testable import GatehouseServer

/// The descriptor a listener keeps for the process while descriptors are plentiful.
@Suite struct DescriptorReserveTests {
    /// How many of this process's descriptors name `path` (`/proc/self/fd`).
    static func descriptors(naming path: String) throws -> Int {
        try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").count {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\($0)")) == path
        }
    }

    @Test("a reserve is held open with a descriptor to spare, given back on release and held again on the next check")
    func heldAndGivenBack() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("reserve-\(UUID().uuidString)").path
        try Data().write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        // /proc/self/fd names the file by its resolved path (TMPDIR may pass through a link).
        let resolved = URL(fileURLWithPath: path).resolvingSymlinksInPath().path
        var reserve = DescriptorReserve(path: path)
        #expect(try Self.descriptors(naming: resolved) == 0)
        let held = reserve.holdWithOneToSpare()
        #expect(held)
        // Held once: the probe beside it is closed again.
        #expect(try Self.descriptors(naming: resolved) == 1)
        reserve.release()
        #expect(try Self.descriptors(naming: resolved) == 0)
        let heldAgain = reserve.holdWithOneToSpare()
        #expect(heldAgain)
        #expect(try Self.descriptors(naming: resolved) == 1)
        reserve.release()
    }

    @Test("a reserve whose file cannot be opened (no /dev/null in a bare container) never stops the listener: the check answers that it may accept")
    func missingFileDoesNotStopAccepting() throws {
        var reserve = DescriptorReserve(path: "/nonexistent-\(UUID().uuidString)/null")
        let first = reserve.holdWithOneToSpare()
        let second = reserve.holdWithOneToSpare()
        #expect(first && second)
    }
}
