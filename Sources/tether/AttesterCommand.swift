import Foundation
import TetherClient
import TetherCrypto
import TetherDevice

/// A software attester's root in a directory: `root.pem` (the certificate a relay trusts through
/// APPATTEST_ROOT_PEM) and `root-key.pem` (owner-only; whoever holds it can attest).
struct AttesterAuthorityFiles {
    let directory: String
    var certificatePath: String { directory + "/root.pem" }
    var keyPath: String { directory + "/root-key.pem" }

    func load() throws -> SoftwareAttester.Authority {
        for path in [certificatePath, keyPath] where !FileManager.default.isReadableFile(atPath: path) {
            throw CryptoError.malformedEncoding("cannot read \(path) (tether attester init \(directory) makes it)")
        }
        let certificate = try Certificate(pemRepresentation: try String(contentsOfFile: certificatePath, encoding: .utf8))
        let key = try P256.PrivateKey(pemRepresentation: try String(contentsOfFile: keyPath, encoding: .utf8))
        guard key.publicKey == certificate.p256PublicKey else { throw CryptoError.malformedEncoding("root-key.pem does not match root.pem") }
        return SoftwareAttester.Authority(key: key, certificate: certificate)
    }

    func create() throws -> SoftwareAttester.Authority {
        let state = try StateDirectory(path: directory)
        guard state.read("root-key.pem") == nil else { throw CryptoError.malformedEncoding("\(keyPath) exists; not replaced") }
        let authority = try SoftwareAttester.Authority.make()
        try state.write("root-key.pem", Array(authority.key.pemRepresentation.utf8))
        try state.write("root.pem", Array(authority.certificate.pemRepresentation.utf8))
        return authority
    }
}

func runAttesterCommand(_ arguments: [String]) -> Never {
    let help = """
    usage: tether attester init DIR

    Makes a software App Attest root for tests and Linux phones: DIR/root.pem is the certificate
    to give the relay (APPATTEST_ROOT_PEM="$(cat DIR/root.pem)"), DIR/root-key.pem the key
    `tether phone --attester DIR` signs with. A relay that trusts this root accepts any phone
    holding the key: never configure it on a public relay.

    """
    guard arguments.count == 2, arguments[0] == "init" else {
        print(help, terminator: "")
        exit(arguments.contains("--help") || arguments.contains("-h") ? 0 : 2)
    }
    let files = AttesterAuthorityFiles(directory: arguments[1])
    do { _ = try files.create() } catch let error as StateDirectory.Failure {
        fail("attester: init \(arguments[1]): \(error)")
    } catch {
        fail("attester: \(error)", code: 1)
    }
    print("attester: root certificate \(files.certificatePath) (give it to the relay as APPATTEST_ROOT_PEM), key \(files.keyPath)")
    exit(0)
}
