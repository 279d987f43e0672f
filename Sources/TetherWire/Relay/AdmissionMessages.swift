import Foundation
import TetherEncoding

/// The relay's admission messages (relay.md §3.2, client.md §6.2): Hello and Proof from the
/// client, Challenge and Result from the relay. Parsing is exactly as strict as the wire rules.
public struct Hello: Sendable, Equatable {
    public let role: RelayRole
    /// True only when the Hello carried the boolean `true`.
    public let nonDisplacing: Bool

    public init(role: RelayRole, nonDisplacing: Bool = false) {
        self.role = role
        self.nonDisplacing = nonDisplacing
    }

    /// Parses a Hello; nil means `bad hello`. `v` must be the JSON number 1 (`1.0` too, not
    /// `"1"` or `true`); `role` exactly `mac` or `phone`; anything that is not an object
    /// (including `null`) is a bad Hello. Unknown fields are ignored.
    public static func parse(_ bytes: [UInt8]) -> Hello? {
        guard let object = JSONValue.parse(bytes), case let .object(fields) = object,
              case let .number(v)? = fields["v"], v == 1,
              case let .string(roleText)? = fields["role"], let role = RelayRole(rawValue: roleText) else { return nil }
        let nonDisplacing: Bool
        if case .bool(true)? = fields["nonDisplacing"] { nonDisplacing = true } else { nonDisplacing = false }
        return Hello(role: role, nonDisplacing: nonDisplacing)
    }

    /// The client's encoding: `{"v":1,"role":"phone"}`, with `"nonDisplacing":true` only when set.
    public var json: String {
        nonDisplacing ? #"{"v":1,"role":"\#(role.rawValue)","nonDisplacing":true}"# : #"{"v":1,"role":"\#(role.rawValue)"}"#
    }
}

/// A Proof: any JSON value; only its `sig` and `ticket` string fields matter.
public struct Proof: Sendable, Equatable {
    public let signature: String?
    public let ticket: String?

    public init(signature: String? = nil, ticket: String? = nil) {
        self.signature = signature
        self.ticket = ticket
    }

    /// nil means `bad proof` (not JSON at all). A JSON value that is not an object, or fields that
    /// are not strings, parse to a Proof without that credential.
    public static func parse(_ bytes: [UInt8]) -> Proof? {
        guard let value = JSONValue.parse(bytes) else { return nil }
        guard case let .object(fields) = value else { return Proof() }
        var signature: String?
        var ticket: String?
        if case let .string(s)? = fields["sig"] { signature = s }
        if case let .string(t)? = fields["ticket"] { ticket = t }
        return Proof(signature: signature, ticket: ticket)
    }

    public var json: String {
        if let signature { return #"{"sig":"\#(signature)"}"# }
        if let ticket { return #"{"ticket":"\#(ticket)"}"# }
        return "{}"
    }
}

/// Relay → client messages, in the key order relay.md shows.
public enum AdmissionReply {
    public static func challenge(nonce: [UInt8]) -> String { #"{"nonce":"\#(Base64.encode(nonce))"}"# }
    public static func admitted() -> String { #"{"ok":true}"# }
    public static func admitted(registrationToken: String) -> String { #"{"ok":true,"registrationToken":"\#(registrationToken)"}"# }
    /// The refusal; the relay then closes 1008 with the same reason.
    public static func refused(_ reason: String) -> String { #"{"ok":false,"error":"\#(JSONValue.escaped(reason))"}"# }
}
