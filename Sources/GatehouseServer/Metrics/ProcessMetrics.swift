import Foundation
import Prometheus
import Synchronization

/// The Prometheus client conventions' process metrics, read from `/proc/self` when `/metrics`
/// is scraped: resident memory, open file descriptors, CPU seconds and start time.
final class ProcessMetrics: Sendable {
    private let residentBytes: Gauge
    private let openFileDescriptors: Gauge
    private let cpuCounter: Counter
    private let startTime: Gauge
    /// CPU seconds already added to the counter (it only goes up by the difference).
    private let countedCPU = Mutex<Double>(0)
    /// Clock ticks per second of `/proc/self/stat`'s times.
    private let ticks = Double(sysconf(Int32(_SC_CLK_TCK)))

    /// Registers the series in `registry` (the start time is set once, here).
    init(registry: PrometheusCollectorRegistry) {
        // The Prometheus client conventions' names, with their help lines.
        residentBytes = registry.makeGauge(
            descriptor: .init(metricName: "process_resident_memory", unitName: "bytes", helpText: "Resident memory size in bytes."))
        openFileDescriptors = registry.makeGauge(
            descriptor: .init(metricName: "process_open", unitName: "fds", helpText: "Number of open file descriptors."))
        cpuCounter = registry.makeCounter(
            descriptor: .init(metricName: "process_cpu_seconds", unitName: "total", helpText: "Total user and system CPU time spent in seconds."))
        startTime = registry.makeGauge(
            descriptor: .init(
                metricName: "process_start_time", unitName: "seconds", helpText: "Start time of the process since unix epoch in seconds."))
        startTime.set(to: Date().timeIntervalSince1970 - ProcessInfo.processInfo.systemUptime + Self.startSecondsSinceBoot(ticks: ticks))
    }

    /// Reads the figures now.
    func sample() {
        if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
            let kilobytes = line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first.flatMap({ Double($0) })
        {
            residentBytes.set(to: kilobytes * 1024)
        }
        if let descriptors = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") {
            openFileDescriptors.set(to: Double(descriptors.count))
        }
        // utime and stime: fields 14 and 15 of proc(5), indexes 11 and 12 here (13 and 14 are
        // cutime and cstime, the children's, which a server without children never has).
        if let fields = Self.statFields(), fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) {
            let total = (user + system) / ticks
            let delta = countedCPU.withLock { counted -> Double in
                let delta = max(0, total - counted)
                counted = max(counted, total)
                return delta
            }
            if delta > 0 { cpuCounter.increment(by: delta) }
        }
    }

    /// `/proc/self/stat`'s fields after the command name (which may contain spaces), numbered
    /// from 1 as in proc(5) minus the first two: index 0 is `state`.
    private static func statFields() -> [Substring]? {
        guard let stat = try? String(contentsOfFile: "/proc/self/stat", encoding: .utf8), let close = stat.lastIndex(of: ")") else {
            return nil
        }
        return Array(stat[stat.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true))
    }

    /// When the process started, in seconds after boot (`starttime`, field 22 of proc(5)).
    private static func startSecondsSinceBoot(ticks: Double) -> Double {
        guard let fields = statFields(), fields.count > 19, let start = Double(fields[19]) else { return 0 }
        return start / ticks
    }
}
