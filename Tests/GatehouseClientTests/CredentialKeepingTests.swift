import CurlClient
import Foundation
import GatehouseClient
import GatehouseTestSupport
import Synchronization
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// How an app keeps the client's credentials: told of every change, a refresh whose answer was
/// lost recovered inside the gateway's retry window, and no secret in a printed value.
@Suite("GatehouseClient's credentials")
struct CredentialKeepingTests {
    /// A client of `demo` signed in with GitHub through the app's scheme.
    static func signedIn(_ client: GatehouseClient) async throws {
        let request = try client.signInRequest(
            providerId: "github.com", returnTo: GatehouseClientTests.appScheme, customParameters: ["login": "octocat"])
        try await client.completeSignIn(callback: try await GatehouseClientTests.authenticationSession(request), for: request)
    }

    @Test("every change of the credentials reaches onCredentialsChange: the sign-in, each refresh, the sign-out")
    func changesAreTold() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: GatehouseClientTests.executable), "build the gatehouse product first")
        try await DemoProcess.with(executable: GatehouseClientTests.executable) { demo in
            let told = Mutex<[Credentials?]>([])
            let client = GatehouseClient(baseURL: try #require(URL(string: demo.url))) { credentials in told.withLock { $0.append(credentials) } }
            try await Self.signedIn(client)
            let first = try #require(await client.credentials)
            // A link's start URL acts for the account: printed, it shows no start token.
            let link = try await client.linkRequest(providerId: "oidc.emulator", returnTo: GatehouseClientTests.appScheme)
            #expect(link.url.absoluteString.contains("start_token=") && !String(describing: link).contains("start_token="), "\(link)")
            let second = try await client.refresh()
            try await client.signOut()
            let changes = told.withLock { $0 }
            #expect(changes == [first, second, nil])
        }
    }

    @Test("a refresh whose answer is lost after the gateway rotated the token is sent again and gets the same successor: the session lives on")
    func lostRefreshAnswerIsRecovered() async throws {
        try #require(FileManager.default.isExecutableFile(atPath: GatehouseClientTests.executable), "build the gatehouse product first")
        // The longest retry window, on both sides: the lost refresh is sent again however long
        // a loaded machine took to answer it (with the default 10 s, a refresh answered after
        // 8 s is not sent again, by design).
        try await DemoProcess.with(
            executable: GatehouseClientTests.executable,
            environment: ProcessInfo.processInfo.environment.merging(["GATEHOUSE_REFRESH_RETRY_WINDOW": "60"]) { $1 }
        ) { demo in
            let configuration = URLSessionConfiguration.ephemeral
            configuration.protocolClasses = [LosingTokenAnswers.self]
            let session = URLSession(configuration: configuration)
            let client = GatehouseClient(baseURL: try #require(URL(string: demo.url)), session: session, refreshRetryWindow: .seconds(60))
            try await Self.signedIn(client)
            let first = try #require(await client.credentials)
            LosingTokenAnswers.losing.withLock { $0 = 1 }
            let renewed = try await client.refresh()
            let lost = LosingTokenAnswers.lost.withLock { $0 }
            #expect(lost == 1, "the first answer was lost on the way")
            #expect(renewed.refreshToken != first.refreshToken)
            // The successor is the session's live token: it refreshes, and the profile reads.
            #expect(try await client.refresh().refreshToken != renewed.refreshToken)
            #expect(try await client.me().providers.map(\.providerId) == ["github.com"])
        }
    }

    @Test("a printed credential, sign-in request or problem shows no token, verifier or pending credential")
    func printedValuesHoldNoSecret() throws {
        let credentials = Credentials(idToken: "eyJ.secret-id-token.sig", refreshToken: "ghr_secret-refresh", expiresAt: Date())
        for text in [String(describing: credentials), String(reflecting: credentials), "\(credentials)"] {
            #expect(!text.contains("secret"), "\(text)")
        }
        let client = GatehouseClient(baseURL: try #require(URL(string: "https://gatehouse.example")))
        let request = try client.signInRequest(providerId: "github.com", returnTo: GatehouseClientTests.appScheme)
        for text in [String(describing: request), String(reflecting: request)] {
            #expect(!text.contains(request.verifier) && !text.contains("result_challenge=") && text.contains("/v1/auth/github.com/start"), "\(text)")
        }
        let problem = GatehouseClientError.problem(
            Problem(
                code: .credentialAlreadyInUse, status: 409, title: "Credential already in use", detail: "Linked to another account.",
                retryAfter: nil, extensions: ["pendingToken": "pending-secret", "providerId": "github.com"]))
        for text in [String(describing: problem), String(reflecting: problem)] {
            #expect(!text.contains("pending-secret") && text.contains("github.com"), "\(text)")
        }
    }
}

/// Passes every request to the gateway (through libcurl: a URLSession called from inside a
/// URL loading protocol deadlocks FoundationNetworking), and loses the answers of the next
/// `losing` token requests after the gateway made them, as a connection broken on the way
/// back does.
final class LosingTokenAnswers: URLProtocol {
    /// How many of the next `/v1/token` answers to lose.
    static let losing = Mutex(0)
    /// How many were lost.
    static let lost = Mutex(0)
    /// The client that passes the requests on.
    static let http = CurlHTTPClient()

    override class func canInit(with request: URLRequest) -> Bool { true }
    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        let request = self.request
        let lose =
            request.url?.path.hasSuffix("/v1/token") == true
            && Self.losing.withLock { count in
                guard count > 0 else { return false }
                count -= 1
                return true
            }
        var headers = OutboundHeaders()
        for (name, value) in request.allHTTPHeaderFields ?? [:] { headers.add(name, value) }
        let outbound = OutboundRequest(
            method: request.httpMethod ?? "GET", url: request.url?.absoluteString ?? "", headers: headers, body: Array(request.httpBody ?? Data()))
        // The loading system is told from this task only, one call after another.
        nonisolated(unsafe) let this = self
        Task {
            let loader = this.client
            do {
                let answer = try await Self.http.execute(outbound)
                if lose {
                    Self.lost.withLock { $0 += 1 }
                    loader?.urlProtocol(this, didFailWithError: URLError(.networkConnectionLost))
                    return
                }
                var fields: [String: String] = [:]
                for (name, value) in answer.headers { fields[name] = value }
                if let url = request.url,
                    let response = HTTPURLResponse(url: url, statusCode: answer.status, httpVersion: "HTTP/1.1", headerFields: fields)
                {
                    loader?.urlProtocol(this, didReceive: response, cacheStoragePolicy: .notAllowed)
                }
                loader?.urlProtocol(this, didLoad: Data(answer.body))
                loader?.urlProtocolDidFinishLoading(this)
            } catch {
                loader?.urlProtocol(this, didFailWithError: URLError(.cannotConnectToHost))
            }
        }
    }

    override func stopLoading() {}
}
