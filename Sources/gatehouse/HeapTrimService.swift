import Foundation
import Logging
import ServiceLifecycle

#if canImport(Glibc)
    import CMalloc
#endif

/// Hands the memory the allocator holds free back to the system, every `interval`, for as
/// long as the process serves.
///
/// glibc's malloc returns freed memory to the system only from the top of a heap: what is freed
/// beneath live allocations stays resident. A spike of connections leaves most of its memory
/// there: 9,000 idle keep-alive connections, once closed, left 220 MB of anonymous memory, of
/// which one `malloc_trim` returned 210 MB. The trim walks the allocator's free lists, each arena
/// locked in turn; on a quiet heap it takes microseconds, and memory in use is never touched.
/// Only glibc has `malloc_trim`: elsewhere the service measures and returns nothing.
struct HeapTrimService: Service {
    /// Time between two trims.
    let interval: Duration
    /// Where a trim that returned 8 MB or more is logged.
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            while (try? await Task.sleep(for: interval)) != nil {
                trim()
            }
        }
    }

    /// Trims once; a trim that returned 8 MB or more is logged with what stays.
    func trim() {
        let before = Self.anonymousKilobytes()
        let started = ContinuousClock.now
        #if canImport(Glibc)
            malloc_trim(0)
        #endif
        let elapsed = ContinuousClock.now - started
        guard let before, let after = Self.anonymousKilobytes(), before - after >= 8 << 10 else { return }
        logger.info(
            "returned freed memory to the system",
            metadata: [
                "memory.returned_mb": .stringConvertible((before - after) >> 10), "memory.anonymous_mb": .stringConvertible(after >> 10),
                "duration.ms": .stringConvertible(Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000),
            ])
    }

    /// The process's anonymous resident memory (`RssAnon` in `/proc/self/status`), in KB.
    static func anonymousKilobytes() -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return nil }
        for line in status.split(separator: "\n") where line.hasPrefix("RssAnon:") {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            return fields.count > 1 ? Int(fields[1]) : nil
        }
        return nil
    }
}
