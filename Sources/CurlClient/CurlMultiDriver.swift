import CCurl
import Foundation
import Synchronization

/// Owns one libcurl multi handle and the thread that drives it.
///
/// libcurl handles must never be used from two threads at once, so every curl call except
/// `curl_multi_wakeup` happens on this driver's thread. Other threads talk to it through a
/// command queue and wake it with `curl_multi_wakeup`.
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

    /// `CURLM *`; only the driver thread uses it, except for `curl_multi_wakeup`.
    private nonisolated(unsafe) let multi: UnsafeMutableRawPointer
    /// `CURLSH *` holding the connection cache of `.publicOnly` transfers: their connections
    /// were all opened through the address check, and a connection another request opened to
    /// an internal address can never be reused by one of them. Used on the driver thread only
    /// (so it needs no lock callbacks).
    nonisolated(unsafe) let publicOnlyConnections: UnsafeMutableRawPointer?
    private let commands = Mutex<(queue: [Command], stopping: Bool)>(([], false))
    /// Whether the thread has ended, and who waits for it to.
    private let ending = Mutex<(ended: Bool, waiters: [CheckedContinuation<Void, Never>])>((false, []))

    init(maxCachedConnections: Int) {
        guard let multi = curl_multi_init() else {
            fatalError("curl_multi_init failed: libcurl is unusable")
        }
        self.multi = multi
        let share = curl_share_init()
        if let share { _ = gh_share_setopt_lock_data(share, CURLSHOPT_SHARE, CURL_LOCK_DATA_CONNECT) }
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
            self.run(DriverLoop(multi: handle.raw))
        }
        thread.name = "gatehouse-curl"
        thread.start()
    }

    /// Queues a command for the driver thread and wakes it.
    func submit(_ command: Command) {
        let accepted = commands.withLock { state -> Bool in
            guard !state.stopping else { return false }
            state.queue.append(command)
            return true
        }
        if accepted {
            curl_multi_wakeup(multi)
        } else if case .add(let transfer) = command {
            transfer.fail(OutboundError(kind: .cancelled, message: "the HTTP client was shut down"))
        }
    }

    /// Asks the thread to stop after failing every running transfer, and returns at once
    /// (never blocks its caller: it may be async code or a `deinit`).
    func shutdown() {
        let first = commands.withLock { state -> Bool in
            defer { state.stopping = true }
            return !state.stopping
        }
        // Only the first request wakes it: after that the handle may already be cleaned up.
        if first { curl_multi_wakeup(multi) }
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

    private func run(_ loop: DriverLoop) {
        while true {
            let (batch, stopping) = commands.withLock { state in
                defer { state.queue.removeAll(keepingCapacity: true) }
                return (state.queue, state.stopping)
            }
            for command in batch {
                loop.handle(command)
            }
            if stopping {
                loop.abortAll()
                break
            }
            loop.performAndReap()
            // Sleeps until socket activity, libcurl's own next timer, a wakeup, or one second.
            _ = curl_multi_poll(multi, nil, 0, 1000, nil)
        }
        curl_multi_cleanup(multi)
        if let publicOnlyConnections { curl_share_cleanup(publicOnlyConnections) }
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

/// The driver thread's own state: running transfers and idle easy handles.
/// Never touched from another thread, so it needs no locking.
private final class DriverLoop {
    let multi: UnsafeMutableRawPointer
    var active: [UnsafeMutableRawPointer: Transfer] = [:]
    var idleHandles: [UnsafeMutableRawPointer] = []

    init(multi: UnsafeMutableRawPointer) {
        self.multi = multi
    }

    func handle(_ command: CurlMultiDriver.Command) {
        switch command {
        case .add(let transfer):
            start(transfer)
        case .cancel(let transfer):
            guard let easy = transfer.easy, active[easy] != nil else { return }
            complete(transfer, easy: easy, error: OutboundError(kind: .cancelled, message: "the request was cancelled"))
        case .resume(let transfer):
            guard let easy = transfer.easy, active[easy] != nil else { return }
            _ = curl_easy_pause(easy, gh_pause_cont())
        }
    }

    func start(_ transfer: Transfer) {
        if transfer.isCancelRequested {
            transfer.fail(OutboundError(kind: .cancelled, message: "the request was cancelled"))
            return
        }
        let easy: UnsafeMutableRawPointer
        if let reused = idleHandles.popLast() {
            easy = reused
        } else if let fresh = curl_easy_init() {
            easy = fresh
        } else {
            transfer.fail(OutboundError(kind: .transport, message: "curl_easy_init failed"))
            return
        }
        do {
            try transfer.configure(easy)
        } catch {
            transfer.releaseHandleResources()
            recycle(easy)
            transfer.fail(error)
            return
        }
        active[easy] = transfer
        let code = curl_multi_add_handle(multi, easy)
        if code != CURLM_OK {
            complete(transfer, easy: easy, error: OutboundError(kind: .transport, message: "curl_multi_add_handle failed"))
        }
    }

    func performAndReap() {
        var running: Int32 = 0
        _ = curl_multi_perform(multi, &running)
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
        active[easy] = nil
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
        for (easy, transfer) in active {
            complete(transfer, easy: easy, error: OutboundError(kind: .cancelled, message: "the HTTP client was shut down"))
        }
        for easy in idleHandles {
            curl_easy_cleanup(easy)
        }
        idleHandles.removeAll()
    }
}
