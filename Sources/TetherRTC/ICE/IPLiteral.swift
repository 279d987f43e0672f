import Glibc

/// IPv4 and IPv6 literals as inet_pton reads them: what libnice's address parser accepts.
enum IPLiteral {
    static func isValid(_ text: String) -> Bool { family(of: text) != nil }

    /// AF_INET or AF_INET6, or nil for anything else (a host name).
    static func family(of text: String) -> Int32? {
        var storage = in6_addr()
        if inet_pton(AF_INET, text, &storage) == 1 { return AF_INET }
        if inet_pton(AF_INET6, text, &storage) == 1 { return AF_INET6 }
        return nil
    }
}
