// libFuzzer entry point for the CBOR decoder (compiled with Sources/TetherAttest/CBOR.swift by
// scripts/fuzz-cbor). Every input must end in a value or a CBORError: a crash, a hang or an
// allocation beyond the limits is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))
    for profile in [CBORDecoder.Profile.general, .appAttest] {
        if let value = try? CBORDecoder(profile: profile).decode(bytes) {
            // Touch the result so nothing is optimised away.
            _ = value["fmt"]
        }
    }
    return 0
}
