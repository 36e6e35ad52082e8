import Crypto
import CurlClient
import Foundation
import GatehouseCore
import HTTPTypes
import Hummingbird
import HummingbirdTesting

/// A complete browser sign-in as octocat, as a web page drives it: start → the emulator's
/// authorize endpoint (through libcurl, auto-approved by GitHub's `login` hint) → callback →
/// `POST /v1/auth/result` with the flow's verifier.
enum SignIn {
    /// What a completed sign-in gave.
    struct Outcome {
        /// The account's id.
        var uid: String
        /// The `Cookie` header value carrying the new session.
        var sessionCookie: String
    }

    /// Runs the whole flow through `client`; `http` follows the gateway's redirect to the emulator.
    static func run(client: some TestClientProtocol, http: CurlHTTPClient) async throws -> Outcome {
        let verifier = Base64URL.encode(Data((0..<32).map { _ in UInt8.random(in: 0...255) }))
        let challenge = Base64URL.encode(Data(SHA256.hash(data: Data(verifier.utf8))))
        let start = try await client.execute(
            uri: "/v1/auth/github.com/start?return_to=\(FormEncoding.escape(Fixture.returnTo))&login=octocat&result_challenge=\(challenge)",
            method: .get)
        try require(start, .found, "start")
        guard let authorize = start.headers[.location] else { throw BenchmarkFailure("start gave no location") }
        let binding = cookies(start)
        let approved = try await http.execute(OutboundRequest(url: authorize))
        guard approved.status == 302, let callback = approved.headers["location"], callback.hasPrefix(Fixture.publicURL) else {
            throw BenchmarkFailure("the emulator's authorize answered \(approved.status)")
        }
        let returned = try await client.execute(
            uri: String(callback.dropFirst(Fixture.publicURL.count)), method: .get, headers: [.cookie: binding])
        try require(returned, .seeOther, "callback")
        guard let location = returned.headers[.location], let marker = location.range(of: "#gatehouse_result=") else {
            throw BenchmarkFailure("the callback gave no result")
        }
        let result = try await client.execute(
            uri: "/v1/auth/result", method: .post,
            headers: [.contentType: "application/json", .origin: "https://app.example.com"],
            body: ByteBuffer(string: #"{"result":"\#(location[marker.upperBound...])","result_verifier":"\#(verifier)"}"#))
        try require(result, .ok, "result")
        let answer = try JSONSerialization.jsonObject(with: Data(buffer: result.body)) as? [String: Any]
        guard let uid = (answer?["user"] as? [String: Any])?["uid"] as? String else { throw BenchmarkFailure("the result has no user") }
        return Outcome(uid: uid, sessionCookie: cookies(returned))
    }

    /// The `name=value` pairs an answer set, as one `Cookie` header value.
    static func cookies(_ response: TestResponse) -> String {
        response.headers[values: .setCookie].compactMap { $0.split(separator: ";").first.map(String.init) }.joined(separator: "; ")
    }
}
