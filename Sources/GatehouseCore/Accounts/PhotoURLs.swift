/// Where a unified profile's photo is fetched, under the gateway's public URL.
struct PhotoURLs: Sendable {
    /// The gateway's public URL.
    let publicURL: String
    /// `/v1/me/photo` under it, built once: the signed-in user's profile names it on every
    /// `/v1/me`, which would otherwise build the same string for each request.
    let signedInUser: String

    /// The photo URLs under `publicURL`.
    init(publicURL: String) {
        self.publicURL = publicURL
        signedInUser = "\(publicURL)/v1/me/photo"
    }

    /// Where the photo of `uid`'s profile is fetched by `reader`.
    func base(uid: String, for reader: AccountService.ProfileReader) -> String {
        switch reader {
        case .signedInUser: signedInUser
        case .service: "\(publicURL)/v1/users/\(FormEncoding.escape(uid))/photo"
        }
    }
}
