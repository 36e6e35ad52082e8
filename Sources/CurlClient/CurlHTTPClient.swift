import CCurl

/// The one outbound HTTP client of Gatehouse: async/await over libcurl's multi interface.
///
/// A single multi handle, driven by a dedicated thread (never a server event loop), owns the
/// connection cache, DNS cache and TLS sessions, so connections to a provider are reused
/// across requests. One thread is enough: two, each with a multi handle of its own and taking
/// transfers in turn, neither raised the rate nor shortened the tail of 256 concurrent calls
/// to a 50 ms upstream (Performance.md). HTTP/2 is spoken when the server offers it, one
/// request at a time per connection (libcurl 7.88's multiplexing stalls streams, see
/// `CurlMultiDriver`). Redirects are never followed, TLS is always verified, and every request
/// has connect/total timeouts and a response-size cap.
public final class CurlHTTPClient: Sendable {
    /// The settings every request starts from.
    public let configuration: CurlClientConfiguration
    private let driver: CurlMultiDriver

    /// libcurl's global state is set up once per process, before any handle exists.
    private static let globalInit: Void = {
        _ = gh_global_init()
    }()

    /// Starts a client and its driver thread.
    public init(configuration: CurlClientConfiguration = .init()) {
        Self.globalInit
        self.configuration = configuration
        self.driver = CurlMultiDriver(
            maxCachedConnections: configuration.maxCachedConnections, maxTransfers: configuration.maxTransfers,
            maxWaiting: configuration.maxWaitingTransfers, maxPerOwner: configuration.maxTransfersPerOwner,
            maxHighPerShare: configuration.maxHighTransfersPerShare,
            reserved: configuration.reservedTransfers)
    }

    /// Transfers in flight and waiting now, and the requests refused as `overloaded` so far.
    public var load: OutboundLoad { driver.load.snapshot }

    /// How many times the driver thread has woken from its wait (`LoadCounters.wakeUpCount`).
    var driverWakeUps: Int { driver.load.wakeUpCount }

    /// How many changes the driver has made to its epoll set (`LoadCounters.watchChangeCount`).
    var driverWatchChanges: Int { driver.load.watchChangeCount }

    /// Sends a request and collects the whole response body (bounded by the size cap).
    public func execute(_ request: OutboundRequest) async throws -> OutboundResponse {
        try await stream(request).collect()
    }

    /// Sends a request and returns as soon as the response head is known; the body streams.
    ///
    /// Cancelling the awaiting task aborts the transfer, at any point.
    public func stream(_ request: OutboundRequest) async throws -> OutboundStreamingResponse {
        let transfer = try Transfer(request: request, configuration: configuration, driver: driver)
        guard let upload = request.upload, let channel = transfer.upload else {
            return try await start(transfer)
        }
        let kept: [[UInt8]]?
        do {
            kept = try upload.claim()
        } catch {
            transfer.fail(error)  // never started: this releases its channels, which hold it
            throw error
        }
        // The body's producer runs beside the transfer until the body is sent or the transfer
        // ends; a producer that fails aborts the transfer, and its error is what the caller sees
        // (as `OutboundBodyError`: a body over a cap stays that error, not libcurl's "aborted
        // by callback").
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                do {
                    try await upload.send(kept, into: channel)
                    channel.finish(error: nil)
                } catch {
                    channel.finish(error: error)
                }
            }
            do {
                let response = try await start(transfer)
                group.cancelAll()
                return response
            } catch {
                group.cancelAll()
                if let failure = channel.failure { throw OutboundBodyError(underlying: failure) }
                throw error
            }
        }
    }

    /// Starts the transfer and waits for the response head.
    private func start(_ transfer: Transfer) async throws -> OutboundStreamingResponse {
        let head = try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<OutboundResponseHead, any Error>) in
                transfer.setHeadContinuation(continuation)
                driver.submit(.add(transfer))
            }
        } onCancel: {
            transfer.requestCancel()
        }
        return OutboundStreamingResponse(head: head, body: ResponseBody(channel: transfer.channel))
    }

    /// Asks the driver thread to stop and returns at once; transfers still running fail with
    /// `cancelled`, new ones are refused.
    public func shutdown() {
        driver.shutdown()
    }

    /// Stops the driver thread like `shutdown()`, suspending until it has ended (what a
    /// service's orderly stop awaits).
    public func stop() async {
        await driver.stop()
    }

    deinit {
        // Never waits: a deinit may run on an event loop or a cooperative thread.
        driver.shutdown()
    }
}
