import Foundation
import Hummingbird

/// The control path (`/_emulator/…`) used by tests and by anyone checking a gateway.
struct ControlRoutes {
    let state: EmulatorState

    func register(on router: Router<BasicRequestContext>) {
        router.get("/_emulator/users") { _, _ in
            Response.json(SeededUsers.listing())
        }
        router.get("/_emulator/stats") { _, _ in
            Response.json(await state.statistics())
        }
        router.post("/_emulator/expire-tokens") { _, _ in
            Response.json(["expired": await state.expireAllTokens()])
        }
        router.post("/_emulator/faults") { request, _ in
            var request = request
            let body = try await request.collectBody(upTo: 64 << 10)
            guard let object = try? JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any],
                let endpoint = object["endpoint"] as? String, !endpoint.isEmpty
            else {
                return Response.json(["error": "a JSON object with an \"endpoint\" (\"METHOD /path\") is required"], status: .badRequest)
            }
            let fault = Fault(
                endpoint: endpoint,
                status: object["status"] as? Int,
                headers: (object["headers"] as? [String: Any])?.compactMapValues { "\($0)" } ?? [:],
                body: object["body"] as? String ?? "",
                delayMilliseconds: object["delayMs"] as? Int ?? 0,
                remaining: object["times"] as? Int)
            await state.addFault(fault)
            return Response.json(["endpoint": endpoint], status: .created)
        }
        router.delete("/_emulator/faults") { _, _ in
            await state.clearFaults()
            return Response(status: .noContent)
        }
    }
}
