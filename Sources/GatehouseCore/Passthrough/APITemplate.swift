/// The methods a passthrough call may use.
public enum APIMethod: String, Sendable, Codable, CaseIterable {
    /// `GET`
    case get = "GET"
    /// `POST`
    case post = "POST"
    /// `PUT`
    case put = "PUT"
    /// `PATCH`
    case patch = "PATCH"
    /// `DELETE`
    case delete = "DELETE"

    /// Whether the call may carry a body.
    public var hasBody: Bool { self != .get && self != .delete }
}

/// One allowed call of a provider's API: a method and a path template
/// (`GET /v1.0/me/messages/{id}`), the query parameters it takes, and the scopes it needs (named
/// in `insufficient-provider-scope` when the provider refuses the call for lack of them).
public struct APITemplate: Sendable, Equatable, CustomStringConvertible {
    /// Which query parameters a call may name.
    ///
    /// Names are compared as a provider reads them: percent-decoded, without case, and without
    /// a leading `$` (Graph takes OData's system options with or without it).
    public enum QueryRule: Sendable, Equatable {
        /// Any parameter but an expansion (`$expand`, `expand`), which reads resources other
        /// than the path's own (a message's attachments, an event's series): the default.
        case anyButExpansions
        /// Any parameter at all (`"query": ["*"]`).
        case any
        /// Only these names, as `APITemplate.parameterName(_:)` reads them (`"query": ["$select", "$top"]`).
        case only(Set<String>)

        /// The names an expansion goes by, normalized.
        static let expansions: Set<String> = ["expand"]
    }

    /// One segment of the template.
    public enum Segment: Sendable, Equatable {
        /// Matches exactly this decoded segment.
        case literal(String)
        /// `{name}`: matches any one segment.
        case parameter(String)
    }

    /// The method.
    public let method: APIMethod
    /// The segments, after the leading `/`.
    public let segments: [Segment]
    /// The provider scopes the call needs (any of them), as the provider names them.
    public let scopes: [String]
    /// The query parameters the call may name.
    public let query: QueryRule
    /// `GET /v1.0/me/messages/{id}`: the template as configured (the audit's and the metrics'
    /// label of every call it allows, so it is built once).
    public let description: String

    /// Parses `"GET /v1.0/me/events"`; throws `invalid-argument` naming the problem.
    public init(_ text: String, scopes: [String] = [], query: QueryRule = .anyButExpansions) throws {
        let parts = text.split(separator: " ", omittingEmptySubsequences: true)
        guard parts.count == 2, let method = APIMethod(rawValue: String(parts[0])), parts[1].hasPrefix("/"), parts[1].count > 1 else {
            throw GatehouseError.invalidArgument(
                "An API template is \"METHOD /path/{param}\" with METHOD one of \(APIMethod.allCases.map(\.rawValue).joined(separator: ", ")): \(text.debugDescription)."
            )
        }
        var segments: [Segment] = []
        for raw in parts[1].dropFirst().split(separator: "/", omittingEmptySubsequences: false) {
            if raw.hasPrefix("{"), raw.hasSuffix("}"), raw.count > 2 {
                segments.append(.parameter(String(raw.dropFirst().dropLast())))
            } else if raw.isEmpty || raw == "." || raw == ".." || raw.contains("{") || raw.contains("}") || raw.contains("%") {
                throw GatehouseError.invalidArgument("The API template \(text.debugDescription) has an empty, dot or malformed segment.")
            } else {
                segments.append(.literal(String(raw)))
            }
        }
        self.method = method
        self.segments = segments
        self.scopes = scopes
        self.query = query
        description =
            method.rawValue + " /"
            + segments.map {
                switch $0 {
                case .literal(let text): text
                case .parameter(let name): "{\(name)}"
                }
            }.joined(separator: "/")
    }

    /// Whether `method` and `path` are this template's.
    public func matches(_ method: APIMethod, _ path: APIPath) -> Bool {
        guard method == self.method, path.segments.count == segments.count else { return false }
        return zip(segments, path.segments).allSatisfy { template, segment in
            switch template {
            // Bytes, not `==`: Swift's string equality is canonical equivalence (U+037E is `;`,
            // `e` and U+0301 are `é`), while the provider routes the bytes it is sent.
            case .literal(let text): text.utf8.elementsEqual(segment.utf8)
            // One value: a `;` (sent upstream as it is) would add matrix parameters the template
            // does not list, such as Yahoo's `;out=` expansions of a resource.
            case .parameter: !segment.utf8.contains(UInt8(ascii: ";"))
            }
        }
    }

    /// The first parameter of `query` (a raw query string, without `?`) that this template does
    /// not take, as it was written; `nil` when it takes them all.
    ///
    /// Parameters are split at `&` and at `;` (which some servers still read as a separator), so
    /// a name hidden behind a `;` is still read, and compared as `parameterName` reads them; a
    /// name it reads as none is never taken: no provider defines one, and a server that trims,
    /// folds or decodes it again could read it as another.
    public func refusedParameter(in query: Substring?) -> Substring? {
        guard let query, !query.isEmpty, self.query != .any else { return nil }
        for parameter in query.split(whereSeparator: { $0 == "&" || $0 == ";" }) {
            let rawName = parameter.prefix { $0 != "=" }
            if rawName.isEmpty { continue }
            guard let name = Self.parameterName(rawName) else { return rawName }
            switch self.query {
            case .any: continue
            case .anyButExpansions: if QueryRule.expansions.contains(name) { return rawName }
            case .only(let names): if !names.contains(name) { return rawName }
            }
        }
        return nil
    }

    /// A parameter name as the rules compare it: percent-decoded, lower case, without one leading
    /// `$`, and up to its first `[` (Rack, PHP and Node's `qs` read `expand[]` and `expand[0]` as
    /// `expand`). `nil` when nothing is left, or when, once decoded, it is not printable ASCII or
    /// holds a `+` (a space to servers), a `%`, `&`, `;` or `=` (a server or proxy decoding twice
    /// would read another name, or another parameter, in it).
    public static func parameterName(_ raw: Substring) -> String? {
        guard let decoded = FormEncoding.percentDecoded(raw), !decoded.isEmpty,
            decoded.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F && !Self.refusedInName.contains($0) })
        else { return nil }
        var name = decoded.lowercased().prefix { $0 != "[" }
        if name.hasPrefix("$") { name = name.dropFirst() }
        return name.isEmpty ? nil : String(name)
    }

    /// Bytes no parameter name of a provider holds once decoded: `+`, `%`, `&`, `;` and `=`.
    private static let refusedInName: Set<UInt8> = Set("+%&;=".utf8)
}
