import Foundation

/// Which provider API calls the passthrough routes may make: closed by default (an empty
/// policy allows nothing), opened per provider by an allow-list of templates.
public struct APIPolicy: Sendable, Equatable {
    /// One provider's part of the policy.
    public struct Provider: Sendable, Equatable {
        /// The API base the calls go to (`https://graph.microsoft.com`); `nil` for the provider's
        /// own (GitHub's API base, Graph, Yahoo's Fantasy Sports API). Never taken from a request.
        public var baseURL: String?
        /// The allowed calls.
        public var allow: [APITemplate]
        /// Whether signed-in users may call `/v1/me/providers/{id}/api/…` themselves (services
        /// always may, with the `api:<provider>` scope).
        public var signedInUsers: Bool
        /// The largest request body passed on.
        public var maxRequestBytes: Int
        /// The largest answer passed back.
        public var maxResponseBytes: Int
        /// The total time of one call (a large upload may need more than the provider's sign-in
        /// calls); `nil` for the provider's upstream timeout.
        public var timeout: Duration?

        /// A provider policy; limits default to 1 MiB in, 8 MiB out.
        public init(
            baseURL: String? = nil, allow: [APITemplate], signedInUsers: Bool = false, maxRequestBytes: Int = 1 << 20,
            maxResponseBytes: Int = 8 << 20, timeout: Duration? = nil
        ) {
            self.timeout = timeout
            self.baseURL = baseURL
            self.allow = allow
            self.signedInUsers = signedInUsers
            self.maxRequestBytes = maxRequestBytes
            self.maxResponseBytes = maxResponseBytes
        }

        /// The first template allowing the call with `query` (a raw query string without `?`),
        /// if any; with `query` left out, the first allowing the path.
        public func template(for method: APIMethod, _ path: APIPath, query: Substring? = nil) -> APITemplate? {
            allow.first { $0.matches(method, path) && $0.refusedParameter(in: query) == nil }
        }
    }

    /// The providers whose APIs may be called, by provider id.
    public var providers: [String: Provider]

    /// A policy; `[:]` allows nothing.
    public init(providers: [String: Provider] = [:]) {
        self.providers = providers
    }

    /// A `GET` template that lists its query names with a page size but not the name its
    /// provider's paging links continue with: no caller could send such a link's query, so
    /// every one is dropped from the answers (`PagingLinks`).
    public struct PagingGap: Sendable, Equatable {
        /// The provider whose policy holds the template.
        public var providerId: String
        /// The template, as written (`GET /v1.0/me/messages`).
        public var route: String
        /// The name to add to its `query` (`$skiptoken`, `page`).
        public var missing: String
    }

    /// The page-size names of the providers' paging and the names their links continue with:
    /// OData's `$top` with `$skiptoken` (or `$skip`, which some Graph lists page with), GitHub's
    /// `per_page` with `page`. As `APITemplate.parameterName` reads them.
    private static let pagingContinuations: [(size: String, continuations: [String], suggested: String)] = [
        ("top", ["skiptoken", "skip"], "$skiptoken"), ("per_page", ["page"], "page"),
    ]

    /// Every template whose paging links are dropped (`PagingGap`), in provider and list order.
    public var pagingGaps: [PagingGap] {
        providers.sorted { $0.key < $1.key }.flatMap { providerId, provider in
            provider.allow.flatMap { template -> [PagingGap] in
                guard template.method == .get, case .only(let names) = template.query else { return [] }
                return Self.pagingContinuations.compactMap { size, continuations, suggested in
                    guard names.contains(size), !continuations.contains(where: names.contains) else { return nil }
                    return PagingGap(providerId: providerId, route: template.description, missing: suggested)
                }
            }
        }
    }

    /// A template allowing a provider endpoint that makes other calls on the caller's behalf:
    /// Graph's JSON batching (`POST /v1.0/$batch`, `POST /beta/$batch`) and GitHub's GraphQL API
    /// (`POST /graphql`). The calls inside their bodies reach whatever the grant reaches, and the
    /// policy checks only the template that carried them.
    public struct Dispatcher: Sendable, Equatable {
        /// The provider whose policy holds the template.
        public var providerId: String
        /// The template, as written (`POST /v1.0/{endpoint}`).
        public var route: String
        /// The provider endpoint it allows (`POST /v1.0/$batch`).
        public var endpoint: String
    }

    /// The provider endpoints that carry other calls in their bodies, by provider id.
    private static let dispatchingEndpoints: [String: [String]] = [
        "microsoft.com": ["/v1.0/$batch", "/beta/$batch"], "github.com": ["/graphql"],
    ]

    /// Every template that allows a dispatching endpoint (`Dispatcher`): with a parameter where
    /// the endpoint has a segment, or its literal in any case (providers that route paths
    /// without regard to case would take it), in provider and list order.
    public var dispatchers: [Dispatcher] {
        providers.sorted { $0.key < $1.key }.flatMap { providerId, provider in
            provider.allow.flatMap { template -> [Dispatcher] in
                (Self.dispatchingEndpoints[providerId] ?? []).compactMap { endpoint in
                    let segments = endpoint.split(separator: "/")
                    guard template.method == .post, template.segments.count == segments.count,
                        zip(template.segments, segments).allSatisfy({ segment, endpointSegment in
                            guard case .literal(let text) = segment else { return true }
                            return text.lowercased() == endpointSegment.lowercased()
                        })
                    else { return nil }
                    return Dispatcher(providerId: providerId, route: template.description, endpoint: "POST \(endpoint)")
                }
            }
        }
    }

    /// Nothing allowed (the default of `serve`).
    public static let closed = APIPolicy()

    /// Parses the JSON form (`GATEHOUSE_API_POLICY`):
    /// `{"github.com": {"allow": ["GET /user/repos", {"route": "GET /user/emails", "scopes": ["user:email"]}],
    /// "signedInUsers": true, "baseURL": "…", "maxRequestBytes": 1048576, "maxResponseBytes": 8388608, "timeoutSeconds": 30}}`.
    /// Unknown members are refused by name, so a typo never silently opens or closes anything.
    public init(json: Data) throws {
        guard let root = try? JSONSerialization.jsonObject(with: json) as? [String: Any] else {
            throw GatehouseError.invalidArgument("The API policy must be a JSON object keyed by provider id.")
        }
        var providers: [String: Provider] = [:]
        for (providerId, value) in root {
            guard let object = value as? [String: Any] else {
                throw GatehouseError.invalidArgument("The API policy of \(providerId) must be an object.")
            }
            let known: Set = ["allow", "signedInUsers", "baseURL", "maxRequestBytes", "maxResponseBytes", "timeoutSeconds"]
            if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
                throw GatehouseError.invalidArgument(
                    "The API policy of \(providerId) has an unknown member \(unknown.debugDescription) (known: \(known.sorted().joined(separator: ", ")))."
                )
            }
            guard let entries = object["allow"] as? [Any] else {
                throw GatehouseError.invalidArgument("The API policy of \(providerId) needs an \"allow\" list.")
            }
            let allow = try entries.map { entry -> APITemplate in
                if let text = entry as? String { return try APITemplate(text) }
                if let entry = entry as? [String: Any], let route = entry["route"] as? String,
                    Set(entry.keys).isSubset(of: ["route", "scopes", "query"])
                {
                    return try APITemplate(
                        route, scopes: entry["scopes"] as? [String] ?? [], query: try Self.queryRule(entry["query"], of: route, providerId))
                }
                throw GatehouseError.invalidArgument(
                    "An allow entry of \(providerId) is \"METHOD /path\" or {\"route\": \"METHOD /path\", \"scopes\": [...], \"query\": [...]}.")
            }
            func limit(_ name: String, _ fallback: Int) throws -> Int {
                guard let value = object[name] else { return fallback }
                guard let number = value as? Int, number > 0, number <= 1 << 30 else {
                    throw GatehouseError.invalidArgument("\(name) of \(providerId) must be a byte count between 1 and 1073741824.")
                }
                return number
            }
            guard object["signedInUsers"] == nil || object["signedInUsers"] is Bool else {
                throw GatehouseError.invalidArgument("signedInUsers of \(providerId) must be true or false.")
            }
            guard object["baseURL"] == nil || object["baseURL"] is String else {
                throw GatehouseError.invalidArgument("baseURL of \(providerId) must be a URL.")
            }
            var timeout: Duration?
            if let value = object["timeoutSeconds"] {
                guard let seconds = (value as? NSNumber)?.doubleValue, !(value is Bool), seconds > 0, seconds <= 600 else {
                    throw GatehouseError.invalidArgument("timeoutSeconds of \(providerId) must be a number of seconds between 0 and 600.")
                }
                timeout = .milliseconds(Int(seconds * 1000))
            }
            providers[providerId] = Provider(
                baseURL: object["baseURL"] as? String, allow: allow, signedInUsers: object["signedInUsers"] as? Bool ?? false,
                maxRequestBytes: try limit("maxRequestBytes", 1 << 20), maxResponseBytes: try limit("maxResponseBytes", 8 << 20), timeout: timeout)
        }
        self.providers = providers
    }

    /// An allow entry's `query`: absent for the default (any parameter but an expansion), a list
    /// of parameter names (`["$select", "$top"]`), or `["*"]` for any parameter at all.
    private static func queryRule(_ value: Any?, of route: String, _ providerId: String) throws -> APITemplate.QueryRule {
        guard let value else { return .anyButExpansions }
        let problem = GatehouseError.invalidArgument(
            "The query of \(providerId)'s \(route.debugDescription) must be a list of query parameter names (printable ASCII, no \"%\", \"&\", \";\", \"=\", \"+\" or \"[\"), or [\"*\"] for any parameter."
        )
        guard let names = value as? [String] else { throw problem }
        if names.contains("*") {
            guard names.count == 1 else { throw problem }
            return .any
        }
        return .only(
            Set(
                try names.map { name in
                    // A listed name is compared whole: `page[size]` would stand for every `page[…]`.
                    guard let decoded = FormEncoding.percentDecoded(Substring(name)), !decoded.contains("["),
                        let normalized = APITemplate.parameterName(Substring(name))
                    else { throw problem }
                    return normalized
                }))
    }
}

extension APIPolicy {
    /// The sample policy of `gatehouse demo` (and the tests): the provider emulator's API
    /// endpoints, for services and for signed-in users. Yahoo's Fantasy Sports API is the
    /// emulator's at `yahooBaseURL`.
    public static func sample(yahooBaseURL: String) -> APIPolicy {
        func template(_ text: String, _ scopes: [String] = []) -> APITemplate {
            // The literals below are well-formed: parsing them cannot fail.
            try! APITemplate(text, scopes: scopes)
        }
        return APIPolicy(providers: [
            "github.com": Provider(
                allow: [template("GET /user/repos"), template("POST /user/repos", ["public_repo", "repo"])], signedInUsers: true),
            "microsoft.com": Provider(
                allow: [
                    template("GET /v1.0/me/events", ["Calendars.Read"]), template("GET /v1.0/me/messages", ["Mail.Read"]),
                    template("GET /v1.0/me/messages/{id}", ["Mail.Read"]),
                    template("PUT /v1.0/me/drive/items/{id}/content", ["Files.ReadWrite"]),
                ], signedInUsers: true),
            "yahoo.com": Provider(
                baseURL: yahooBaseURL, allow: [template("GET /fantasy/v2/users;use_login=1/games", ["fspt-r"])], signedInUsers: true),
        ])
    }
}
