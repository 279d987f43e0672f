import TetherSync
import Dispatch
import Foundation
import TetherCall
import TetherCrypto
import TetherRTC
import TetherWire

/// Call setup, `runs` times: createOffer to the channel open on both sides, each run on a fresh
/// pair (fresh certificates, agents and associations, as every call gets).
func measureSetup(runs: Int, iceServers: [ICEServer] = [], options: RTCMediaTransport.Options) throws(BenchFailure) -> [Double] {
    var milliseconds: [Double] = []
    for _ in 0..<runs {
        let pair = TransportPair(iceServers: iceServers, options: options)
        let result = pair.connect(timeout: 15)
        pair.close()
        switch result {
        case let .success(nanoseconds): milliseconds.append(Double(nanoseconds) / 1e6)
        case let .failure(failure): throw failure
        }
    }
    return milliseconds
}

struct Throughput {
    var bytes: Int
    var seconds: Double
    /// CPU time the whole process used meanwhile (both transports, every thread): near
    /// `seconds` x cores means the run was CPU-bound, far below it that it waited.
    var cpuSeconds: Double?
    var megabytesPerSecond: Double { Double(bytes) / seconds / 1e6 }
}

/// `total` bytes in `size`-byte messages from the offerer to the answerer, back to back. The
/// sender keeps at most `window` messages unreceived: the transport refuses (and fails the call)
/// once more than its queue limit (1 MiB) waits for SCTP, so an unbounded sender would measure
/// nothing; a window of that size keeps SCTP's buffer full without ever reaching the limit.
func measureRawThroughput(total: Int, size: Int, window: Int, options: RTCMediaTransport.Options) throws(BenchFailure) -> Throughput {
    let pair = TransportPair(options: options)
    defer { pair.close() }
    if case let .failure(failure) = pair.connect(timeout: 15) { throw failure }
    let count = total / size
    let progress = Progress()
    pair.onMessage { role, bytes in
        guard role == .answerer else { return }
        progress.received(bytes.count)
    }
    let payload = (0..<size).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    let start = monotonicNow(), cpuStart = processCPUSeconds()
    for sent in 0..<count {
        guard progress.waitUntil(received: sent - window + 1, timeout: 30) else {
            throw BenchFailure("the receiver stalled at \(progress.count) of \(count) messages: \(pair.failed ?? "no failure reported")")
        }
        pair.offerer.perform(.send(payload))
    }
    guard progress.waitUntil(received: count, timeout: 60) else {
        throw BenchFailure("\(progress.count) of \(count) messages arrived: \(pair.failed ?? "no failure reported")")
    }
    let end = progress.lastAt
    return Throughput(bytes: progress.bytes, seconds: Double(end - start) / 1e9, cpuSeconds: processCPUSeconds() - cpuStart)
}

func processCPUSeconds() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &spec)
    return Double(spec.tv_sec) + Double(spec.tv_nsec) / 1e9
}

/// Messages counted as they arrive, with the time of the last; the sender waits on it.
final class Progress: @unchecked Sendable {  // `condition` guards every var
    private let condition = NSCondition()
    private var messages = 0
    private var byteCount = 0
    private var last: UInt64 = 0

    func received(_ bytes: Int) {
        let now = monotonicNow()
        condition.withLock {
            messages += 1
            byteCount += bytes
            last = now
            condition.broadcast()
        }
    }

    func waitUntil(received target: Int, timeout seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while messages < target {
            if !condition.wait(until: deadline) { return messages >= target }
        }
        return true
    }

    var count: Int { condition.withLock { messages } }
    var bytes: Int { condition.withLock { byteCount } }
    var lastAt: UInt64 { condition.withLock { last } }
}

/// The §12 identities and fixed agreement keys: the benchmark needs a KK pair both sides already
/// know, and these are the ones the spec's vectors use.
enum Identities {
    static let alice = SignalingID(canonical: "BC7CBCB5636375FA1D82434D466724D92377F53B980695DD49D26D0CE12205A5")!
    static let bob = SignalingID(canonical: "4721B5B632272E65A68DDA7AC25B4185F8B01916DB185C14287DB92E2B770FAE")!
    static let callID = CallUUID("6f1c2b8a-3d4e-4f50-9a61-7b8c9d0e1f20")!

    static func key(_ byte: UInt8) -> X25519.PrivateKey {
        try! X25519.PrivateKey(rawRepresentation: [UInt8](repeating: byte, count: 32))
    }

    static func channels(now: MonotonicInstant) -> (initiator: CallSecureChannel, responder: CallSecureChannel) {
        let aliceKey = key(0xA2), bobKey = key(0xB2)
        return (CallSecureChannel(role: .initiator, callID: callID, localID: alice, remoteID: bob, localAgreementKey: aliceKey,
                                  remoteAgreementKey: bobKey.publicKey, now: now),
                CallSecureChannel(role: .responder, callID: callID, localID: bob, remoteID: alice, localAgreementKey: bobKey,
                                  remoteAgreementKey: aliceKey.publicKey, now: now))
    }

    /// The largest text a payload may carry (§9.5): 4,000 scalars of four UTF-8 bytes each, so a
    /// frame carries as many application bytes as one text can.
    static let largestText = String(repeating: "\u{1F600}", count: CallChannelLimits.textScalars.upperBound)
}

struct SecureThroughput {
    var texts: Int
    var textBytes: Int
    var frameBytes: Int
    var seconds: Double
    var megabytesPerSecond: Double { Double(textBytes) / seconds / 1e6 }
}

/// How the benchmark hands texts to the caller's channel.
enum SecureSending {
    /// One text every `interval`, after a quiet second so the handshake's frames
    /// are out of the receiver's first window: the pacer never has to hold one back, and the
    /// receiver's fixed window sees at most one frame per interval whatever the latency.
    case spaced(interval: Duration)
    /// Every text at once, left to the channel's own pacer (the §9.6 sender rule).
    case burst
}

struct SecureRun {
    var result: SecureThroughput
    /// Why a channel ended the session before every text arrived, if one did.
    var failure: String?
}

/// `texts` of the largest text from the caller's CallSecureChannel to the callee's over a real
/// RTCMediaTransport pair, from the first send after key confirmation to the last delivery. Both
/// channels live on one serial queue and are ticked at `nextTick`, as CallAgent runs them.
func measureSecureThroughput(texts: Int, sending: SecureSending, options: RTCMediaTransport.Options) throws(BenchFailure) -> SecureRun {
    let pair = TransportPair(options: options)
    defer { pair.close() }
    if case let .failure(failure) = pair.connect(timeout: 15) { throw failure }
    let link = SecureLink(pair: pair, texts: texts, sending: sending)
    pair.onMessage { role, bytes in link.frame(bytes, to: role) }
    link.start()
    let delivered = link.waitForDeliveries(timeout: Double(texts) / Double(CallChannelLimits.framesPerWindow) + 30)
    let outcome = link.outcome
    guard delivered || outcome.failure != nil else {
        throw BenchFailure("the secure channel delivered \(outcome.delivered) of \(texts) texts: \(pair.failed ?? "no failure reported")")
    }
    let result = SecureThroughput(texts: outcome.delivered, textBytes: outcome.textBytes, frameBytes: outcome.frameBytes,
                                  seconds: Double(outcome.end > outcome.start ? outcome.end - outcome.start : 0) / 1e9)
    return SecureRun(result: result, failure: delivered ? nil : outcome.failure)
}

/// The two secure channels over a transport pair.
final class SecureLink: @unchecked Sendable {  // every var is touched only on `queue`, `state` under `condition`
    struct Outcome {
        var start: UInt64 = 0
        var end: UInt64 = 0
        var delivered = 0
        var textBytes = 0
        var frameBytes = 0
        var failure: String?
    }

    private let pair: TransportPair
    private let texts: Int
    private let sending: SecureSending
    private let queue = DispatchQueue(label: "tether.rtcbench.secure")
    private var initiator: CallSecureChannel
    private var responder: CallSecureChannel
    private var tickGeneration = 0
    private let condition = NSCondition()
    private var state = Outcome()

    init(pair: TransportPair, texts: Int, sending: SecureSending) {
        self.pair = pair
        self.texts = texts
        self.sending = sending
        (initiator, responder) = Identities.channels(now: channelNow())
    }

    var outcome: Outcome { condition.withLock { state } }

    func start() {
        queue.async { [self] in absorb(initiator.start(now: channelNow()), from: .offerer) }
    }

    func frame(_ bytes: [UInt8], to role: TransportPair.Role) {
        queue.async { [self] in
            let now = channelNow()
            if role == .offerer { absorb(initiator.receive(bytes, now: now), from: .offerer) } else {
                absorb(responder.receive(bytes, now: now), from: .answerer)
            }
        }
    }

    func waitForDeliveries(timeout seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        condition.lock()
        defer { condition.unlock() }
        while state.delivered < texts, state.failure == nil {
            if !condition.wait(until: deadline) { break }
        }
        return state.delivered >= texts
    }

    private func update(_ change: (inout Outcome) -> Void) {
        condition.withLock {
            change(&state)
            condition.broadcast()
        }
    }

    private func absorb(_ actions: [CallChannelAction], from role: TransportPair.Role) {
        for action in actions {
            switch action {
            case let .send(frame):
                if role == .offerer { update { $0.frameBytes += frame.count } }
                (role == .offerer ? pair.offerer : pair.answerer).perform(.send(frame))
            case .authenticated:
                if role == .offerer { beginSending() }
            case let .deliver(.text(_, text, _)) where role == .answerer:
                let now = monotonicNow()
                update {
                    $0.delivered += 1
                    $0.textBytes += text.utf8.count
                    $0.end = now
                }
            case let .terminate(failure):
                update { if $0.failure == nil { $0.failure = "\(role == .offerer ? "caller" : "callee"): \(failure)" } }
            case .deliver, .rotated:
                break
            }
        }
        scheduleTick()
    }

    private func beginSending() {
        switch sending {
        case .burst:
            update { $0.start = monotonicNow() }
            for _ in 0..<texts { sendText() }
        case let .spaced(interval):
            let first = monotonicNow() + UInt64((CallChannelLimits.rateWindow * 11 / 10).nanosecondsClamped)
            update { $0.start = first }
            for index in 0..<texts {
                queue.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: first + UInt64(index) * UInt64(interval.nanosecondsClamped))) { [self] in sendText() }
            }
        }
    }

    private func sendText() {
        guard outcome.failure == nil else { return }
        do throws(CallSendError) {
            absorb(try initiator.sendText(Identities.largestText, id: .random(), sentAt: 1_700_000_000_000, now: channelNow()),
                   from: .offerer)
        } catch {
            update { if $0.failure == nil { $0.failure = "sendText: \(error)" } }
        }
    }

    private func scheduleTick() {
        tickGeneration += 1
        let generation = tickGeneration
        guard let due = [initiator.nextTick, responder.nextTick].compactMap(\.self).min() else { return }
        queue.asyncAfter(deadline: DispatchTime(uptimeNanoseconds: due.nanoseconds)) { [self] in
            guard generation == tickGeneration else { return }
            let now = channelNow()
            absorb(initiator.tick(now: now), from: .offerer)
            absorb(responder.tick(now: now), from: .answerer)
        }
    }
}

/// The secure channel's own cost with §9.6 taken out of the way: both channels in memory, a
/// simulated clock advanced just past the pacing interval before each text so no frame waits,
/// and the wall time of the work (Noise encryption, payload encoding and validation, decryption,
/// the receipts back). What it would carry if the protocol did not pace it.
func measureSecureCPU(texts: Int) throws(BenchFailure) -> SecureThroughput {
    var now = MonotonicInstant(nanoseconds: 5_000_000_000)
    var (initiator, responder) = Identities.channels(now: now)
    var toResponder = initiator.start(now: now).frames
    var toInitiator: [[UInt8]] = []
    var textBytes = 0, frameBytes = 0, delivered = 0
    func pump() {
        while !toResponder.isEmpty || !toInitiator.isEmpty {
            for frame in toResponder {
                let actions = responder.receive(frame, now: now)
                toInitiator += actions.frames
                for case let .deliver(.text(_, text, _)) in actions {
                    delivered += 1
                    textBytes += text.utf8.count
                }
            }
            toResponder = []
            for frame in toInitiator { toResponder += initiator.receive(frame, now: now).frames }
            toInitiator = []
        }
    }
    pump()
    // One frame per interval slightly longer than the sender's pacing (40 per 1.25 s), so the
    // pacer never holds one back: at 1/40 s it held a growing queue and the run ended closed.
    let step = CallChannelLimits.pacingWindow / CallChannelLimits.framesPerWindow + .milliseconds(1)
    let start = monotonicNow()
    for _ in 0..<texts {
        now += step
        toInitiator += responder.tick(now: now).frames
        do throws(CallSendError) {
            let frames = try initiator.sendText(Identities.largestText, id: .random(), sentAt: 1_700_000_000_000, now: now).frames
            frameBytes += frames.reduce(0) { $0 + $1.count }
            toResponder += frames
        } catch {
            throw BenchFailure("sendText: \(error)")
        }
        pump()
    }
    let seconds = Double(monotonicNow() - start) / 1e9
    guard delivered == texts else { throw BenchFailure("the in-memory channel delivered \(delivered) of \(texts) texts") }
    return SecureThroughput(texts: delivered, textBytes: textBytes, frameBytes: frameBytes, seconds: seconds)
}

extension [CallChannelAction] {
    var frames: [[UInt8]] {
        compactMap { if case let .send(frame) = $0 { frame } else { nil } }
    }
}
