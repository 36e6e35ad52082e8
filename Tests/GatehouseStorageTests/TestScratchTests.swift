import Foundation
import GatehouseTestSupport
import Testing

/// The tests' temporary folders (`TestScratch`): one folder per test process, and those of
/// processes that are gone removed by the next one.
@Suite struct TestScratchTests {
    @Test("folders are made under the process's own folder")
    func foldersUnderTheProcessFolder() throws {
        let folder = try TestScratch.folder("scratch")
        var isFolder: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder) && isFolder.boolValue)
        let parent = URL(fileURLWithPath: folder).deletingLastPathComponent().lastPathComponent
        #expect(parent.hasPrefix(TestScratch.prefix + "\(getpid())."))
        let root = URL(fileURLWithPath: folder).deletingLastPathComponent().path
        let mode = try FileManager.default.attributesOfItem(atPath: root)[.posixPermissions] as? Int
        #expect(mode == 0o700, "the process's folder is its own (mkdtemp)")
    }

    @Test("the folder of a process that is gone is removed; a running process's stays")
    func abandonedFoldersAreRemoved() throws {
        let base = try TestScratch.folder("base")
        // A pid no process can have: above the kernel's largest.
        let largest = try String(contentsOfFile: "/proc/sys/kernel/pid_max", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let impossible = try #require(Int(largest)) + 1
        let gone = base + "/" + TestScratch.prefix + "\(impossible).AbC123"
        let running = base + "/" + TestScratch.prefix + "\(getppid()).XyZ789"
        let other = base + "/unrelated-\(impossible)"
        for folder in [gone, running, other] {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        }
        TestScratch.removeAbandoned(in: base)
        #expect(!FileManager.default.fileExists(atPath: gone))
        #expect(FileManager.default.fileExists(atPath: running))
        #expect(FileManager.default.fileExists(atPath: other))
    }
}
