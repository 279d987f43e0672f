/// Why a connection's reading is paused, each reason lifted on its own (an owner's hold, the
/// output bound, a reply awaited…): the transport pauses when the first reason comes and is read
/// again when the last goes.
struct ReadingPauses {
    private var reasons: UInt8 = 0

    var isEmpty: Bool { reasons == 0 }

    func contains(_ reason: UInt8) -> Bool { reasons & reason != 0 }

    /// Adds `reason`; true when the transport must pause now (it was being read).
    mutating func add(_ reason: UInt8) -> Bool {
        defer { reasons |= reason }
        return reasons == 0
    }

    /// Lifts `reason`; true when the transport must be read again now (it was the last).
    mutating func lift(_ reason: UInt8) -> Bool {
        guard reasons & reason != 0 else { return false }
        reasons &= ~reason
        return reasons == 0
    }
}
