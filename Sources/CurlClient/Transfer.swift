import CCurl
import Synchronization

/// One request in flight: its easy-handle configuration, the response head being received,
/// and the channel its body flows through.
///
/// Everything but `headContinuation` and `cancelRequested` (both behind locks) is touched
/// only on the driver thread, which is why the class may cross threads at all.
final class Transfer: @unchecked Sendable {
    let request: OutboundRequest
    let configuration: CurlClientConfiguration
    let channel: BodyChannel
    /// The streamed request body's buffer, when the request has `upload` and no `body`.
    let upload: UploadChannel?
    private let maxBytes: Int
    private let headContinuation = Mutex<CheckedContinuation<OutboundResponseHead, any Error>?>(nil)
    private let cancelRequested = Mutex<Bool>(false)
    private weak var driver: CurlMultiDriver?

    // Driver-thread state.
    private(set) var easy: UnsafeMutableRawPointer?
    private var headerList: UnsafeMutablePointer<curl_slist>?
    /// The header fields of the response being received (its head's, once its block ended).
    private(set) var receivedHeaders = OutboundHeaders()
    private var headDelivered = false
    /// The final response's header block has ended: later header lines are trailers (HTTP/1.1
    /// chunked trailers and HTTP/2 trailing fields, which libcurl passes to the header
    /// callback too) and never join the head, whenever the head is handed over.
    private var headerBlockEnded = false
    /// The header lines arriving belong to an interim (1xx) response.
    private var interimResponse = false
    /// The driver loop's list of heads to hand over at the end of its turn, and whether this
    /// transfer is on it.
    private var heads: HeadDeliveries?
    private var headQueued = false
    private var receivedBytes = 0
    private var exceededCap = false
    /// libcurl has read the whole streamed request body (its read callback saw the end).
    private var uploadEnded = false

    init(request: OutboundRequest, configuration: CurlClientConfiguration, driver: CurlMultiDriver) throws {
        let scheme = request.url.prefix(8).lowercased()
        guard scheme.hasPrefix("http://") || scheme.hasPrefix("https://") else {
            throw OutboundError(kind: .invalidRequest, message: "only absolute http and https URLs are allowed")
        }
        for field in request.headers where Self.containsLineBreak(field.name) || Self.containsLineBreak(field.value) {
            throw OutboundError(kind: .invalidRequest, message: "header field \(field.name.debugDescription) contains a line break")
        }
        self.request = request
        self.configuration = configuration
        self.maxBytes = request.maxResponseBytes ?? configuration.maxResponseBytes
        self.driver = driver
        self.channel = BodyChannel(highWater: configuration.streamBufferBytes)
        self.upload = request.body == nil && request.upload != nil ? UploadChannel(highWater: configuration.streamBufferBytes) : nil
        channel.attach(self)
        upload?.attach(self)
    }

    private static func containsLineBreak(_ text: String) -> Bool {
        text.utf8.contains { $0 == 10 || $0 == 13 || $0 == 0 }
    }

    // MARK: Caller side

    func setHeadContinuation(_ continuation: CheckedContinuation<OutboundResponseHead, any Error>) {
        headContinuation.withLock { $0 = continuation }
    }

    var isCancelRequested: Bool { cancelRequested.withLock { $0 } }

    /// Asks the driver to un-pause the transfer (a consumer drained its buffer, or a
    /// producer queued upload bytes).
    func requestResume() {
        driver?.submit(.resume(self))
    }

    /// Marks the transfer cancelled and asks the driver to abort it. Also covers a cancel
    /// that races ahead of the `add` command: `start` checks the flag first.
    func requestCancel() {
        cancelRequested.withLock { $0 = true }
        driver?.submit(.cancel(self))
    }

    // MARK: Driver side

    /// When the total timeout of a transfer that waited for a slot ends (monotonic
    /// nanoseconds): the wait counts toward it. `nil` for one started at once.
    var deadline: UInt64?

    /// Whether the driver counts this transfer against its request's owner (until it ends).
    var countedForOwner = false
    /// Whether the driver counts this transfer against its request's share (`.high` with a share).
    var countedForShare = false

    /// Its place in the order of arrival of the `.high` transfers that waited (`ShareLines`).
    var arrival: UInt64 = 0

    /// Whether the transfer is in the driver's waiting line (`WaitingTransfers`).
    var isWaiting = false

    /// The whole timeout of this request.
    var totalTimeout: Duration { request.timeout ?? configuration.timeout }

    /// What is left of the total timeout at `now`: all of it, unless the transfer waited.
    func remainingTime(now: UInt64) -> Duration {
        guard let deadline else { return totalTimeout }
        return .nanoseconds(Int64(clamping: deadline > now ? deadline - now : 0))
    }

    /// Applies every option of this request to a clean easy handle; `heads` is the driver
    /// loop's list this transfer's head joins when its body starts, `sockets` the registrations
    /// its connection's socket joins.
    func configure(_ easy: UnsafeMutableRawPointer, heads: HeadDeliveries, sockets: SocketRegistrations) throws {
        self.easy = easy
        self.heads = heads
        let request = self.request
        try set(easy, CURLOPT_URL, request.url)
        try set(easy, CURLOPT_PATH_AS_IS, request.pathAsIs ? 1 : 0)
        // Threaded programs must not let libcurl install signal handlers (curl #10743).
        try set(easy, CURLOPT_NOSIGNAL, 1)
        // Redirects are never followed: a provider redirect is an answer, not an instruction.
        try set(easy, CURLOPT_FOLLOWLOCATION, 0)
        try set(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        // A proxy's answer to CONNECT is not the response: its header block would end the head.
        try set(easy, CURLOPT_SUPPRESS_CONNECT_HEADERS, 1)
        let registrations = Unmanaged.passUnretained(sockets).toOpaque()
        let open = request.addresses == .publicOnly ? SocketRegistrations.openPublicSocket : SocketRegistrations.openSocket
        try check(gh_easy_setopt_opensocket(easy, open))
        try check(gh_easy_setopt_pointer(easy, CURLOPT_OPENSOCKETDATA, registrations))
        try check(gh_easy_setopt_closesocket(easy, SocketRegistrations.closeSocket))
        try check(gh_easy_setopt_pointer(easy, CURLOPT_CLOSESOCKETDATA, registrations))
        if request.addresses == .publicOnly {
            // Its own connection cache: only connections opened through the check are reused.
            if let share = driver?.publicOnlyConnections {
                try check(gh_easy_setopt_pointer(easy, CURLOPT_SHARE, share))
            } else {
                try set(easy, CURLOPT_FRESH_CONNECT, 1)
                try set(easy, CURLOPT_FORBID_REUSE, 1)
            }
        } else {
            // `curl_easy_reset` keeps a handle's share: a handle recycled from a `.publicOnly`
            // request would put this request's unchecked connection in the checked ones' cache.
            try check(gh_easy_setopt_pointer(easy, CURLOPT_SHARE, nil))
        }
        try set(easy, CURLOPT_SSL_VERIFYPEER, 1)
        try set(easy, CURLOPT_SSL_VERIFYHOST, 2)
        if let caBundle = configuration.caBundlePath {
            try set(easy, CURLOPT_CAINFO, caBundle)
        }
        // HTTP/2 over TLS when the server offers it (ALPN), one stream per connection (see
        // `CurlMultiDriver`: no multiplexing, so no waiting for a connection to multiplex on).
        try set(easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS)
        try set(easy, CURLOPT_CONNECTTIMEOUT_MS, (request.connectTimeout ?? configuration.connectTimeout).curlMilliseconds)
        try set(easy, CURLOPT_TIMEOUT_MS, remainingTime(now: monotonicNanoseconds()).curlMilliseconds)
        // Aborts early when Content-Length already announces too much; the write callback
        // enforces the same cap for chunked bodies.
        try check(gh_easy_setopt_off_t(easy, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(maxBytes)))

        let method = request.method.uppercased()
        if let body = request.body {
            try set(easy, CURLOPT_POST, 1)
            try check(gh_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(body.count)))
            // COPYPOSTFIELDS: libcurl keeps its own copy, so the Swift array may go away. An
            // empty body still needs a valid pointer (libcurl copies its zero bytes from it).
            let bytes = body.isEmpty ? [0] : body
            try bytes.withUnsafeBytes { raw in
                try check(gh_easy_setopt_pointer(easy, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: raw.baseAddress!)))
            }
            if method != "POST" {
                try set(easy, CURLOPT_CUSTOMREQUEST, method)
            }
        } else if let upload = request.upload {
            // The read callback feeds libcurl; an unknown length goes chunked (HTTP/1.1).
            try set(easy, CURLOPT_POST, 1)
            try check(gh_easy_setopt_off_t(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(upload.length ?? -1)))
            if method != "POST" {
                try set(easy, CURLOPT_CUSTOMREQUEST, method)
            }
        } else {
            switch method {
            case "GET": try set(easy, CURLOPT_HTTPGET, 1)
            case "HEAD": try set(easy, CURLOPT_NOBODY, 1)
            default: try set(easy, CURLOPT_CUSTOMREQUEST, method)
            }
        }

        var list: UnsafeMutablePointer<curl_slist>?
        var hasUserAgent = false
        for field in request.headers {
            hasUserAgent = hasUserAgent || OutboundHeaders.sameName(field.name, "user-agent")
            list = Self.append(field.name, field.value, to: list)
        }
        if !hasUserAgent {
            list = Self.append("User-Agent", configuration.userAgent, to: list)
        }
        // No `Expect: 100-continue` round trip for small bodies.
        list = curl_slist_append(list, "Expect:")
        headerList = list
        try check(gh_easy_setopt_slist(easy, CURLOPT_HTTPHEADER, list))

        let context = Unmanaged.passUnretained(self).toOpaque()
        try check(gh_easy_setopt_data_callback(easy, CURLOPT_WRITEFUNCTION, transferWriteCallback))
        try check(gh_easy_setopt_pointer(easy, CURLOPT_WRITEDATA, context))
        try check(gh_easy_setopt_data_callback(easy, CURLOPT_HEADERFUNCTION, transferHeaderCallback))
        try check(gh_easy_setopt_pointer(easy, CURLOPT_HEADERDATA, context))
        try check(gh_easy_setopt_prereq(easy, transferRequestCallback))
        try check(gh_easy_setopt_pointer(easy, CURLOPT_PREREQDATA, context))
        if upload != nil {
            try check(gh_easy_setopt_data_callback(easy, CURLOPT_READFUNCTION, transferReadCallback))
            try check(gh_easy_setopt_pointer(easy, CURLOPT_READDATA, context))
        }
    }

    /// Called by libcurl for the next bytes of a streamed request body.
    func sendBody(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        guard let upload else { return 0 }
        switch upload.read(into: buffer) {
        case .bytes(let count): return count
        case .end:
            uploadEnded = true
            return 0
        case .pause: return gh_readfunc_pause()
        case .abort: return gh_readfunc_abort()
        }
    }

    /// Called by libcurl before it sends the request, each time: a retry within the transfer
    /// (libcurl retries an HTTP/2 request over HTTP/1.1 when the server asks for it, even after
    /// its header block) starts its header lines afresh, which the end of a block would
    /// otherwise refuse as trailers.
    func requestStarting() {
        receivedHeaders = OutboundHeaders()
        headerBlockEnded = false
        interimResponse = false
    }

    /// Called by libcurl for each header line of each response (interim ones too).
    func receiveHeaderLine(_ line: UnsafeRawBufferPointer) {
        // On bytes: a response has a dozen header lines, each a callback on the driver thread.
        guard !headerBlockEnded else { return }
        let bytes = line.bindMemory(to: UInt8.self)
        var end = bytes.count
        while end > 0, bytes[end - 1] == 0x0A || bytes[end - 1] == 0x0D { end -= 1 }
        if end == 0 {
            // The blank line that ends a header block: after an interim response's, the final
            // response follows; after the final one's, only the body and trailers do.
            headerBlockEnded = !interimResponse
        } else if end >= 5, bytes[..<5].elementsEqual("HTTP/".utf8) {
            // A new (final or interim) response starts; room for a dozen fields at once, where
            // growing by doubling copied the list four times.
            receivedHeaders = OutboundHeaders(capacity: 16)
            // `HTTP/1.1 100 Continue`, `HTTP/2 103`: the status's first digit follows the first space.
            let space = bytes[..<end].firstIndex(of: UInt8(ascii: " "))
            interimResponse = space.map { $0 + 1 < end && bytes[$0 + 1] == UInt8(ascii: "1") } ?? false
        } else if let colon = bytes[..<end].firstIndex(of: UInt8(ascii: ":")) {
            receivedHeaders.add(Self.trimmed(bytes, 0, colon), Self.trimmed(bytes, colon + 1, end))
        }
    }

    /// `list` with the line `name: value` (`name;` for an empty value, libcurl's form of a field
    /// sent empty) appended. The line is assembled on the stack, since libcurl copies it: as an
    /// interpolated string it was two allocations per field (the string and its C copy).
    private static func append(
        _ name: String, _ value: String, to list: UnsafeMutablePointer<curl_slist>?
    ) -> UnsafeMutablePointer<curl_slist>? {
        let length = name.utf8.count + (value.isEmpty ? 1 : 2 + value.utf8.count)
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: length + 1) { line in
            var end = line.initialize(fromContentsOf: name.utf8)
            if value.isEmpty {
                line[end] = UInt8(ascii: ";")
                end += 1
            } else {
                line[end] = UInt8(ascii: ":")
                line[end + 1] = UInt8(ascii: " ")
                end = line[(end + 2)...].initialize(fromContentsOf: value.utf8)
            }
            line[end] = 0
            return line.withMemoryRebound(to: CChar.self) { curl_slist_append(list, $0.baseAddress!) }
        }
    }

    /// The bytes in `start..<end` without leading and trailing spaces and tabs, as UTF-8 text.
    private static func trimmed(_ bytes: UnsafeBufferPointer<UInt8>, _ start: Int, _ end: Int) -> String {
        var lower = start
        var upper = end
        while lower < upper, bytes[lower] == 0x20 || bytes[lower] == 0x09 { lower += 1 }
        while upper > lower, bytes[upper - 1] == 0x20 || bytes[upper - 1] == 0x09 { upper -= 1 }
        return String(decoding: UnsafeBufferPointer(rebasing: bytes[lower..<upper]), as: UTF8.self)
    }

    /// Called by libcurl with body bytes; returns how many were taken, `0` to abort, or the
    /// pause value to stop delivery until the consumer catches up.
    func receiveBody(_ bytes: UnsafeRawBufferPointer) -> Int {
        if receivedBytes + bytes.count > maxBytes {
            exceededCap = true
            return 0
        }
        if !headDelivered, !headQueued, let heads {
            // Handed over at the end of the driver's turn rather than now: an answer that
            // arrived whole in this turn is complete by then, so its caller reads the body
            // without waiting for it, a second wake-up of the request's task.
            headQueued = true
            heads.pending.append(self)
        }
        guard channel.offer(bytes) else {
            return gh_writefunc_pause()
        }
        receivedBytes += bytes.count
        return bytes.count
    }

    /// Ends the transfer: delivers the head (if still owed) and closes the body channel.
    func finish(easy: UnsafeMutableRawPointer, error: OutboundError?) {
        upload?.close()
        if let error {
            if headDelivered || headQueued {
                // The body had begun: its failure is the body's, as when the head went first.
                channel.finish(error: error)
                deliverHeadIfNeeded()
            } else {
                fail(error)
            }
            return
        }
        // The body is whole before the head is handed over: a caller woken by the head finds
        // it complete and takes it without waiting again.
        channel.finish(error: nil)
        deliverHeadIfNeeded()
    }

    /// Fails a transfer whose head was not delivered yet.
    func fail(_ error: any Error) {
        upload?.close()
        headDelivered = true
        let continuation = headContinuation.withLock { value in
            defer { value = nil }
            return value
        }
        continuation?.resume(throwing: error)
        channel.finish(error: error)
    }

    /// Frees what libcurl borrowed from this transfer once the handle is detached.
    func releaseHandleResources() {
        if let headerList {
            curl_slist_free_all(headerList)
        }
        headerList = nil
        easy = nil
        heads = nil
    }

    /// Maps a libcurl result code to the error the caller sees.
    func error(for code: CURLcode) -> OutboundError? {
        if code == CURLE_OK { return nil }
        let message = String(cString: curl_easy_strerror(code))
        let raw = Int(code.rawValue)
        if exceededCap || code == CURLE_FILESIZE_EXCEEDED {
            return OutboundError(kind: .responseTooLarge, curlCode: raw, message: "the response is larger than \(maxBytes) bytes")
        }
        switch code {
        case CURLE_OPERATION_TIMEDOUT where upload != nil && !uploadEnded:
            return OutboundError(kind: .requestBodyTimedOut, curlCode: raw, message: "the request body was still being sent when the time ran out")
        case CURLE_OPERATION_TIMEDOUT:
            return OutboundError(kind: .timedOut, curlCode: raw, message: message)
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            return OutboundError(kind: .connectFailed, curlCode: raw, message: message)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM,
            CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CIPHER, CURLE_SSL_ISSUER_ERROR:
            return OutboundError(kind: .tls, curlCode: raw, message: message)
        case CURLE_URL_MALFORMAT, CURLE_UNSUPPORTED_PROTOCOL:
            return OutboundError(kind: .invalidRequest, curlCode: raw, message: message)
        default:
            return OutboundError(kind: .transport, curlCode: raw, message: message)
        }
    }

    /// Hands the response head to the caller unless it had it already (or the transfer failed
    /// first). Driver thread only.
    func deliverHeadIfNeeded() {
        guard !headDelivered else { return }
        guard let easy else {
            // Not reached: a transfer hands its head over before its handle goes back. Should
            // that change, the caller hears of it instead of waiting for ever.
            fail(OutboundError(kind: .transport, message: "the transfer ended before its response head was handed over"))
            return
        }
        headDelivered = true
        var status = 0
        _ = gh_easy_getinfo_long(easy, CURLINFO_RESPONSE_CODE, &status)
        var version = 0
        _ = gh_easy_getinfo_long(easy, CURLINFO_HTTP_VERSION, &version)
        let head = OutboundResponseHead(status: status, headers: receivedHeaders, httpVersion: Self.versionName(version))
        let continuation = headContinuation.withLock { value in
            defer { value = nil }
            return value
        }
        continuation?.resume(returning: head)
    }

    private static func versionName(_ version: Int) -> String {
        switch version {
        case CURL_HTTP_VERSION_1_0: "1.0"
        case CURL_HTTP_VERSION_2_0: "2"
        case CURL_HTTP_VERSION_3: "3"
        default: "1.1"
        }
    }

    private func set(_ easy: UnsafeMutableRawPointer, _ option: CURLoption, _ value: Int) throws {
        try check(gh_easy_setopt_long(easy, option, value))
    }

    private func set(_ easy: UnsafeMutableRawPointer, _ option: CURLoption, _ value: String) throws {
        try check(gh_easy_setopt_string(easy, option, value))
    }

    private func check(_ code: CURLcode) throws {
        guard code == CURLE_OK else {
            throw OutboundError(
                kind: .invalidRequest, curlCode: Int(code.rawValue), message: String(cString: curl_easy_strerror(code)))
        }
    }
}

/// libcurl's write callback: forwards body bytes to the transfer named by `userdata`.
private let transferWriteCallback: gh_data_callback = { data, size, count, userdata in
    guard let userdata, let data else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata).takeUnretainedValue()
    return transfer.receiveBody(UnsafeRawBufferPointer(start: data, count: size * count))
}

/// libcurl's header callback: forwards one header line to the transfer named by `userdata`.
private let transferHeaderCallback: gh_data_callback = { data, size, count, userdata in
    guard let userdata, let data else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata).takeUnretainedValue()
    transfer.receiveHeaderLine(UnsafeRawBufferPointer(start: data, count: size * count))
    return size * count
}

/// libcurl's pre-request callback: tells the transfer named by `clientp` a request is going out.
private let transferRequestCallback: curl_prereq_callback = { clientp, _, _, _, _ in
    if let clientp { Unmanaged<Transfer>.fromOpaque(clientp).takeUnretainedValue().requestStarting() }
    return CURL_PREREQFUNC_OK
}

/// libcurl's read callback: fills libcurl's buffer from the streamed body of the transfer.
private let transferReadCallback: gh_data_callback = { data, size, count, userdata in
    guard let userdata, let data else { return gh_readfunc_abort() }
    let transfer = Unmanaged<Transfer>.fromOpaque(userdata).takeUnretainedValue()
    return transfer.sendBody(into: UnsafeMutableRawBufferPointer(start: data, count: size * count))
}
