/// Why usrsctp would not make an association's socket.
public enum DataChannelSetupError: Error, Sendable, Equatable {
    case socket(errno: Int32)
    /// A socket option usrsctp refused (the option's number).
    case option(Int32, errno: Int32)
    case connect(errno: Int32)
}
