import Testing

@testable import CurlClient

/// The client's bound on transfers in flight: what waits, what is refused, what a wait costs.
@Suite("CurlHTTPClient transfer limit")
struct TransferLimitTests {
    /// How a call ended.
    enum Outcome: Equatable {
        case status(Int)
        case failed(OutboundError.Kind)
        case otherError
    }

    /// The client's total timeout: far beyond any test's length, so that a held call ends only
    /// when the test cancels it, however slowly a loaded machine runs the test.
    static let held = Duration.seconds(3600)

    /// The timeout of a call that should start: it bounds a test whose call never does (it runs
    /// out of time in line instead of hanging the test), and is far longer than a loaded machine
    /// takes to run the test's steps (a full run on two cores once took over 30 s).
    static let shouldStart = Duration.seconds(300)

    /// Starts a request in a task of its own, `owner`'s with `priority`, counted against `share`.
    static func call(
        _ client: CurlHTTPClient, _ url: String, timeout: Duration? = nil, owner: String? = nil, priority: OutboundPriority = .normal,
        share: String? = nil
    ) -> Task<Outcome, Never> {
        var request = OutboundRequest(url: url, timeout: timeout)
        request.owner = owner
        request.priority = priority
        request.share = share
        return Task {
            do {
                return .status(try await client.execute(request).status)
            } catch let error as OutboundError {
                return .failed(error.kind)
            } catch {
                return .otherError
            }
        }
    }

    @Test(
        "beyond maxTransfers a call waits without reaching the server, beyond the line it is refused at once; a cancelled wait leaves, one whose timeout runs out is refused, and a free slot starts the next"
    )
    func callsBeyondTheLimitWait() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient(configuration: .init(timeout: Self.held, maxTransfers: 2, maxWaitingTransfers: 1))
            defer { client.shutdown() }
            let slow = [Self.call(client, server.url("/hold")), Self.call(client, server.url("/hold"))]
            let bothStarted = try await UploadTests.eventually { server.requestsSeen == 2 && client.load.inFlight == 2 }
            #expect(bothStarted)

            // The third waits: it never reaches the server while both slots are taken.
            let cancelled = Self.call(client, server.url("/hello"))
            let thirdWaits = try await UploadTests.eventually { client.load.waiting == 1 }
            #expect(thirdWaits)
            #expect(server.requestsSeen == 2, "a call beyond the limit reached the server")
            // The line is full: the fourth is refused without waiting.
            let refused = await Self.call(client, server.url("/hello")).value
            #expect(refused == .failed(.overloaded))
            #expect(client.load == OutboundLoad(inFlight: 2, waiting: 1, refused: 1))

            // Cancelling a waiting call ends it and frees its place in line.
            cancelled.cancel()
            #expect(await cancelled.value == .failed(.cancelled))
            #expect(client.load.waiting == 0)

            // A waiting call's total timeout runs while it waits; running out there is the
            // client's overload, not the server's slowness (which no breaker may blame).
            let timedOut = await Self.call(client, server.url("/hello"), timeout: .milliseconds(300)).value
            #expect(timedOut == .failed(.overloaded))
            #expect(client.load.refused == 2)
            #expect(client.load.waiting == 0)

            // A slot that frees starts the first in line.
            let next = Self.call(client, server.url("/hello"))
            let nextWaits = try await UploadTests.eventually { client.load.waiting == 1 }
            #expect(nextWaits)
            slow[0].cancel()
            #expect(await next.value == .status(200))
            #expect(await slow[0].value == .failed(.cancelled))
            slow[1].cancel()
            #expect(await slow[1].value == .failed(.cancelled))
            let allEnded = try await UploadTests.eventually { client.load.inFlight == 0 && client.load.waiting == 0 }
            #expect(allEnded)
            #expect(server.requestsSeen == 3)
        }
    }

    @Test(
        "one owner's calls in flight and waiting stay within maxTransfersPerOwner: one more is refused at once, another owner's and unowned calls go on, and an ended call frees its share"
    )
    func ownersShare() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient(configuration: .init(timeout: Self.held, maxTransfers: 2, maxWaitingTransfers: 2, maxTransfersPerOwner: 2))
            defer { client.shutdown() }
            func call(_ path: String, owner: String?) -> Task<Outcome, Never> {
                Self.call(client, server.url(path), owner: owner)
            }
            // Alice's first call runs, her second waits behind Bob's.
            let alicesFirst = call("/hold", owner: "alice")
            let bobsSlow = call("/hold", owner: "bob")
            let bothRun = try await UploadTests.eventually { client.load.inFlight == 2 && server.requestsSeen == 2 }
            #expect(bothRun)
            let alicesSecond = call("/hello", owner: "alice")
            let secondWaits = try await UploadTests.eventually { client.load.waiting == 1 }
            #expect(secondWaits)
            // Her third is refused, though the line has room; an unowned call still waits.
            #expect(await call("/hello", owner: "alice").value == .failed(.ownerOverloaded))
            let unowned = call("/hello", owner: nil)
            let unownedWaits = try await UploadTests.eventually { client.load.waiting == 2 }
            #expect(unownedWaits)
            #expect(client.load == OutboundLoad(inFlight: 2, waiting: 2, refused: 1))
            // Bob's ending frees a slot: Alice's second call runs and ends, and her share with it.
            bobsSlow.cancel()
            #expect(await bobsSlow.value == .failed(.cancelled))
            #expect(await alicesSecond.value == .status(200))
            #expect(await unowned.value == .status(200))
            #expect(await call("/hello", owner: "alice").value == .status(200))
            alicesFirst.cancel()
            #expect(await alicesFirst.value == .failed(.cancelled))
            // Her first call's share is back too: two of hers run again.
            let again = [call("/hold", owner: "alice"), call("/hold", owner: "alice")]
            // In flight once libcurl has them; seen once their requests reached the server,
            // which must come before they are cancelled for the count below to hold.
            let twoRun = try await UploadTests.eventually { client.load.inFlight == 2 && server.requestsSeen == 7 }
            #expect(twoRun)
            for call in again { call.cancel() }
            for call in again { #expect(await call.value == .failed(.cancelled)) }
            #expect(server.requestsSeen == 7)
        }
    }

    @Test(
        "one share's .high calls in flight and waiting stay within maxHighTransfersPerShare: one more is refused at once while slots are free, another share's and unshared calls run, .normal calls are not counted, and an ended call frees its place"
    )
    func highCallsShare() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient(
                configuration: .init(timeout: Self.held, maxTransfers: 4, maxWaitingTransfers: 4, maxHighTransfersPerShare: 2))
            defer { client.shutdown() }
            func call(_ path: String, _ priority: OutboundPriority = .high, share: String?) -> Task<Outcome, Never> {
                Self.call(client, server.url(path), priority: priority, share: share)
            }
            // A hanging provider's two .high calls hold its share.
            let held = [call("/hold?a-1", share: "provider:a"), call("/hold?a-2", share: "provider:a")]
            let bothRun = try await UploadTests.eventually { client.load.inFlight == 2 && server.requestsSeen == 2 }
            #expect(bothRun)
            // Its third is refused at once, with two slots free, and never sent.
            #expect(await call("/hello?a-3", share: "provider:a").value == .failed(.overloaded))
            #expect(client.load == OutboundLoad(inFlight: 2, waiting: 0, refused: 1))
            // Another provider's sign-in, a call without a share and the same provider's
            // .normal calls go on.
            #expect(await call("/hello?b-1", share: "provider:b").value == .status(200))
            #expect(await call("/hello?unshared", share: nil).value == .status(200))
            #expect(await call("/hello?a-normal", .normal, share: "provider:a").value == .status(200))
            #expect(!server.targetsSeen.contains("/hello?a-3"))
            // One of its calls ends: the provider has room for one more .high call again.
            held[0].cancel()
            #expect(await held[0].value == .failed(.cancelled))
            #expect(await call("/hello?a-4", share: "provider:a").value == .status(200))
            held[1].cancel()
            #expect(await held[1].value == .failed(.cancelled))
            let allEnded = try await UploadTests.eventually { client.load.inFlight == 0 && client.load.waiting == 0 }
            #expect(allEnded)
        }
    }

    @Test(
        "with stalled .normal calls holding every slot but the reserved ones, one share's .high calls run in half of those at most: its next waits though reserved slots are free, another share's and unshared calls start in them, even from behind it in line, and the waiting one starts once a .normal slot frees"
    )
    func sharesSplitTheReservedSlots() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient(
                configuration: .init(timeout: Self.held, maxTransfers: 6, maxWaitingTransfers: 4, maxHighTransfersPerShare: 3, reservedTransfers: 4))
            defer { client.shutdown() }
            // A call held where it should start runs out of time in line instead of hanging the test.
            func call(_ path: String, _ priority: OutboundPriority = .high, share: String?, timeout: Duration? = nil) -> Task<Outcome, Never> {
                Self.call(client, server.url(path), timeout: timeout, priority: priority, share: share)
            }
            // Stalled passthrough calls hold both unreserved slots.
            let stalled = [call("/hold?normal-1", .normal, share: "provider:a"), call("/hold?normal-2", .normal, share: "provider:a")]
            let twoRun = try await UploadTests.eventually { client.load.inFlight == 2 && server.requestsSeen == 2 }
            #expect(twoRun)
            // A hanging provider's code exchanges take two of the four reserved slots; its next
            // waits, with two reserved slots free.
            let hanging = [call("/hold?a-1", share: "provider:a"), call("/hold?a-2", share: "provider:a")]
            let fourRun = try await UploadTests.eventually { client.load.inFlight == 4 && server.requestsSeen == 4 }
            #expect(fourRun)
            let waiting = call("/hello?a-3", share: "provider:a", timeout: Self.shouldStart)
            let aWaits = try await UploadTests.eventually { client.load.waiting == 1 }
            #expect(aWaits)
            #expect(client.load.inFlight == 4)
            // Another provider's sign-in starts in one at once, from behind the waiting call, and
            // so does a call without a share.
            #expect(await call("/hello?b-1", share: "provider:b", timeout: Self.shouldStart).value == .status(200))
            #expect(await call("/hello?unshared", share: nil, timeout: Self.shouldStart).value == .status(200))
            #expect(!server.targetsSeen.contains("/hello?a-3"), "\(server.targetsSeen)")
            // Once a stalled call ends, the passthrough calls no longer hold every slot they may:
            // the provider's waiting call starts.
            stalled[0].cancel()
            #expect(await stalled[0].value == .failed(.cancelled))
            #expect(await waiting.value == .status(200))
            for task in [stalled[1]] + hanging { task.cancel() }
            for task in [stalled[1]] + hanging { #expect(await task.value == .failed(.cancelled)) }
            let allEnded = try await UploadTests.eventually { client.load.inFlight == 0 && client.load.waiting == 0 }
            #expect(allEnded)
        }
    }

    @Test(
        "the hold lasts while .normal calls in flight and waiting fill their slots: a stalled call that ends passes its slot to a waiting .normal call, not to the held share, whose next still waits while another share's starts"
    )
    func heldShareYieldsToWaitingNormalCalls() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient(
                configuration: .init(timeout: Self.held, maxTransfers: 6, maxWaitingTransfers: 4, maxHighTransfersPerShare: 3, reservedTransfers: 2))
            defer { client.shutdown() }
            // A held call that should start runs out of time in line instead of hanging the test.
            func call(_ path: String, _ priority: OutboundPriority = .high, share: String?) -> Task<Outcome, Never> {
                Self.call(client, server.url(path), timeout: Self.shouldStart, priority: priority, share: share)
            }
            // Stalled passthrough calls hold all four unreserved slots, and a fifth waits.
            let stalled = (1...4).map { Self.call(client, server.url("/hold?normal-\($0)"), priority: .normal, share: "provider:a") }
            let fourRun = try await UploadTests.eventually { client.load.inFlight == 4 && server.requestsSeen == 4 }
            #expect(fourRun)
            let fifth = Self.call(client, server.url("/hold?normal-5"), priority: .normal, share: "provider:a")
            let fifthWaits = try await UploadTests.eventually { client.load.waiting == 1 }
            #expect(fifthWaits)
            // The hanging provider runs one of the two reserved slots (half); its next waits.
            let hanging = Self.call(client, server.url("/hold?a-1"), priority: .high, share: "provider:a")
            let fiveRun = try await UploadTests.eventually { client.load.inFlight == 5 && server.requestsSeen == 5 }
            #expect(fiveRun)
            let held = call("/hello?a-2", share: "provider:a")
            let twoWait = try await UploadTests.eventually { client.load.waiting == 2 }
            #expect(twoWait)
            // A stalled call ends: its slot goes to the waiting passthrough call, which came after
            // the held one; the provider's next still waits.
            stalled[0].cancel()
            #expect(await stalled[0].value == .failed(.cancelled))
            let fifthRuns = try await UploadTests.eventually { server.targetsSeen.contains("/hold?normal-5") }
            #expect(fifthRuns)
            #expect(!server.targetsSeen.contains("/hello?a-2"), "\(server.targetsSeen)")
            #expect(client.load.waiting == 1)
            // Another provider's sign-in takes the other reserved slot at once.
            #expect(await call("/hello?b-1", share: "provider:b").value == .status(200))
            // The provider's running call ends: the held call takes the reserved slot it leaves,
            // with the passthrough calls still filling theirs.
            hanging.cancel()
            #expect(await hanging.value == .failed(.cancelled))
            #expect(await held.value == .status(200))
            #expect(client.load.inFlight == 4)
            for task in stalled.dropFirst() + [fifth] {
                task.cancel()
                #expect(await task.value == .failed(.cancelled))
            }
        }
    }

    @Test(
        "while .normal calls hold fewer slots than they may, one share's .high calls take every free slot up to its share limit: a busy provider is not held back by passthrough calls"
    )
    func sharesRunFreelyBelowSaturation() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient(
                configuration: .init(timeout: Self.held, maxTransfers: 6, maxWaitingTransfers: 4, maxHighTransfersPerShare: 5, reservedTransfers: 2))
            defer { client.shutdown() }
            let stalled = Self.call(client, server.url("/hold?normal-1"), priority: .normal, share: "provider:a")
            let busy = (1...4).map { Self.call(client, server.url("/hold?a-\($0)"), priority: .high, share: "provider:a") }
            let fiveRun = try await UploadTests.eventually { client.load.inFlight == 5 && server.requestsSeen == 5 }
            #expect(fiveRun)
            // The last slot goes to the same provider at once (held back, it would run out of
            // time in line).
            let last = Self.call(client, server.url("/hello?a-5"), timeout: Self.shouldStart, priority: .high, share: "provider:a")
            #expect(await last.value == .status(200))
            for task in [stalled] + busy { task.cancel() }
            for task in [stalled] + busy { #expect(await task.value == .failed(.cancelled)) }
        }
    }

    @Test(
        "with a share limit set, waiting .high calls of several shares start in the order they came, a call leaving from any line keeping the others' order; without one, a share's calls take every slot as before"
    )
    func sharesKeepTheArrivalOrder() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient(
                configuration: .init(timeout: Self.held, maxTransfers: 4, maxWaitingTransfers: 8, maxHighTransfersPerShare: 3))
            defer { client.shutdown() }
            func call(_ path: String) -> Task<Outcome, Never> {
                let name = path.dropFirst("/hello?".count).prefix { $0 != "-" }
                // Held where it should start, a call runs out of time in line instead of hanging the test.
                return Self.call(
                    client, server.url(path), timeout: Self.shouldStart, priority: .high, share: name == "none" ? nil : "provider:\(name)")
            }
            // Calls without a share hold every slot.
            let held = (1...4).map { Self.call(client, server.url("/hold?held-\($0)"), priority: .high) }
            let allRun = try await UploadTests.eventually { client.load.inFlight == 4 && server.requestsSeen == 4 }
            #expect(allRun)
            // Calls of three shares and without one wait, in this order.
            var waiting: [String: Task<Outcome, Never>] = [:]
            for path in ["/hello?b-1", "/hello?a-1", "/hello?none-1", "/hello?b-2", "/hello?c-1", "/hello?a-2"] {
                waiting[path] = call(path)
                let inLine = try await UploadTests.eventually { client.load.waiting == waiting.count }
                #expect(inLine)
            }
            // The only call without a share leaves (its line, not the last one, goes), and another
            // comes after the rest.
            waiting["/hello?none-1"]?.cancel()
            #expect(await waiting["/hello?none-1"]?.value == .failed(.cancelled))
            waiting["/hello?none-1"] = nil
            waiting["/hello?none-2"] = call("/hello?none-2")
            let sixWait = try await UploadTests.eventually { client.load.waiting == 6 }
            #expect(sixWait)
            // One slot frees: the waiting calls pass through it one at a time, each freed slot
            // starting the earliest.
            held[0].cancel()
            for task in waiting.values { #expect(await task.value == .status(200)) }
            let expected = ["/hello?b-1", "/hello?a-1", "/hello?b-2", "/hello?c-1", "/hello?a-2", "/hello?none-2"]
            let started = server.targetsSeen.filter { $0.hasPrefix("/hello") }
            #expect(started == expected)
            for task in held { task.cancel() }
            for task in held { #expect(await task.value == .failed(.cancelled)) }
        }
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient(configuration: .init(timeout: Self.held, maxTransfers: 4, maxWaitingTransfers: 4, reservedTransfers: 2))
            defer { client.shutdown() }
            let stalled = (1...2).map { Self.call(client, server.url("/hold?normal-\($0)"), priority: .normal, share: "provider:a") }
            let hanging = Self.call(client, server.url("/hold?a-1"), priority: .high, share: "provider:a")
            let threeRun = try await UploadTests.eventually { client.load.inFlight == 3 && server.requestsSeen == 3 }
            #expect(threeRun)
            // No share limit: the provider's second call takes the last reserved slot at once.
            let second = Self.call(client, server.url("/hello?a-2"), timeout: Self.shouldStart, priority: .high, share: "provider:a")
            #expect(await second.value == .status(200))
            for task in stalled + [hanging] { task.cancel() }
            for task in stalled + [hanging] { #expect(await task.value == .failed(.cancelled)) }
        }
    }

    @Test(
        "reserved slots take only .high calls: .normal ones wait with those slots free, a .high call starts in one at once; .high calls wait in a line of their own (refused beyond it, leaving when cancelled or out of time), which a freed slot serves before .normal calls that waited longer"
    )
    func reservedSlots() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient(configuration: .init(timeout: Self.held, maxTransfers: 3, maxWaitingTransfers: 2, reservedTransfers: 1))
            defer { client.shutdown() }
            func call(_ path: String, _ priority: OutboundPriority) -> Task<Outcome, Never> {
                Self.call(client, server.url(path), priority: priority)
            }
            // Two .normal calls take every slot but the reserved one; a third waits.
            let normalHeld = [call("/hold?normal-1", .normal), call("/hold?normal-2", .normal)]
            let twoRun = try await UploadTests.eventually { client.load.inFlight == 2 && server.requestsSeen == 2 }
            #expect(twoRun)
            let normalWaiting = call("/hello?normal-3", .normal)
            let oneWaits = try await UploadTests.eventually { client.load.waiting == 1 }
            #expect(oneWaits)
            #expect(server.requestsSeen == 2, "a .normal call took the reserved slot")
            // A .high call runs in the reserved slot at once.
            #expect(await call("/hello?high-1", .high).value == .status(200))
            #expect(client.load == OutboundLoad(inFlight: 2, waiting: 1, refused: 0))

            // With the reserved slot held too, .high calls wait in their own line: one whose
            // timeout runs out there is refused, a cancelled one leaves, and beyond the line's
            // length one is refused at once. The .normal line takes one more, and refuses the next.
            let highHeld = call("/hold?high-2", .high)
            let threeRun = try await UploadTests.eventually { client.load.inFlight == 3 && server.requestsSeen == 4 }
            #expect(threeRun)
            let expired = await Self.call(client, server.url("/hello?high-expired"), timeout: .milliseconds(300), priority: .high).value
            #expect(expired == .failed(.overloaded))
            let cancelled = call("/hello?high-cancelled", .high)
            let twoWait = try await UploadTests.eventually { client.load.waiting == 2 }
            #expect(twoWait)
            cancelled.cancel()
            #expect(await cancelled.value == .failed(.cancelled))
            let highWaiting = [call("/hold?high-3", .high), call("/hello?high-4", .high)]
            let normalLast = call("/hello?normal-4", .normal)
            let fourWait = try await UploadTests.eventually { client.load.waiting == 4 }
            #expect(fourWait)
            #expect(await call("/hello?high-refused", .high).value == .failed(.overloaded))
            #expect(await call("/hello?normal-refused", .normal).value == .failed(.overloaded))
            #expect(client.load.refused == 3)

            // A freed slot starts the first waiting .high call, not the .normal one that waited longer.
            normalHeld[0].cancel()
            #expect(await normalHeld[0].value == .failed(.cancelled))
            let highStarted = try await UploadTests.eventually { server.targetsSeen.contains("/hold?high-3") }
            #expect(highStarted)
            #expect(!server.targetsSeen.contains("/hello?normal-3"), "a .normal call started before a waiting .high one: \(server.targetsSeen)")
            // The next freed slot goes to the other .high call, then the .normal line, first come first started.
            normalHeld[1].cancel()
            #expect(await normalHeld[1].value == .failed(.cancelled))
            #expect(await highWaiting[1].value == .status(200))
            #expect(await normalWaiting.value == .status(200))
            #expect(await normalLast.value == .status(200))
            let order = server.targetsSeen.filter { $0.hasPrefix("/hello?high-4") || $0.hasPrefix("/hello?normal-") }
            #expect(order == ["/hello?high-4", "/hello?normal-3", "/hello?normal-4"])
            for held in [highHeld, highWaiting[0]] { held.cancel() }
            for held in [highHeld, highWaiting[0]] { #expect(await held.value == .failed(.cancelled)) }
            let allEnded = try await UploadTests.eventually { client.load.inFlight == 0 && client.load.waiting == 0 }
            #expect(allEnded)
            #expect(server.requestsSeen == 8)
        }
    }

    @Test("500 waiting calls cancelled at once all leave the line, which then serves the next caller first")
    func manyLeaveTheLine() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient(configuration: .init(timeout: Self.held, maxTransfers: 1, maxWaitingTransfers: 600))
            defer { client.shutdown() }
            let slow = Self.call(client, server.url("/hold"))
            let started = try await UploadTests.eventually { client.load.inFlight == 1 && server.requestsSeen == 1 }
            #expect(started)
            let leaving = (0..<500).map { _ in Self.call(client, server.url("/hello")) }
            let allWait = try await UploadTests.eventually { client.load.waiting == 500 }
            #expect(allWait)
            for call in leaving { call.cancel() }
            var outcomes: [Outcome] = []
            for call in leaving { outcomes.append(await call.value) }
            let allCancelled = outcomes.allSatisfy { $0 == .failed(.cancelled) }
            #expect(allCancelled)
            #expect(client.load.waiting == 0)
            let next = Self.call(client, server.url("/hello"))
            slow.cancel()
            #expect(await next.value == .status(200))
            #expect(server.requestsSeen == 2)
        }
    }

    @Test("shutting the client down fails the calls waiting for a slot as cancelled")
    func shutdownFailsWaitingCalls() async throws {
        try await LoopbackHTTPServer.with { server in
            let client = CurlHTTPClient(configuration: .init(timeout: Self.held, maxTransfers: 1, maxWaitingTransfers: 4))
            let slow = Self.call(client, server.url("/hold"))
            let slowStarted = try await UploadTests.eventually { client.load.inFlight == 1 && server.requestsSeen == 1 }
            #expect(slowStarted)
            let waiting = (0..<3).map { _ in Self.call(client, server.url("/hello")) }
            let threeWait = try await UploadTests.eventually { client.load.waiting == 3 }
            #expect(threeWait)
            await client.stop()
            for call in waiting {
                #expect(await call.value == .failed(.cancelled))
            }
            #expect(await slow.value == .failed(.cancelled))
            #expect(server.requestsSeen == 1)
        }
    }
}
