import Foundation

/// What an operator looks accounts up by (`GET /v1/admin/users?query=`): every account, or
/// those whose uid, provider identity (`github.com:583231` or the federated id alone), email or
/// display name matches — the last two contained, folded (`TextFolding`), wildcards taken literally.
public enum AccountSearch: Sendable, Equatable {
    /// Every account, by uid.
    case all
    /// The accounts matching the text.
    case text(String)

    /// The query as given (trimmed; empty is every account).
    public init(_ query: String?) {
        let trimmed = (query ?? "").trimmingCharacters(in: .whitespaces)
        self = trimmed.isEmpty ? .all : .text(trimmed)
    }

    /// `text`, folded (`TextFolding`), with the `LIKE` wildcards `%` and `_` (and the escape `\`)
    /// escaped, inside `%…%`: a search for `50%_off` finds that text, not everything.
    static func containsPattern(_ text: String) -> String {
        // Per scalar: `_` followed by a combining mark is one Character but still a wildcard.
        var escaped = String.UnicodeScalarView()
        for scalar in TextFolding.folded(text).unicodeScalars {
            if scalar == "%" || scalar == "_" || scalar == "\\" { escaped.append("\\") }
            escaped.append(scalar)
        }
        return "%\(String(escaped))%"
    }

    /// The pattern of a text search (see `containsPattern`).
    public var pattern: String {
        switch self {
        case .all: ""
        case .text(let text): Self.containsPattern(text)
        }
    }
}
