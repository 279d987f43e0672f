import Foundation
import Glibc
import TetherClient
import TetherCrypto
import TetherNet
import TetherWire
import TetherEncoding

/// `tether push send`: an operator's end-to-end check of a running push relay. It registers the
/// device token as a phone would, then sends one notification through the relay as a Mac would,
/// and says in plain words what APNs answered.
func runPushSendCommand(_ arguments: [String]) async {
    let help = """
    usage: tether push send --relay URL --device-token HEX [--sandbox] [--profile mytty|iterm2]
                            [--title TEXT] [--body TEXT] [--ca-file PEM]

    Registers HEX with the push relay at URL (as the phone does), then pushes one notification to
    it (as the Mac does) and prints APNs' answer. Profile mytty (default) sends a sealed alert the
    phone cannot open, so it shows the placeholder TEXT; profile iterm2 sends a plaintext /push.
    --ca-file trusts this PEM bundle (instead of the system roots) for an https relay. Exit status 0 when APNs accepted it.

    """
    var flags: [String: String] = [:]
    var sandbox = false
    var index = 0
    while index < arguments.count {
        let argument = arguments[index]
        switch argument {
        case "--help", "-h":
            print(help, terminator: "")
            exit(0)
        case "--sandbox":
            sandbox = true
        case "--relay", "--device-token", "--profile", "--title", "--body", "--ca-file":
            guard index + 1 < arguments.count else { fail("push send: \(argument) needs a value") }
            flags[argument] = arguments[index + 1]
            index += 1
        default:
            fail("push send: unknown argument \(argument) (see --help)")
        }
        index += 1
    }
    guard let relay = flags["--relay"], relay.hasPrefix("http://") || relay.hasPrefix("https://") else { fail("push send: --relay needs an http(s) URL") }
    guard let token = flags["--device-token"]?.lowercased(), (32...200).contains(token.count), (try? Hex.decode(token)) != nil else {
        fail("push send: --device-token needs the device's APNs token in hex")
    }
    let profile = flags["--profile"] ?? "mytty"
    guard profile == "mytty" || profile == "iterm2" else { fail("push send: --profile is mytty or iterm2") }
    let title = flags["--title"] ?? "Tether"
    let body = flags["--body"] ?? "Test notification from tether push send"
    var tls: TLSClientContext?
    do {
        tls = try TLSClientContext(caFile: flags["--ca-file"])
    } catch {
        fail("push send: --ca-file: \(error)")
    }
    let group: EventLoopGroup
    do { group = try EventLoopGroup(count: 1) } catch { fail("push send: \(error)", code: 1) }
    let client = PushRelayClient(baseURL: relay, loop: group.loops[0], tls: tls)
    do throws(PushRelayError) {
        if profile == "mytty" {
            let registration = try await client.registerMytty(deviceToken: token, sandbox: sandbox)
            print("registered with the relay (Profile M, \(sandbox ? "sandbox" : "production"))")
            // Sealed under a key no phone holds: the phone shows the placeholder.
            try await client.pushMytty(to: registration, macID: UUID().uuidString, alert: Array(#"{"title":"Tether","body":"test"}"#.utf8),
                                       deviceSecret: SecureRandom.bytes(32), collapseID: UUID().uuidString, placeholder: "\(title): \(body)")
        } else {
            let secret = SecureRandom.bytes(32)
            try await client.registerITerm(token: try! Hex.decode(token), secret: secret, sandbox: sandbox)
            print("registered with the relay (Profile I, \(sandbox ? "sandbox" : "production"))")
            try await client.notifyITerm(token: try! Hex.decode(token), secret: secret, title: title, body: body)
        }
        print("delivered: APNs accepted the notification (200)")
        group.shutdown()
        leave(0)
    } catch {
        print(PushSendVerdict.explain(error))
        group.shutdown()
        leave(1)
    }
}

/// APNs' answers in plain words (push.md §4.5).
enum PushSendVerdict {
    static func explain(_ error: PushRelayError) -> String {
        switch error {
        case let .unreachable(why):
            return "not sent: the push relay did not answer (\(why))"
        case let .malformedAnswer(status):
            return "not sent: the push relay's answer (\(status)) is not a push relay's"
        case let .refused(status, text, apnsStatus):
            guard status == 502, let apnsStatus else { return "not sent: the push relay refused the request (\(status)): \(text)" }
            if apnsStatus == 0 { return "not sent: the push relay could not reach APNs (connection, TLS or timeout)" }
            let reason = text.hasPrefix("APNs ") ? (APNsWords.reason(inProfileIError: text) ?? text) : text
            return "refused by APNs (\(apnsStatus) \(reason)): \(APNsWords.meaning(status: apnsStatus, reason: reason))"
        }
    }
}

enum APNsWords {
    /// `APNs 400: {"reason":"BadDeviceToken"}` → `BadDeviceToken`.
    static func reason(inProfileIError text: String) -> String? {
        guard let colon = text.firstIndex(of: ":") else { return nil }
        return JSONValue.parse(Array(text[text.index(after: colon)...].utf8))?.string("reason")
    }

    static func meaning(status: Int, reason: String) -> String {
        switch reason {
        case "BadDeviceToken": "the device token is invalid, or belongs to the other environment (try --sandbox for a development build); the relay deleted the registration"
        case "DeviceTokenNotForTopic": "the device token belongs to another app than the relay's topic; the relay deleted the registration"
        case "Unregistered", "ExpiredToken": "the app is no longer installed or the token expired; the relay deleted the registration"
        case "TopicDisallowed", "BadTopic", "MissingTopic": "the relay's topic (APNS_TOPIC / APNS_TOPIC_ITERM2) is not allowed for this key"
        case "InvalidProviderToken", "MissingProviderToken", "Forbidden": "APNs does not accept the relay's key: check APNS_KEY_ID, APNS_TEAM_ID and the .p8"
        case "BadEnvironmentKeyInToken", "BadEnvironmentKeyIdInToken": "the relay's key is restricted to the other environment"
        case "ExpiredProviderToken": "the relay's provider token was stale even after re-minting: check the relay machine's clock"
        case "TooManyRequests": "too many notifications to this device; try again later"
        case "TooManyProviderTokenUpdates": "the relay re-signed its token too often; try again later"
        case "InternalServerError", "ServiceUnavailable", "Shutdown": "APNs is having trouble; try again later"
        case "PayloadTooLarge": "the notification is too large"
        default: status == 410 ? "the device token is no longer valid; the relay deleted the registration" : "see Apple's documentation of this reason"
        }
    }
}
