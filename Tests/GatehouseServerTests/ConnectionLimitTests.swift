import Foundation
import GatehouseCore
import Testing

@testable import GatehouseServer

/// What the public listener's default connection limit leaves under the descriptor limit and
/// a cgroup's memory limit.
@Suite struct ConnectionLimitTests {
    @Test(
        "systemd's LimitNOFILE=65536 on 2 processors with the operations listener and 20 database connections: 49,035 connections, 16,345 descriptors for provider calls"
    )
    func systemdUnit() {
        let limit = ConnectionLimit.fitting(
            descriptorLimit: 65_536, upstreamConnections: 256, databaseConnections: 20, operationsListener: true, processors: 2)
        // 65,536 − (64 + 4 × 2 + 64 + 20) = 65,380 for connections and calls; a quarter for calls.
        #expect(limit == 65_380 - 16_345)
        #expect(limit + 16_345 + 156 == 65_536)
    }

    @Test(
        "calls in flight get half the descriptors kept for provider calls: 8,172 under systemd's 65,536, 128 under 1,024, never fewer than 16; one user a sixteenth, at least 4; an eighth reserved"
    )
    func upstreamCalls() {
        func calls(_ descriptors: Int, upstreamConnections: Int = 256) -> Int {
            ConnectionLimit.upstreamCalls(
                descriptorLimit: descriptors, upstreamConnections: upstreamConnections, databaseConnections: 20, operationsListener: true,
                processors: 2)
        }
        // 16,345 descriptors for calls (systemdUnit): half of them.
        #expect(calls(65_536) == 16_345 / 2)
        // 1,024 − 156 leaves less than 4 × 256: libcurl's 256 kept connections, half for calls.
        #expect(calls(1_024) == 128)
        #expect(calls(200, upstreamConnections: 8) == ConnectionLimit.minimumUpstreamCalls)
        #expect(calls(0, upstreamConnections: 0) == ConnectionLimit.minimumUpstreamCalls)
        #expect(calls(Int.max) > 0)
        // One user's share: a sixteenth, at least 4, never more than all.
        #expect(ConnectionLimit.upstreamCallsPerUser(of: 8_172) == 510)
        #expect(ConnectionLimit.upstreamCallsPerUser(of: 128) == 8)
        #expect(ConnectionLimit.upstreamCallsPerUser(of: 16) == 4)
        #expect(ConnectionLimit.upstreamCallsPerUser(of: 2) == 2)
        // Kept for sign-ins, refreshes, keys and hooks: an eighth, at least one, none of one.
        #expect(ConnectionLimit.upstreamCallsReserved(of: 8_172) == 1_021)
        #expect(ConnectionLimit.upstreamCallsReserved(of: 128) == 16)
        #expect(ConnectionLimit.upstreamCallsReserved(of: 16) == 2)
        #expect(ConnectionLimit.upstreamCallsReserved(of: 2) == 1)
        #expect(ConnectionLimit.upstreamCallsReserved(of: 1) == 0)
    }

    @Test(
        "libcurl's kept connections are reserved whole when they are more than a quarter; without the operations listener its 64 go to connections"
    )
    func keptConnectionsReserved() {
        let limit = ConnectionLimit.fitting(
            descriptorLimit: 2_048, upstreamConnections: 1_000, databaseConnections: 0, operationsListener: false, processors: 4)
        #expect(limit == 2_048 - 80 - 1_000)
    }

    @Test(
        "Docker's 1,048,576 descriptors under Kubernetes' 512 MiB with the default caches (photos 32 MiB, live profiles and accounts 32 MiB each): 5,632 connections of 48 KiB and 1,408 calls of 64 KiB beside 64 MiB, not about 786,000 and 131,000"
    )
    func memoryLimited() {
        let kept = GatewayConfiguration.memoryKept(photoCacheBytes: 32 << 20, apiBufferBytes: 0)
        #expect(kept == 96 << 20)
        let limit = ConnectionLimit.fitting(
            descriptorLimit: 1 << 20, upstreamConnections: 256, databaseConnections: 20, operationsListener: true, memoryLimit: 512 << 20,
            memoryKept: kept, processors: 2)
        // 512 − 64 − 96 = 352 MiB: three quarters for connections, a quarter for calls.
        #expect(limit == 264 * 1_024 / 48)
        let calls = ConnectionLimit.upstreamCalls(
            descriptorLimit: 1 << 20, upstreamConnections: 256, databaseConnections: 20, operationsListener: true, memoryLimit: 512 << 20,
            memoryKept: kept, processors: 2)
        #expect(calls == 88 * 1_024 / 64)
        // Both together stay within the limit, beside the reserve and the caches.
        #expect(limit * (48 << 10) + calls * (64 << 10) + (64 << 20) + kept <= 512 << 20)
        let unlimited = ConnectionLimit.fitting(
            descriptorLimit: 1 << 20, upstreamConnections: 256, databaseConnections: 20, operationsListener: true, processors: 2)
        #expect(unlimited > 780_000)
        let unlimitedCalls = ConnectionLimit.upstreamCalls(
            descriptorLimit: 1 << 20, upstreamConnections: 256, databaseConnections: 20, operationsListener: true, processors: 2)
        #expect(unlimitedCalls > 130_000)
    }

    @Test(
        "a small container keeps half its memory for the process: 1,024 connections and 256 calls under 128 MiB, 512 and 128 under 64 MiB, 8 and the minimum 16 under 1 MiB; caches count for at most half the rest"
    )
    func smallContainers() {
        func limits(_ memory: Int, kept: Int = 0) -> (connections: Int, calls: Int) {
            (
                ConnectionLimit.fitting(
                    descriptorLimit: 65_536, upstreamConnections: 256, databaseConnections: 0, operationsListener: true, memoryLimit: memory,
                    memoryKept: kept, processors: 2),
                ConnectionLimit.upstreamCalls(
                    descriptorLimit: 65_536, upstreamConnections: 256, databaseConnections: 0, operationsListener: true, memoryLimit: memory,
                    memoryKept: kept, processors: 2)
            )
        }
        #expect(limits(128 << 20) == (1_024, 256))
        #expect(limits(64 << 20) == (512, 128))
        #expect(limits(1 << 20) == (8, ConnectionLimit.minimumUpstreamCalls))
        // The default 32 MiB photo cache counts for at most half of what the reserve leaves:
        // 64 MiB still holds 256 connections and 64 calls, and no cache leaves fewer than that.
        #expect(limits(64 << 20, kept: 32 << 20) == (256, 64))
        #expect(limits(64 << 20, kept: 1 << 30) == (256, 64))
        #expect(limits(128 << 20, kept: 32 << 20) == (512, 128))
    }

    @Test("descriptors too few for the reserve still leave one connection; extreme settings do not overflow")
    func extremes() {
        #expect(
            ConnectionLimit.fitting(descriptorLimit: 64, upstreamConnections: 256, databaseConnections: 0, operationsListener: true, processors: 2)
                == 1)

        let unlimited = ConnectionLimit.fitting(
            descriptorLimit: .max, upstreamConnections: .max, databaseConnections: .max, operationsListener: true, memoryLimit: .max,
            processors: .max)
        #expect(unlimited >= 1)
    }

    /// A cgroup hierarchy in a fresh folder: `files` relative path → content, and the
    /// membership file's text. Returns the mount and the membership file's path.
    static func hierarchy(_ files: [String: String], membership: String) throws -> (root: String, membership: String) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("cgroup-\(UUID().uuidString)").path
        for (path, content) in files {
            let file = root + "/" + path
            try FileManager.default.createDirectory(atPath: (file as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
            try content.write(toFile: file, atomically: true, encoding: .utf8)
        }
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
        try membership.write(toFile: root + "/membership", atomically: true, encoding: .utf8)
        return (root, root + "/membership")
    }

    @Test("cgroup v2: the lowest memory.max of the process's cgroup and those above it; max and a missing file are no limit")
    func cgroupV2() throws {
        let nested = try Self.hierarchy(
            ["system.slice/memory.max": "1073741824\n", "system.slice/gatehouse.service/memory.max": "max\n"],
            membership: "0::/system.slice/gatehouse.service\n")
        #expect(ConnectionLimit.memoryLimit(root: nested.root, membership: nested.membership) == 1 << 30)
        let container = try Self.hierarchy(["memory.max": "536870912\n"], membership: "0::/\n")
        #expect(ConnectionLimit.memoryLimit(root: container.root, membership: container.membership) == 512 << 20)
        let none = try Self.hierarchy(["user.slice/memory.max": "max\n"], membership: "0::/user.slice\n")
        #expect(ConnectionLimit.memoryLimit(root: none.root, membership: none.membership) == nil)
        #expect(ConnectionLimit.memoryLimit(root: none.root, membership: none.root + "/absent") == nil)
        // A colon in a unit's name is part of the path.
        let colon = try Self.hierarchy(["a:b.service/memory.max": "268435456\n"], membership: "0::/a:b.service\n")
        #expect(ConnectionLimit.memoryLimit(root: colon.root, membership: colon.membership) == 256 << 20)
    }

    @Test("cgroup v1: memory.limit_in_bytes, read from the mount down when the path is the host's; Int64.max rounded to pages is no limit")
    func cgroupV1() throws {
        let limited = try Self.hierarchy(
            ["memory/memory.limit_in_bytes": "268435456\n"], membership: "5:cpuacct,cpu:/docker/abc\n4:memory:/docker/abc\n0::/\n")
        #expect(ConnectionLimit.memoryLimit(root: limited.root, membership: limited.membership) == 256 << 20)
        let unlimited = try Self.hierarchy(
            ["memory/memory.limit_in_bytes": "9223372036854771712\n"], membership: "4:memory:/process_api/fe51\n0::/\n")
        #expect(ConnectionLimit.memoryLimit(root: unlimited.root, membership: unlimited.membership) == nil)
    }
}
