import CCurl
import Foundation
import Synchronization

/// Owns one libcurl multi handle and the thread that drives it.
///
/// libcurl handles must never be used from two threads at once, so every curl call happens on
/// this driver's thread. Other threads talk to it through a command queue and wake it through
/// an eventfd.
///
/// The thread drives libcurl's socket interface (`curl_multi_socket_action`) over its own
/// epoll set rather than `curl_multi_perform` + `curl_multi_poll`: those look at every
/// transfer in flight on each wake-up, which with a slow upstream and hundreds of waiting
/// callers cost most of the driver's CPU (libcurl's reference measured −30 % CPU at 256 in
/// flight); a socket event now costs the one transfer it concerns.
final class CurlMultiDriver: Sendable {
    /// What other threads ask the driver thread to do.
    enum Command: Sendable {
        /// Configure the transfer's easy handle and start it.
        case add(Transfer)
        /// Abort the transfer if it is still running.
        case cancel(Transfer)
        /// Un-pause a transfer whose consumer drained its buffer.
        case resume(Transfer)
    }

    /// The commands waiting for the driver thread, and whether it was asked to stop.
    private struct Inbox {
        var queue: [Command] = []
        var stopping = false
    }

    /// `CURLSH *` holding the connection cache of `.publicOnly` transfers: their connections
    /// were all opened through the address check, and a connection another request opened to
    /// an internal address can never be reused by one of them. Used on the driver thread only
    /// (so it needs no lock callbacks).
    nonisolated(unsafe) let publicOnlyConnections: UnsafeMutableRawPointer?
    /// The eventfd the driver thread waits on beside libcurl's sockets. Written outside the
    /// inbox's lock (a system call under it made every caller and the driver thread wait on
    /// each other) and closed only in `deinit`: a writer holds a reference to the driver, so
    /// the descriptor number cannot have been reused by the process while it writes.
    private let wakeDescriptor: Int32
    private let inbox = Mutex(Inbox())
    /// The driver's transfers in flight and waiting, readable from any thread.
    let load = LoadCounters()
    /// Whether the thread has ended, and who waits for it to.
    private let ending = Mutex<(ended: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    /// Starts the driver thread. At most `maxTransfers` run at once, of which `reserved` only
    /// `.high` requests may take; up to `maxWaiting` more of each priority wait in line for
    /// them, and a request beyond those fails as `overloaded`, one beyond `maxPerOwner` of its
    /// owner's as `ownerOverloaded`, and a `.high` one beyond `maxHighPerShare` of its share's as
    /// `overloaded`.
    init(
        maxCachedConnections: Int, maxTransfers: Int = 1024, maxWaiting: Int = 1024, maxPerOwner: Int = .max, maxHighPerShare: Int = .max,
        reserved: Int = 0
    ) {
        guard let multi = curl_multi_init() else {
            fatalError("curl_multi_init failed: libcurl is unusable")
        }
        let epoll = gh_epoll_create()
        let wake = gh_eventfd_create()
        guard epoll >= 0, wake >= 0 else {
            fatalError("epoll_create1/eventfd failed (errno \(errno)): the HTTP client cannot run")
        }
        wakeDescriptor = wake
        var share = curl_share_init()
        if let made = share, gh_share_setopt_lock_data(made, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) != CURLSHE_OK {
            // A share that holds no connections would leave `.publicOnly` connections in the
            // multi's cache, where requests to any address reuse them and theirs are reused:
            // without one, `.publicOnly` requests connect afresh each time (`Transfer.configure`).
            curl_share_cleanup(made)
            share = nil
        }
        publicOnlyConnections = share
        // Keep enough idle connections for the expected concurrency per upstream; do not cap
        // total connections (curl #2369: the cap queues transfers in surprising ways).
        _ = gh_multi_setopt_long(multi, CURLMOPT_MAXCONNECTS, maxCachedConnections)
        // One request at a time per connection, HTTP/2 included: Debian 12's libcurl 7.88 loses
        // track of a multiplexed stream whose data arrives while another stream is being read
        // (measured here: 10 concurrent 2 MB downloads over one HTTP/2 connection left at least
        // one stalled until its timeout in 63 rounds of 100; none without multiplexing). Several
        // connections also cost less per request than one multiplexed one (curl #4639).
        _ = gh_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_NOTHING))
        let handle = MultiHandle(raw: multi)
        let thread = Thread { [self] in
            // Named from the thread itself: Foundation's `Thread.name` does not reach the
            // kernel's name on Linux, and `top -H` or `perf` would show the creator's.
            gh_name_this_thread("gatehouse-curl")
            self.run(
                DriverLoop(
                    multi: handle.raw, epoll: epoll, wake: wake,
                    limits: .init(
                        transfers: max(1, maxTransfers), waiting: max(0, maxWaiting), perOwner: max(1, maxPerOwner),
                        highPerShare: max(1, maxHighPerShare), reserved: min(max(0, reserved), max(1, maxTransfers) - 1)),
                    load: self.load))
        }
        thread.start()
    }

    /// Queues a command for the driver thread and wakes it.
    func submit(_ command: Command) {
        let (accepted, wake) = inbox.withLock { inbox -> (Bool, Bool) in
            guard !inbox.stopping else { return (false, false) }
            inbox.queue.append(command)
            // A non-empty queue already has its wake-up on the way: the thread reads the whole
            // queue after draining the eventfd, so one write per batch is enough.
            return (true, inbox.queue.count == 1)
        }
        if wake { gh_eventfd_signal(wakeDescriptor) }
        if !accepted, case .add(let transfer) = command {
            transfer.fail(OutboundError(kind: .cancelled, message: "the HTTP client was shut down"))
        }
    }

    /// Asks the thread to stop after failing every running transfer, and returns at once
    /// (never blocks its caller: it may be async code or a `deinit`).
    func shutdown() {
        let wake = inbox.withLock { inbox -> Bool in
            guard !inbox.stopping else { return false }
            inbox.stopping = true
            return true
        }
        if wake { gh_eventfd_signal(wakeDescriptor) }
    }

    /// Stops the thread like `shutdown()` and suspends (without blocking a thread) until it
    /// has ended and released libcurl's handles.
    func stop() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ended = ending.withLock { state -> Bool in
                if !state.ended { state.waiters.append(continuation) }
                return state.ended
            }
            if ended { continuation.resume() } else { shutdown() }
        }
    }

    deinit {
        // The thread holds the driver until it ends, so nothing waits on this descriptor now.
        close(wakeDescriptor)
    }

    private func run(_ loop: DriverLoop) {
        loop.install()
        while true {
            let (batch, stopping) = inbox.withLock { inbox in
                defer { inbox.queue.removeAll(keepingCapacity: true) }
                return (inbox.queue, inbox.stopping)
            }
            for command in batch {
                loop.handle(command)
            }
            loop.startWaiting()
            if stopping {
                loop.abortAll()
                break
            }
            // Sleeps until socket activity, libcurl's own next timer, a wake-up, or one second;
            // the wake-up is drained there, and the queue read at the top of the next turn.
            loop.waitAndDrive()
            loop.reap()
            loop.startWaiting()
            loop.heads.deliver()
        }
        curl_multi_cleanup(loop.multi)
        if let publicOnlyConnections { curl_share_cleanup(publicOnlyConnections) }
        close(loop.epoll)
        let waiters = ending.withLock { state in
            state.ended = true
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }
}

/// Carries the multi handle pointer to the driver thread, which then owns it.
private struct MultiHandle: @unchecked Sendable {
    let raw: UnsafeMutableRawPointer
}

/// Monotonic nanoseconds.
func monotonicNanoseconds() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}

/// The driver thread's own state: running and waiting transfers, idle easy handles.
/// Never touched from another thread, so it needs no locking.
private final class DriverLoop {
    /// How many transfers run at once, how many more wait for them (in each line), how many
    /// one owner may have, how many `.high` ones one share may have, and how many of the slots
    /// only `.high` transfers may take.
    struct Limits {
        var transfers: Int
        var waiting: Int
        var perOwner: Int
        var highPerShare: Int
        var reserved: Int
    }

    /// How often waiting transfers are checked for a timeout that ran out while they waited;
    /// the driver wakes at least this often while any waits.
    static let waitingCheckInterval: UInt64 = 100_000_000

    let multi: UnsafeMutableRawPointer
    /// The epoll set of libcurl's sockets and the wake-up eventfd.
    let epoll: Int32
    /// libcurl's sockets in that set.
    let sockets: SocketRegistrations
    /// The eventfd other threads write to wake the driver.
    let wake: Int32
    var active: [UnsafeMutableRawPointer: Transfer] = [:]
    /// How many of `active` are `.normal`: they may take all slots but the reserved ones.
    private var activeNormal = 0
    /// `.normal` transfers waiting for one of `active` to end, first in line first.
    private var waiting = WaitingTransfers()
    /// `.high` transfers waiting, one line per share, started before any of `waiting`.
    private var waitingFirst = ShareLines()
    /// Whether no transfer of either priority waits.
    private var noneWaits: Bool { waiting.isEmpty && waitingFirst.isEmpty }
    let limits: Limits
    /// Transfers in flight and waiting of each owner that has any (so at most as many
    /// entries as transfers).
    private var ownerCounts: [String: Int] = [:]
    /// `.high` transfers in flight and waiting of each share that has any.
    private var shareCounts: [String: Int] = [:]
    /// `.high` transfers in flight of each share that has any (`mayStart(share:)`).
    private var runningShareCounts: [String: Int] = [:]
    /// Whether a share's `.high` transfers stop starting at half of the reserved slots while
    /// `.normal` ones would fill all others (`mayStart(share:)`): only when a share limit is
    /// set, below the slots, and at least two slots are reserved (with one, a share running it
    /// would hold it all the same; with none, the hold would only put sign-ins behind
    /// passthrough calls).
    private var sharesSplitSlots: Bool { limits.highPerShare < limits.transfers && limits.reserved >= 2 }
    /// Where the counts are published for other threads.
    let load: LoadCounters
    /// When waiting transfers were last checked for their timeouts.
    private var waitingCheckedAt: UInt64 = 0
    var idleHandles: [UnsafeMutableRawPointer] = []
    /// Heads whose bodies began this turn, handed over when it ends.
    let heads = HeadDeliveries()
    /// When libcurl asked to be called for its timeouts (monotonic nanoseconds), if it did.
    var timerDeadline: UInt64?
    /// The ready descriptors and their CURL_CSELECT_* bits of one wait.
    private var readyDescriptors = [Int32](repeating: 0, count: 64)
    private var readyFlags = [Int32](repeating: 0, count: 64)

    init(multi: UnsafeMutableRawPointer, epoll: Int32, wake: Int32, limits: Limits, load: LoadCounters) {
        self.multi = multi
        self.epoll = epoll
        sockets = SocketRegistrations(epoll: epoll, load: load)
        self.wake = wake
        self.limits = limits
        self.load = load
    }

    /// Hands libcurl the socket and timer callbacks and watches the wake-up eventfd. Called on
    /// the driver thread, which keeps `self` alive for as long as libcurl may call back.
    func install() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        _ = gh_multi_setopt_pointer(multi, CURLMOPT_SOCKETDATA, Unmanaged.passUnretained(sockets).toOpaque())
        _ = gh_multi_setopt_pointer(multi, CURLMOPT_TIMERDATA, me)
        _ = gh_multi_setopt_socketfunction(multi, SocketRegistrations.socketFunction)
        _ = gh_multi_setopt_timerfunction(multi) { _, milliseconds, loop in
            guard let loop else { return -1 }
            let driver = Unmanaged<DriverLoop>.fromOpaque(loop).takeUnretainedValue()
            driver.timerDeadline = milliseconds < 0 ? nil : monotonicNanoseconds() + UInt64(milliseconds) * 1_000_000
            return 0
        }
        _ = gh_epoll_watch(epoll, wake, Int32(CURL_POLL_IN))
    }

    func handle(_ command: CurlMultiDriver.Command) {
        switch command {
        case .add(let transfer):
            admit(transfer)
        case .cancel(let transfer):
            let left = transfer.request.priority == .high ? waitingFirst.remove(transfer) : waiting.remove(transfer)
            if left {
                ended(transfer)
                // Published first: a caller that has its outcome sees a line without it.
                publishLoad()
                transfer.fail(OutboundError(kind: .cancelled, message: "the request was cancelled"))
                return
            }
            guard let easy = transfer.easy, active[easy] != nil else { return }
            complete(transfer, easy: easy, error: OutboundError(kind: .cancelled, message: "the request was cancelled"))
        case .resume(let transfer):
            guard let easy = transfer.easy, active[easy] != nil else { return }
            _ = curl_easy_pause(easy, gh_pause_cont())
        }
    }

    /// Whether one more `.high` transfer of `share` may start (any without a share may). With a
    /// share limit set, while `.normal` transfers in flight and waiting are enough to hold
    /// every slot but the reserved ones (stalled passthrough calls, say), a share whose `.high`
    /// transfers running are half of the reserved slots starts no more: an
    /// upstream whose calls hang then stops taking slots there, and the others' calls start in
    /// the rest instead of waiting behind its calls in line. A slot it is kept from goes to the
    /// next waiting transfer, a `.normal` one included: the bound is fixed, so a `.normal` start
    /// cannot tighten it, and the condition lasts while the `.normal` demand does instead of
    /// ending with the first `.normal` call that ends. It gates starts only: what a share
    /// started before is not taken back. With less `.normal` demand every `.high` transfer
    /// goes first as before.
    private func mayStart(share: String?) -> Bool {
        guard sharesSplitSlots, activeNormal + waiting.count >= limits.transfers - limits.reserved, let share,
            let running = runningShareCounts[share]
        else { return true }
        return running < limits.reserved / 2
    }

    /// Whether a slot is free for a transfer of `priority`: any slot for `.high`, one outside
    /// the reserved ones for `.normal`.
    private func hasSlot(for priority: OutboundPriority) -> Bool {
        guard active.count < limits.transfers else { return false }
        return priority == .high || activeNormal < limits.transfers - limits.reserved
    }

    /// Starts `transfer` when a slot is free and none that may start waits before it (a `.high`
    /// one starts past the lines of shares held back by `mayStart(share:)`), puts it in line
    /// when the lines have room, and refuses it otherwise, or when its owner or share has its
    /// part already.
    func admit(_ transfer: Transfer) {
        if transfer.isCancelRequested {
            transfer.fail(OutboundError(kind: .cancelled, message: "the request was cancelled"))
            return
        }
        // A slot freed earlier in this batch goes to the lines first, which may make room in them.
        if active.count < limits.transfers, !noneWaits { startWaiting() }
        let priority = transfer.request.priority
        let inLine = priority == .high ? waitingFirst.count : waiting.count
        // Those still waiting after `startWaiting` may not start (their share may run no more),
        // or no slot is free: a `.high` transfer starts past them when its own share may run.
        let startsNow =
            switch priority {
            case .high: hasSlot(for: .high) && mayStart(share: transfer.request.share) && !waitingFirst.holds(share: transfer.request.share)
            case .normal: hasSlot(for: .normal) && inLine == 0
            }
        guard startsNow || inLine < limits.waiting else {
            load.countRefusal()
            transfer.fail(OutboundError(kind: .overloaded, message: "too many calls are in flight and waiting"))
            return
        }
        if priority == .high, let share = transfer.request.share, shareCounts[share, default: 0] >= limits.highPerShare {
            load.countRefusal()
            transfer.fail(Self.shareTaken)
            return
        }
        if let owner = transfer.request.owner {
            let count = ownerCounts[owner, default: 0]
            guard count < limits.perOwner else {
                load.countRefusal()
                transfer.fail(OutboundError(kind: .ownerOverloaded, message: "this caller has too many calls in flight and waiting"))
                return
            }
            ownerCounts[owner] = count + 1
            transfer.countedForOwner = true
        }
        if priority == .high, let share = transfer.request.share {
            shareCounts[share, default: 0] += 1
            transfer.countedForShare = true
        }
        if startsNow {
            start(transfer)
        } else {
            // Capped at about 12 days, far beyond any real timeout, so the sum cannot overflow.
            transfer.deadline = monotonicNanoseconds() + UInt64(min(transfer.totalTimeout.curlMilliseconds, 1 << 30)) * 1_000_000
            if priority == .high { waitingFirst.append(transfer) } else { waiting.append(transfer) }
            publishLoad()
        }
    }

    /// Starts waiting transfers while slots are free, and fails those whose timeout ran out
    /// while they waited (checked every `waitingCheckInterval`, and whenever one would start).
    /// `.high` transfers first; `.normal` ones only into the slots that are not reserved.
    func startWaiting() {
        guard !noneWaits else { return }
        let now = monotonicNanoseconds()
        var expired: [Transfer] = []
        if now &- waitingCheckedAt >= Self.waitingCheckInterval {
            waitingCheckedAt = now
            expired = waitingFirst.removeAll(where: { ($0.deadline ?? .max) <= now })
            expired += waiting.removeAll(where: { ($0.deadline ?? .max) <= now })
        }
        while let next = nextToStart() {
            if (next.deadline ?? .max) <= now {
                expired.append(next)
            } else {
                start(next)
            }
        }
        for transfer in expired {
            ended(transfer)
            load.countRefusal()
        }
        // Published before the expired transfers fail: a caller that has its outcome sees the
        // counts without it.
        publishLoad()
        for transfer in expired { transfer.fail(Self.waitedTooLong) }
    }

    /// The waiting transfer a free slot starts next: the first `.high` one whose share may run
    /// one more, else the first `.normal` one when a slot outside the reserved ones is free.
    private func nextToStart() -> Transfer? {
        guard hasSlot(for: .high) else { return nil }
        if !waitingFirst.isEmpty, let first = waitingFirst.popFirst(where: mayStart(share:)) { return first }
        return hasSlot(for: .normal) ? waiting.popFirst() : nil
    }

    /// A waiting transfer's total timeout ran out before a slot was free: the client's own
    /// overload (never sent), not the upstream's slowness, which `timedOut` would blame.
    private static let waitedTooLong = OutboundError(kind: .overloaded, message: "the timeout elapsed while waiting for a free slot")

    /// A `.high` call refused because its share holds as many calls as it may.
    private static let shareTaken = OutboundError(kind: .overloaded, message: "too many calls to this upstream are in flight and waiting")

    /// Stops counting `transfer` against its owner and its share: it left the line or ended.
    func ended(_ transfer: Transfer) {
        if transfer.countedForShare, let share = transfer.request.share {
            transfer.countedForShare = false
            let count = shareCounts[share, default: 1] - 1
            shareCounts[share] = count > 0 ? count : nil
        }
        guard transfer.countedForOwner, let owner = transfer.request.owner else { return }
        transfer.countedForOwner = false
        let count = ownerCounts[owner, default: 1] - 1
        ownerCounts[owner] = count > 0 ? count : nil
    }

    /// Publishes the counts for other threads.
    func publishLoad() {
        load.publish(inFlight: active.count, waiting: waiting.count + waitingFirst.count)
    }

    func start(_ transfer: Transfer) {
        // A transfer that fails before it starts may have left the line: the counts are
        // published before its caller has the outcome.
        if transfer.isCancelRequested {
            ended(transfer)
            publishLoad()
            transfer.fail(OutboundError(kind: .cancelled, message: "the request was cancelled"))
            return
        }
        let easy: UnsafeMutableRawPointer
        if let reused = idleHandles.popLast() {
            easy = reused
        } else if let fresh = curl_easy_init() {
            easy = fresh
        } else {
            ended(transfer)
            publishLoad()
            transfer.fail(OutboundError(kind: .transport, message: "curl_easy_init failed"))
            return
        }
        do {
            try transfer.configure(easy, heads: heads, sockets: sockets)
        } catch {
            transfer.releaseHandleResources()
            recycle(easy)
            ended(transfer)
            publishLoad()
            transfer.fail(error)
            return
        }
        active[easy] = transfer
        if transfer.request.priority == .normal {
            activeNormal += 1
        } else if let share = transfer.request.share {
            runningShareCounts[share, default: 0] += 1
        }
        publishLoad()
        let code = curl_multi_add_handle(multi, easy)
        if code != CURLM_OK {
            complete(transfer, easy: easy, error: OutboundError(kind: .transport, message: "curl_multi_add_handle failed"))
        }
    }

    /// Waits for ready sockets, libcurl's timer or a wake-up (at most a second) and lets
    /// libcurl act on what is ready.
    func waitAndDrive() {
        var timeout: Int32 = noneWaits ? 1000 : Int32(Self.waitingCheckInterval / 1_000_000)
        if let deadline = timerDeadline {
            let now = monotonicNanoseconds()
            // Rounded up: waking a millisecond early would only spin until the deadline.
            timeout = deadline <= now ? 0 : Int32(min(UInt64(timeout), (deadline - now + 999_999) / 1_000_000))
        }
        let count = readyDescriptors.withUnsafeMutableBufferPointer { descriptors in
            readyFlags.withUnsafeMutableBufferPointer { flags in
                gh_epoll_wait(epoll, descriptors.baseAddress, flags.baseAddress, timeout)
            }
        }
        load.countWakeUp()
        var running: Int32 = 0
        for index in 0..<Int(count) {
            let descriptor = readyDescriptors[index]
            if descriptor == wake {
                gh_eventfd_drain(wake)
            } else if !sockets.takeParked(descriptor) {
                _ = curl_multi_socket_action(multi, descriptor, readyFlags[index], &running)
            }
        }
        if let deadline = timerDeadline, deadline <= monotonicNanoseconds() {
            // libcurl sets the next deadline from within this call when it wants one.
            timerDeadline = nil
            _ = curl_multi_socket_action(multi, -1, 0, &running)
        }
    }

    /// Completes the transfers libcurl reports done.
    func reap() {
        var remaining: Int32 = 0
        while let message = curl_multi_info_read(multi, &remaining) {
            guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle,
                let transfer = active[easy]
            else { continue }
            let result = gh_msg_result(message)
            complete(transfer, easy: easy, error: transfer.error(for: result))
        }
    }

    func complete(_ transfer: Transfer, easy: UnsafeMutableRawPointer, error: OutboundError?) {
        if active.removeValue(forKey: easy) != nil {
            if transfer.request.priority == .normal {
                activeNormal -= 1
            } else if let share = transfer.request.share {
                let count = runningShareCounts[share, default: 1] - 1
                runningShareCounts[share] = count > 0 ? count : nil
            }
        }
        ended(transfer)
        publishLoad()
        _ = curl_multi_remove_handle(multi, easy)
        transfer.finish(easy: easy, error: error)
        transfer.releaseHandleResources()
        recycle(easy)
    }

    func recycle(_ easy: UnsafeMutableRawPointer) {
        // A reset handle keeps its connection-independent caches; connections live in the multi.
        curl_easy_reset(easy)
        if idleHandles.count < 256 {
            idleHandles.append(easy)
        } else {
            curl_easy_cleanup(easy)
        }
    }

    func abortAll() {
        let waitingHigh = waitingFirst.removeAll { _ in true }
        for transfer in waitingHigh {
            transfer.fail(OutboundError(kind: .cancelled, message: "the HTTP client was shut down"))
        }
        while let transfer = waiting.popFirst() {
            transfer.fail(OutboundError(kind: .cancelled, message: "the HTTP client was shut down"))
        }
        for (easy, transfer) in active {
            complete(transfer, easy: easy, error: OutboundError(kind: .cancelled, message: "the HTTP client was shut down"))
        }
        for easy in idleHandles {
            curl_easy_cleanup(easy)
        }
        idleHandles.removeAll()
    }
}
