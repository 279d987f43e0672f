import Foundation
import Glibc

/// Playing a dead network path with a real server: SIGSTOP it and wait until every thread of
/// the process has stopped. The signal is delivered asynchronously, and on a loaded machine a
/// thread still running could answer a ping.
public enum ProcessStop {
    /// True once every thread shows state `T` (within 10 s).
    @discardableResult
    public static func stop(_ pid: Int32) -> Bool {
        kill(pid, SIGSTOP)
        return Eventually.holds(within: 10, every: 0.005) {
            let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task")) ?? []
            let states = tasks.compactMap { try? String(contentsOfFile: "/proc/\(pid)/task/\($0)/stat", encoding: .utf8) }
                .compactMap { $0.split(separator: ")").last?.split(separator: " ").first }
            return !states.isEmpty && states.allSatisfy { $0 == "T" }
        }
    }

    public static func resume(_ pid: Int32) { kill(pid, SIGCONT) }
}
