import Foundation
import HTTPTypes
import Hummingbird

/// `GET /user/repos` paged as GitHub pages (`per_page`, `page`, an RFC 8288 `Link` header) and
/// `POST /user/repos` behind the `repo` / `public_repo` scope, for the gateway's passthrough.
struct GitHubRepoRoutes {
    /// The API routes' token check and headers.
    let api: GitHubAPIRoutes

    /// Repositories per seeded user: several pages at GitHub's default of 30 or at 10.
    static let repositoryCount = 45

    /// Adds `GET` and `POST /github-api/user/repos`.
    func register(on router: Router<BasicRequestContext>) {
        router.get("/github-api/user/repos") { request, _ in
            await api.authenticated(request, acceptedScopes: "") { user, token, headers in
                let query = request.formQuery
                guard let perPage = Int(query["per_page"] ?? "30"), (1...100).contains(perPage), let page = Int(query["page"] ?? "1"), page >= 1
                else {
                    return Response.json(["message": "Invalid per_page or page", "status": "422"], status: .unprocessableContent, headers: headers)
                }
                // Without `repo` the token sees public repositories only (GitHub's rule).
                let privateToo = token.scopes.contains("repo")
                let all = (1...Self.repositoryCount).filter { privateToo || !GitHubRepository.isPrivate($0) }
                // A page far past the end (up to `Int.max`) is an empty one, as GitHub answers it.
                let (skipped, overflow) = (page - 1).multipliedReportingOverflow(by: perPage)
                let slice = all.dropFirst(overflow ? all.count : skipped).prefix(perPage)
                var headers = headers
                let last = max(1, (all.count + perPage - 1) / perPage)
                if let link = Self.linkHeader(host: GitHubAPIRoutes.host(of: request), perPage: perPage, page: page, last: last) {
                    headers[HTTPField.Name("Link")!] = link
                }
                let host = GitHubAPIRoutes.host(of: request)
                return Response.json(slice.map { GitHubRepository.json(user, $0, host: host) }, headers: headers)
            }
        }
        router.post("/github-api/user/repos") { request, _ in
            var request = request
            let body = (try? await request.collectBody(upTo: 64 << 10)).map { Data(buffer: $0) } ?? Data()
            return await api.authenticated(request, acceptedScopes: "public_repo, repo") { user, token, headers in
                guard token.scopes.contains("repo") || token.scopes.contains("public_repo") else {
                    return Response.json(
                        [
                            "message": "Not Found",
                            "documentation_url": "https://docs.github.com/rest/repos/repos#create-a-repository-for-the-authenticated-user",
                            "status": "404",
                        ],
                        status: .forbidden, headers: headers)
                }
                guard let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any], let name = object["name"] as? String,
                    !name.isEmpty
                else {
                    return Response.json(
                        ["message": "Repository creation failed.", "status": "422"], status: .unprocessableContent, headers: headers)
                }
                let created = GitHubRepository.json(
                    user, 0, host: GitHubAPIRoutes.host(of: request), name: name, isPrivate: object["private"] as? Bool ?? false)
                return Response.json(created, status: .created, headers: headers)
            }
        }
    }

    /// `<…?per_page=10&page=2>; rel="next", <…>; rel="last"` (and `prev`, `first` past page 1).
    static func linkHeader(host: String, perPage: Int, page: Int, last: Int) -> String? {
        func url(_ page: Int) -> String { "<http://\(host)/github-api/user/repos?per_page=\(perPage)&page=\(page)>" }
        var links: [String] = []
        if page > 1 { links += ["\(url(page - 1)); rel=\"prev\"", "\(url(1)); rel=\"first\""] }
        if page < last { links += ["\(url(page + 1)); rel=\"next\"", "\(url(last)); rel=\"last\""] }
        return links.isEmpty ? nil : links.joined(separator: ", ")
    }
}
