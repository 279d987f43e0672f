/// A message usrsctp hands over in pieces. The partial delivery point is the advertised
/// max-message-size, so usrsctp starts handing over an oversize message once it holds about that
/// much of it, and the association aborts then rather than after buffering all of it.
struct PartialMessage {
    let ppid: UInt32
    var bytes: [UInt8] = []
}
