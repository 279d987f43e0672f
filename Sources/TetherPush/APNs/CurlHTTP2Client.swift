import CTetherCurl
import Glibc
import Synchronization
import TetherService
import TetherSync

/// HTTP/2 over TLS to APNs with libcurl and nghttp2 (push.md §4.1): long-lived connections
/// reused across pushes, many requests multiplexed on each, driven by one thread of its own
/// (`curl_multi_poll`), so no event loop ever waits on APNs. Loops hand requests over through a
/// locked queue and `curl_multi_wakeup`; completions run on this thread.
///
/// TLS: certificate and host name always verified, against the system roots plus, when given,
/// the extra roots of `APNS_CA_FILE` (never instead of them). Only `https`, no redirects, ALPN
/// `h2` required: an answer over HTTP/1.1 counts as a failure.
public final class CurlHTTP2Client: HTTP2Transport, @unchecked Sendable { // curl handles only on the client's thread; other threads use the lock and atomics
    // @unchecked: `multi`, `idle` and `inflight` are touched only on the client's thread (and in
    // deinit, after it exited); what other threads touch is the `submissions` lock and atomics.

    /// The client's limits and trust roots.
    public struct Configuration: Sendable {
        /// Per request, from submission to the last byte of the answer (push.md §1.1: 10 s).
        public var timeoutMs = 10_000
        /// Connections per APNs host. One carries the load (APNs allows ~1,000 concurrent
        /// streams on it); the second lets a replacement open while a connection that got a
        /// GOAWAY or `Shutdown` finishes its streams, and absorbs a burst beyond one connection's
        /// streams. Never one per push.
        public var connectionsPerHost = 2
        /// Streams curl opens on one connection before it uses the next (the server's own
        /// SETTINGS_MAX_CONCURRENT_STREAMS still applies).
        public var streamsPerConnection = 1_000
        /// Requests accepted but not yet answered; beyond it a request fails at once instead of
        /// queueing without bound behind a stalled APNs.
        public var maxPending = 20_000
        /// A PEM file of extra trust roots (`APNS_CA_FILE`).
        public var extraRootsPath: String?
        /// The largest response body kept (APNs sends a small JSON object).
        public var maxResponseBody = 16 * 1024

        /// The defaults: a 10 s timeout, two connections per host, no extra roots.
        public init() {}
    }

    /// Why the client could not start.
    public enum StartError: Error, CustomStringConvertible {
        /// libcurl could not be set up (its message).
        case curl(String)
        /// The extra trust roots could not be read (`APNS_CA_FILE`).
        case roots(String)
        public var description: String {
            switch self {
            case let .curl(message): "libcurl: \(message)"
            case let .roots(message): "APNS_CA_FILE: \(message)"
            }
        }
    }

    private struct Submission {
        let request: HTTP2Request
        let completion: @Sendable (HTTP2Outcome) -> Void
    }

    /// One request on its way: what curl needs to outlive the transfer.
    private final class Transfer {
        let handle: UnsafeMutableRawPointer
        let completion: @Sendable (HTTP2Outcome) -> Void
        var headers: UnsafeMutablePointer<curl_slist>?
        let buffer: UnsafeMutablePointer<tether_curl_buffer>

        init(handle: UnsafeMutableRawPointer, completion: @escaping @Sendable (HTTP2Outcome) -> Void, limit: Int) {
            self.handle = handle
            self.completion = completion
            buffer = .allocate(capacity: 1)
            buffer.initialize(to: tether_curl_buffer(data: nil, length: 0, capacity: 0, limit: limit, overflowed: 0))
        }

        deinit {
            curl_slist_free_all(headers)
            tether_curl_buffer_free(buffer)
            buffer.deallocate()
        }
    }

    /// The limits and trust roots the client runs with.
    public let configuration: Configuration
    private let multi: UnsafeMutableRawPointer
    private let roots: OpaquePointer?
    private let submissions = Locked<[Submission]>([])
    private let pending = Atomic<Int>(0)
    private let opened = Atomic<Int>(0)
    private let stopping = Atomic<Bool>(false)
    private let thread = Locked<pthread_t?>(nil)
    private var inflight: [UnsafeMutableRawPointer: Transfer] = [:]
    private var idle: [UnsafeMutableRawPointer] = []

    /// curl_global_init is not thread-safe: done once, before the first client.
    private static let global: CURLcode = curl_global_init(Int(CURL_GLOBAL_DEFAULT))

    /// Starts the client's thread; throws when libcurl or the extra roots cannot be set up.
    public init(configuration: Configuration = Configuration()) throws(StartError) {
        guard Self.global == CURLE_OK else { throw .curl("curl_global_init failed") }
        self.configuration = configuration
        if let path = configuration.extraRootsPath {
            var error = [CChar](repeating: 0, count: 256)
            guard let loaded = tether_curl_roots_load(path, &error, error.count) else {
                throw .roots(String(decoding: error.prefix { $0 != 0 }.map(UInt8.init(bitPattern:)), as: UTF8.self))
            }
            roots = loaded
        } else {
            roots = nil
        }
        guard let multi = curl_multi_init() else {
            tether_curl_roots_free(roots)
            throw .curl("curl_multi_init failed")
        }
        self.multi = multi
        _ = tether_curl_multi_setopt_long(multi, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
        _ = tether_curl_multi_setopt_long(multi, CURLMOPT_MAX_HOST_CONNECTIONS, configuration.connectionsPerHost)
        _ = tether_curl_multi_setopt_long(multi, CURLMOPT_MAX_CONCURRENT_STREAMS, configuration.streamsPerConnection)
        let started = DedicatedThread.start(name: "tether-apns") { [self] in run() }
        thread.withLock { $0 = started }
    }

    deinit {
        for transfer in inflight.values {
            curl_multi_remove_handle(multi, transfer.handle)
            curl_easy_cleanup(transfer.handle)
        }
        for handle in idle { curl_easy_cleanup(handle) }
        curl_multi_cleanup(multi)
        tether_curl_roots_free(roots)
    }

    public var connectionsOpened: Int { opened.load(ordering: .relaxed) }

    /// Queues `request` for the client's thread; `completion` runs there once, with the answer or
    /// the failure.
    public func send(_ request: HTTP2Request, completion: @escaping @Sendable (HTTP2Outcome) -> Void) {
        guard !stopping.load(ordering: .relaxed) else { return completion(.failed(reason: "shutting down", refused: true)) }
        guard pending.add(1, ordering: .relaxed).newValue <= configuration.maxPending else {
            pending.subtract(1, ordering: .relaxed)
            return completion(.failed(reason: "too many requests waiting for APNs", refused: true))
        }
        let first = submissions.withLock { queue -> Bool in
            queue.append(Submission(request: request, completion: completion))
            return queue.count == 1
        }
        // Only the first of a batch wakes the thread: it takes the whole queue before it polls again.
        if first { curl_multi_wakeup(multi) }
    }

    public func shutdown() {
        guard !stopping.exchange(true, ordering: .relaxed) else { return }
        curl_multi_wakeup(multi)
        if let handle = thread.withLock({ state -> pthread_t? in defer { state = nil }; return state }) {
            pthread_join(handle, nil)
        }
    }

    // MARK: The client's thread

    private func run() {
        while !stopping.load(ordering: .relaxed) {
            for submission in submissions.withLock({ queue -> [Submission] in defer { queue = [] }; return queue }) {
                start(submission)
            }
            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            collectFinished()
            // Returns at once on `curl_multi_wakeup`, or when curl's own timers are due.
            curl_multi_poll(multi, nil, 0, 1_000, nil)
        }
        // Whatever is still queued or in flight is answered as not sent.
        for submission in submissions.withLock({ queue -> [Submission] in defer { queue = [] }; return queue }) {
            finish(submission.completion, .failed(reason: "shutting down", refused: true))
        }
        for transfer in inflight.values {
            curl_multi_remove_handle(multi, transfer.handle)
            finish(transfer.completion, .failed(reason: "shutting down", refused: false))
        }
        for transfer in inflight.values { curl_easy_cleanup(transfer.handle) }
        inflight = [:]
    }

    /// A handle with every option that is the same for all requests set once (a reused handle
    /// keeps them: only the request's own options change per push, no `curl_easy_reset`).
    private func makeHandle() -> UnsafeMutableRawPointer? {
        guard let handle = curl_easy_init() else { return nil }
        var ok = true
        func set(_ option: CURLoption, _ value: Int) { ok = ok && tether_curl_easy_setopt_long(handle, option, value) == CURLE_OK }
        "https".withCString { protocols in ok = ok && tether_curl_easy_setopt_pointer(handle, CURLOPT_PROTOCOLS_STR, protocols) == CURLE_OK }
        set(CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_2TLS)
        set(CURLOPT_PIPEWAIT, 1)
        set(CURLOPT_NOSIGNAL, 1)
        set(CURLOPT_FOLLOWLOCATION, 0)
        set(CURLOPT_SSL_VERIFYPEER, 1)
        set(CURLOPT_SSL_VERIFYHOST, 2)
        set(CURLOPT_TIMEOUT_MS, configuration.timeoutMs)
        set(CURLOPT_POST, 1)
        if let roots { ok = ok && tether_curl_use_roots(handle, roots) == CURLE_OK }
        guard ok else {
            curl_easy_cleanup(handle)
            return nil
        }
        return handle
    }

    private func start(_ submission: Submission) {
        guard let handle = idle.popLast() ?? makeHandle() else {
            return finish(submission.completion, .failed(reason: "libcurl could not make a request handle", refused: true))
        }
        let transfer = Transfer(handle: handle, completion: submission.completion, limit: configuration.maxResponseBody)
        let request = submission.request
        for field in request.headers { transfer.headers = curl_slist_append(transfer.headers, "\(field.name): \(field.value)") }
        // curl adds these to every POST unless told not to; APNs gets exactly the fields above.
        for suppressed in ["Accept:", "Content-Type:", "Expect:"] { transfer.headers = curl_slist_append(transfer.headers, suppressed) }
        var ok = true
        func set(_ option: CURLoption, _ value: Int) { ok = ok && tether_curl_easy_setopt_long(handle, option, value) == CURLE_OK }
        func set(_ option: CURLoption, _ value: UnsafeRawPointer?) { ok = ok && tether_curl_easy_setopt_pointer(handle, option, value) == CURLE_OK }
        request.url.withCString { set(CURLOPT_URL, $0) }
        set(CURLOPT_FRESH_CONNECT, request.freshConnection ? 1 : 0)
        ok = ok && tether_curl_easy_setopt_off_t(handle, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count)) == CURLE_OK
        request.body.withUnsafeBytes { set(CURLOPT_COPYPOSTFIELDS, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1)) }
        set(CURLOPT_HTTPHEADER, UnsafeRawPointer(transfer.headers))
        ok = ok && tether_curl_use_buffer(handle, transfer.buffer) == CURLE_OK
        guard ok, curl_multi_add_handle(multi, handle) == CURLM_OK else {
            retire(handle)
            return finish(submission.completion, .failed(reason: "libcurl refused the request options", refused: true))
        }
        inflight[handle] = transfer
    }

    /// Back to the idle pool, pointing at nothing its finished transfer owned.
    private func retire(_ handle: UnsafeMutableRawPointer) {
        _ = tether_curl_easy_setopt_pointer(handle, CURLOPT_HTTPHEADER, nil)
        _ = tether_curl_easy_setopt_pointer(handle, CURLOPT_WRITEDATA, nil)
        idle.append(handle)
    }

    private func collectFinished() {
        var left: Int32 = 0
        while let message = curl_multi_info_read(multi, &left) {
            guard tether_curl_message_is_done(message) != 0, let handle = tether_curl_message_handle(message),
                  let transfer = inflight.removeValue(forKey: handle) else { continue }
            let result = tether_curl_message_result(message)
            let outcome = outcome(of: transfer, result: result)
            var connects = 0
            _ = tether_curl_easy_getinfo_long(handle, CURLINFO_NUM_CONNECTS, &connects)
            opened.add(connects, ordering: .relaxed)
            curl_multi_remove_handle(multi, handle)
            retire(handle)
            finish(transfer.completion, outcome)
        }
    }

    private func outcome(of transfer: Transfer, result: CURLcode) -> HTTP2Outcome {
        guard result == CURLE_OK else {
            let reason = transfer.buffer.pointee.overflowed != 0 ? "APNs answer too large" : String(cString: curl_easy_strerror(result))
            // A stream refused or a connection that went away (GOAWAY) before any byte of the
            // answer: not processed, so it may be sent once more. curl already resends a stream
            // refused with REFUSED_STREAM by itself; this covers what reaches us.
            var status = 0
            _ = tether_curl_easy_getinfo_long(transfer.handle, CURLINFO_RESPONSE_CODE, &status)
            let refused = status == 0 && (result == CURLE_HTTP2_STREAM || result == CURLE_HTTP2 || result == CURLE_COULDNT_CONNECT)
            return .failed(reason: reason, refused: refused)
        }
        var version = 0
        _ = tether_curl_easy_getinfo_long(transfer.handle, CURLINFO_HTTP_VERSION, &version)
        guard version == CURL_HTTP_VERSION_2_0 else { return .failed(reason: "APNs did not answer over HTTP/2", refused: false) }
        var status = 0
        _ = tether_curl_easy_getinfo_long(transfer.handle, CURLINFO_RESPONSE_CODE, &status)
        let buffer = transfer.buffer.pointee
        let body = buffer.data.map { Array(UnsafeRawBufferPointer(start: $0, count: buffer.length)) } ?? []
        return .response(status: status, body: body)
    }

    private func finish(_ completion: @Sendable (HTTP2Outcome) -> Void, _ outcome: HTTP2Outcome) {
        pending.subtract(1, ordering: .relaxed)
        completion(outcome)
    }
}
