// The CBOR decoder (App Attest input, relay.md §5) under both profiles. Every input must end in a
// value or a CBORError: a crash, a hang or an allocation beyond the limits is a finding.
import TetherAttest

enum CBORFuzz {
    static func run(_ bytes: [UInt8]) {
        for profile in [CBORDecoder.Profile.general, .appAttest] {
            guard let value = try? CBORDecoder(profile: profile).decode(bytes) else { continue }
            touch(value["fmt"])
            // What decodes must encode back to bytes that decode to the same value.
            if profile == .appAttest {
                expect((try? CBORDecoder(profile: profile).decode(value.encoded)) == value, "CBOR re-encoding changed the value")
            }
        }
    }
}
