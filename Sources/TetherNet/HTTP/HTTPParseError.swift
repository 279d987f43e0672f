/// Why a request was refused by the parser, with the status the server answers before closing.
public struct HTTPParseError: Error, Equatable, Sendable, CustomStringConvertible {
    public let status: Int
    public let reason: String

    public init(status: Int, _ reason: String) {
        self.status = status
        self.reason = reason
    }

    public var description: String { "\(status) \(reason)" }

    static func badRequest(_ reason: String) -> HTTPParseError { HTTPParseError(status: 400, reason) }
    static func headersTooLarge(_ reason: String) -> HTTPParseError { HTTPParseError(status: 431, reason) }
    static let payloadTooLarge = HTTPParseError(status: 413, "payload too large")
    static let unsupportedVersion = HTTPParseError(status: 505, "HTTP version not supported")
    static func notImplemented(_ reason: String) -> HTTPParseError { HTTPParseError(status: 501, reason) }
}
