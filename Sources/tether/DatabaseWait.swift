import Foundation
import TetherStore

/// Opens a service's shared database, waiting while it cannot be reached: a node started while
/// PostgreSQL is down (a cluster booting in the wrong order, a failover in progress) retries with
/// back-off — 0.1 s doubling to 5 s, one line when the wait begins and one when it ends — and
/// starts once the database answers, instead of exiting and leaving the restart to systemd. It
/// listens on nothing meanwhile, so a proxy or load balancer sees it as not ready. A refusal no
/// wait will cure (a wrong password or database name, a malformed URL) still ends the process.
func openWaitingForDatabase<Store>(_ service: String, setting: String, _ open: () throws -> Store) -> Store {
    var delay = 0.1
    var waitingSince: Date?
    while true {
        do {
            let store = try open()
            if let waitingSince {
                FileHandle.standardError.write(Data("\(service): \(setting): the database answered after \(Int(Date().timeIntervalSince(waitingSince).rounded())) s of waiting; starting\n".utf8))
            }
            return store
        } catch let error as StoreError where error.unreachable {
            if waitingSince == nil {
                waitingSince = Date()
                FileHandle.standardError.write(Data("\(service): \(setting): \(error.message); waiting for it (retrying with back-off, not listening until it answers)\n".utf8))
            }
            Thread.sleep(forTimeInterval: delay)
            delay = min(5, delay * 2)
        } catch {
            fail("\(service): \(setting): \(error)", code: 1)
        }
    }
}
