/// The signed-in account a `link` or `reauthenticate` flow belongs to, and the session that
/// started it: the flow lives no longer than that session.
public struct FlowOwner: Sendable, Equatable {
    /// The account.
    public var uid: String
    /// The session's refresh-token family (`sid`). `nil` for a flow stored by an earlier
    /// version, which completes without that check.
    public var sessionFamilyId: String?

    /// An owner of `uid` signed in with the session `sessionFamilyId`.
    public init(uid: String, sessionFamilyId: String?) {
        self.uid = uid
        self.sessionFamilyId = sessionFamilyId
    }
}
