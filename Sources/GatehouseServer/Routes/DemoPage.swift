import Foundation
import Hummingbird

/// The demo page at `/`: sign in with GitHub, then a profile card (name, email, photo).
struct DemoPage {
    func register(_ router: Router<GatehouseRequestContext>, table: inout RouteTable) {
        let html: String = {
            guard let url = Bundle.module.url(forResource: "demo", withExtension: "html", subdirectory: "Resources"),
                let text = try? String(contentsOf: url, encoding: .utf8)
            else { return "<!doctype html><p>demo page missing</p>" }
            return text
        }()
        table.add(router, .get, "/") { _, _ in
            Response(
                status: .ok,
                headers: [
                    .contentType: "text/html; charset=utf-8", .cacheControl: "no-store",
                    .contentSecurityPolicy: "default-src 'self'; img-src 'self'; style-src 'unsafe-inline'; script-src 'unsafe-inline'",
                ],
                body: ResponseBody(byteBuffer: ByteBuffer(string: html)))
        }
    }
}
