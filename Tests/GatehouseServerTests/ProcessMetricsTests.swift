import Foundation
import Testing

@testable import GatehouseServer

#if canImport(Glibc)
    import Glibc
#endif

/// The process metrics against the kernel's own accounting.
@Suite("Process metrics")
struct ProcessMetricsTests {
    /// This process's user and system CPU seconds by getrusage(2), independently of /proc.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return Double(usage.ru_utime.tv_sec) + Double(usage.ru_utime.tv_usec) / 1e6 + Double(usage.ru_stime.tv_sec)
            + Double(usage.ru_stime.tv_usec) / 1e6
    }

    /// A metric's value in an exposition.
    static func value(_ name: String, in text: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") }
    }

    @Test("process_cpu_seconds_total follows the process's own CPU time (utime + stime) under load, as getrusage counts it")
    func cpuSecondsUnderLoad() {
        let metrics = ServerMetrics()
        // Load: spin until this process has spent another half second of CPU.
        let start = Self.cpuSeconds()
        var spin: UInt64 = 0
        while Self.cpuSeconds() - start < 0.5 { spin &+= 1 }
        #expect(spin > 0)
        let exposed = Self.value("process_cpu_seconds_total", in: metrics.exposition())
        let after = Self.cpuSeconds()
        // /proc counts in clock ticks (10 ms): the metric is this process's time, within a tick
        // or two of getrusage's, never the children's (which are zero here).
        #expect((exposed ?? 0) >= start + 0.45, "metric \(exposed ?? -1) s, getrusage \(start) → \(after) s")
        #expect((exposed ?? .infinity) <= after + 0.05, "metric \(exposed ?? -1) s, getrusage \(after) s")
    }
}
