import COpenSSL

/// BLAKE2s (RFC 7693).
///
/// Unkeyed BLAKE2s-256 is OpenSSL's BLAKE2S-256 digest; keyed BLAKE2s (1...32-byte key,
/// 1...32-byte output) is OpenSSL's BLAKE2SMAC. OpenSSL 3.0 offers no unkeyed output length
/// other than 32 bytes, so that variant is not provided.
public enum BLAKE2s {
    public static let byteCount = 32
    public static let maxKeyByteCount = 32

    /// Unkeyed BLAKE2s-256.
    public static func hash(_ data: some BytesView) -> [UInt8] { HashFunction.blake2s.hash(data) }

    /// Keyed BLAKE2s with an output of `outputByteCount` bytes.
    public static func hash(_ data: some BytesView, key: some BytesView,
                            outputByteCount: Int = 32) throws(CryptoError) -> [UInt8] {
        let keyCount = key.byteCount
        guard keyCount >= 1, keyCount <= maxKeyByteCount else {
            throw .invalidKeySize(expected: maxKeyByteCount, actual: keyCount)
        }
        guard outputByteCount >= 1, outputByteCount <= byteCount else {
            throw .invalidParameter("BLAKE2s output length \(outputByteCount) outside 1...32")
        }
        var size = outputByteCount
        let context: MACContext? = withUnsafeMutablePointer(to: &size) { sizePointer in
            let params = [
                OSSL_PARAM_construct_size_t(cString(ParamKey.size), sizePointer),
                OSSL_PARAM_construct_end(),
            ]
            return key.withUnsafeBytes { key in
                params.withUnsafeBufferPointer { MACContext.keyed(OpenSSL.blake2sMAC, key: key, params: $0.baseAddress) }
            }
        }
        guard let context else { throw .library("EVP_MAC_init(BLAKE2SMAC)") }
        context.update(data)
        return context.finalize(count: outputByteCount)
    }
}
