import Foundation

/// A seeded repository as `GET /user/repos` answers it: GitHub's `repository` object with
/// every member its description requires (`components/schemas/repository` of
/// `github/rest-api-description`), the owner as a full `simple-user`, and the members GitHub
/// adds for the authenticated user (`permissions`, `visibility`, `topics`).
enum GitHubRepository {
    /// Every third seeded repository is private.
    static func isPrivate(_ index: Int) -> Bool { index % 3 == 0 }

    /// Repository `index` of `user` (`repo-<index>`); `host` is the emulator's, for the
    /// owner's avatar.
    static func json(_ user: GitHubSeedUser, _ index: Int, host: String, name: String? = nil, isPrivate: Bool? = nil) -> [String: Any] {
        let name = name ?? "repo-\(index)"
        let id = user.id * 1000 + index
        let isPrivate = isPrivate ?? Self.isPrivate(index)
        let full = "\(user.login)/\(name)"
        let api = "https://api.github.com/repos/\(full)"
        // Fixed times, so that an unchanged repository answers the same body (and ETag).
        let created = "2011-01-26T19:01:12Z"
        let pushed = "2026-11-0\(index % 9 + 1)T10:00:00Z"
        var repository: [String: Any] = [
            "id": id, "node_id": Data("010:Repository\(id)".utf8).base64EncodedString(), "name": name, "full_name": full,
            "owner": simpleUser(user, host: host), "private": isPrivate, "html_url": "https://github.com/\(full)",
            "description": index % 2 == 0 ? "Seeded repository \(index) of \(user.login)" : NSNullValue.null, "fork": index % 5 == 0,
            "url": api, "archive_url": "\(api)/{archive_format}{/ref}", "assignees_url": "\(api)/assignees{/user}",
            "blobs_url": "\(api)/git/blobs{/sha}", "branches_url": "\(api)/branches{/branch}",
            "collaborators_url": "\(api)/collaborators{/collaborator}", "comments_url": "\(api)/comments{/number}",
            "commits_url": "\(api)/commits{/sha}", "compare_url": "\(api)/compare/{base}...{head}", "contents_url": "\(api)/contents/{+path}",
            "contributors_url": "\(api)/contributors", "deployments_url": "\(api)/deployments", "downloads_url": "\(api)/downloads",
            "events_url": "\(api)/events", "forks_url": "\(api)/forks", "git_commits_url": "\(api)/git/commits{/sha}",
            "git_refs_url": "\(api)/git/refs{/sha}", "git_tags_url": "\(api)/git/tags{/sha}", "git_url": "git://github.com/\(full).git",
            "issue_comment_url": "\(api)/issues/comments{/number}", "issue_events_url": "\(api)/issues/events{/number}",
            "issues_url": "\(api)/issues{/number}", "keys_url": "\(api)/keys{/key_id}", "labels_url": "\(api)/labels{/name}",
            "languages_url": "\(api)/languages", "merges_url": "\(api)/merges", "milestones_url": "\(api)/milestones{/number}",
            "notifications_url": "\(api)/notifications{?since,all,participating}", "pulls_url": "\(api)/pulls{/number}",
            "releases_url": "\(api)/releases{/id}", "ssh_url": "git@github.com:\(full).git", "stargazers_url": "\(api)/stargazers",
            "statuses_url": "\(api)/statuses/{sha}", "subscribers_url": "\(api)/subscribers", "subscription_url": "\(api)/subscription",
            "tags_url": "\(api)/tags", "teams_url": "\(api)/teams", "trees_url": "\(api)/git/trees{/sha}",
            "clone_url": "https://github.com/\(full).git", "mirror_url": NSNullValue.null, "hooks_url": "\(api)/hooks",
            "svn_url": "https://github.com/\(full)", "homepage": NSNullValue.null, "language": index % 2 == 0 ? "Swift" : NSNullValue.null,
            "forks_count": index % 4, "forks": index % 4, "stargazers_count": index * 3, "watchers_count": index * 3, "watchers": index * 3,
            "size": 100 + index, "default_branch": "main", "open_issues_count": index % 6, "open_issues": index % 6,
            "is_template": false, "topics": index % 2 == 0 ? ["gatehouse", "seeded"] : [],
            "has_issues": true, "has_projects": true, "has_wiki": true, "has_pages": false, "has_downloads": true, "has_discussions": false,
            "archived": index % 7 == 0, "disabled": false, "visibility": isPrivate ? "private" : "public",
            "pushed_at": pushed, "created_at": created, "updated_at": pushed,
            "permissions": ["admin": true, "maintain": true, "push": true, "triage": true, "pull": true],
            "allow_forking": !isPrivate, "web_commit_signoff_required": false,
            "license": index % 2 == 0 ? mitLicense : NSNullValue.null,
        ]
        if isPrivate { repository["temp_clone_token"] = "" }
        return repository
    }

    /// GitHub's `simple-user` of a seeded user (a repository's `owner`).
    static func simpleUser(_ user: GitHubSeedUser, host: String) -> [String: Any] {
        let full = GitHubAPIRoutes.userJSON(user, host: host)
        let members = [
            "login", "id", "node_id", "avatar_url", "gravatar_id", "url", "html_url", "followers_url", "following_url", "gists_url",
            "starred_url", "subscriptions_url", "organizations_url", "repos_url", "events_url", "received_events_url", "type",
            "user_view_type", "site_admin",
        ]
        // Another user's view of the account: GitHub marks embedded users `public`.
        return full.filter { members.contains($0.key) }.merging(["user_view_type": "public"]) { _, embedded in embedded }
    }

    /// The MIT license as GitHub's `license-simple`.
    static var mitLicense: [String: Any] {
        [
            "key": "mit", "name": "MIT License", "spdx_id": "MIT", "url": "https://api.github.com/licenses/mit", "node_id": "MDc6TGljZW5zZTEz",
        ]
    }
}
