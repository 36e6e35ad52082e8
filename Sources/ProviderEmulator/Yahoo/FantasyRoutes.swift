import Foundation
import Hummingbird

/// Yahoo's Fantasy Sports API (fantasysports.yahooapis.com) under `/yahoo-fantasy`: the games of
/// the signed-in user (`/fantasy/v2/users;use_login=1/games`), as XML by default and as JSON
/// with `?format=json`, authorized by the Yahoo issuer's access tokens.
struct FantasyRoutes {
    /// The Yahoo issuer's access tokens.
    let state: OIDCState

    /// Adds the games of the signed-in user.
    func register(on router: Router<BasicRequestContext>) {
        router.get("/yahoo-fantasy/fantasy/v2/users;use_login=1/games") { request, _ in
            guard let header = request.headers[.authorization], header.lowercased().hasPrefix("bearer "),
                let token = await state.token(String(header.dropFirst(7))), token.issuer == OIDCIssuerSpec.yahoo.name, !token.refresh, !token.expired
            else {
                return Response.text(
                    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<yahoo:error xmlns:yahoo=\"http://yahooapis.com/v1/base.rng\" xml:lang=\"en-us\"><yahoo:description>Please provide valid credentials. OAuth oauth_problem=\"token_expired\", realm=\"yahooapis.com\"</yahoo:description></yahoo:error>",
                    status: .unauthorized, contentType: "application/xml; charset=utf-8",
                    headers: [.wwwAuthenticate: "OAuth oauth_problem=\"token_expired\", realm=\"yahooapis.com\""])
            }
            let games = [("423", "nfl", "Football", "2023"), ("422", "mlb", "Baseball", "2023")]
            let uri = "/fantasy/v2/users;use_login=1/games"
            if request.formQuery["format"] == "json" {
                var listed: [String: Any] = ["count": games.count]
                for (index, game) in games.enumerated() {
                    listed["\(index)"] = ["game": [["game_key": game.0, "code": game.1, "name": game.2, "season": game.3, "type": "full"]]]
                }
                return Response.json([
                    "fantasy_content": [
                        "xml:lang": "en-US", "yahoo:uri": uri, "time": "12.3ms", "copyright": "Data provided by Yahoo! and STATS, LLC",
                        "refresh_rate": "60", "users": ["0": ["user": [["guid": token.subject], ["games": listed]]], "count": 1],
                    ]
                ])
            }
            let entries = games.map {
                "<game><game_key>\($0.0)</game_key><code>\($0.1)</code><name>\($0.2)</name><season>\($0.3)</season><type>full</type></game>"
            }.joined()
            return Response.text(
                "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<fantasy_content xml:lang=\"en-US\" yahoo:uri=\"\(uri)\" xmlns:yahoo=\"http://www.yahooapis.com/v1/base.rng\" xmlns=\"http://fantasysports.yahooapis.com/fantasy/v2/base.rng\"><users count=\"1\"><user><guid>\(token.subject)</guid><games count=\"\(games.count)\">\(entries)</games></user></users></fantasy_content>",
                contentType: "application/xml; charset=utf-8")
        }
    }
}
