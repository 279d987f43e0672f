public import Dispatch
public import TetherCall
public import TetherWire
import TetherCrypto

/// A call's WebRTC data channel for Linux, behind the SDK's `CallMediaTransport`: ICE (libnice),
/// DTLS 1.2 (OpenSSL) over the selected pair, SCTP (usrsctp) inside DTLS, and DCEP opening the
/// one `cryptext` channel (signaling.md §7.4). The SDP is the data-only description of
/// `DataChannelSDP`; a certificate is made per call, and its fingerprint in the signed SDP is
/// the only thing DTLS trusts.
///
/// Threads: every layer's work runs on one private serial queue, the transport's only context.
/// libnice reports on its ICE thread and usrsctp on its association's queue; both hop onto this
/// queue first. DTLS lives on it whole (it is not thread-safe), with its retransmission timer
/// scheduled there. Reports reach the delegate from this queue, one at a time, in order, and
/// never from inside `perform`.
public final class RTCMediaTransport: CallMediaTransport, @unchecked Sendable {  // every mutable member is touched only on `queue`
    public struct Options: Sendable {
        /// §7.5's last paragraph: only relayed candidates, for tests and for users who hide
        /// their address. Then nothing this transport gives the call to signal names the device
        /// or its ports: each candidate is a TURN-relayed address with its related address
        /// withheld (`ICECandidate.signalled`), and the descriptions carry no candidate (they
        /// are all trickled), so their `c=` and `o=` addresses are 0.0.0.0.
        public var relayOnly = false
        /// Interfaces to gather on (IP literals); empty means all.
        public var localAddresses: [String] = []
        public init(relayOnly: Bool = false, localAddresses: [String] = []) {
            self.relayOnly = relayOnly
            self.localAddresses = localAddresses
        }
    }

    /// The data section's mid and index: the only m-line (§13.1: the end of candidates names it).
    static let sectionIndex = 0

    public weak var delegate: (any CallMediaTransportDelegate)?
    public let options: Options
    private let iceServers: [ICEServer]
    private let queue = DispatchQueue(label: "tether.rtc.call")
    private var certificate: DTLSCertificate?
    private var ice: ICEAgent?
    private var dtls: DTLSTransport?
    private var dtlsTimer: DispatchWorkItem?
    private var sctp: DataChannelAssociation?
    private var local: DataChannelSDP?
    private var remote: DataChannelSDP?
    /// The offerer's side: controlling ICE, and the one that opens the channel (DCEP).
    private var isOfferer = false
    private var iceConnected = false
    private var closed = false
    /// The data channel opened: an association that ends after this ended the channel.
    private var channelWasOpen = false
    private var pair: (local: ICECandidate, remote: ICECandidate)?

    public init(iceServers: [ICEServer], options: Options = Options()) {
        self.iceServers = iceServers
        self.options = options
    }

    public func perform(_ command: CallMediaCommand) {
        queue.async { [self] in
            guard !closed else { return }
            switch command {
            case .createOffer: createOffer()
            case let .acceptOffer(sdp): acceptOffer(sdp)
            case let .setRemoteAnswer(sdp): setRemoteAnswer(sdp)
            case let .addRemoteCandidate(candidate): addRemoteCandidate(candidate)
            case let .send(frame): send(frame)
            case .close: close()
            }
        }
    }

    // MARK: Descriptions

    private func createOffer() {
        isOfferer = true
        guard let (certificate, ice) = start(role: .controlling) else { return }
        let offer = DataChannelSDP.offer(origin: .random(), ice: ice.localCredentials, fingerprint: certificate.fingerprint)
        local = offer
        report(.localDescription(sdp: offer.text))
        gather()
    }

    private func acceptOffer(_ sdp: String) {
        let offer: DataChannelSDP
        do throws(DataChannelSDP.ParseError) { offer = try DataChannelSDP.parse(sdp, as: .offer) } catch { return fail("the offer: \(error)") }
        remote = offer
        guard let (certificate, ice) = start(role: .controlled) else { return }
        let answer = DataChannelSDP.answer(to: offer, origin: .random(), ice: ice.localCredentials, fingerprint: certificate.fingerprint)
        local = answer
        guard apply(remote: offer) else { return }
        report(.localDescription(sdp: answer.text))
        gather()
    }

    private func setRemoteAnswer(_ sdp: String) {
        guard let offer = local, remote == nil else { return fail("an answer without a pending offer") }
        let answer: DataChannelSDP
        do throws(DataChannelSDP.ParseError) { answer = try DataChannelSDP.parseAnswer(sdp, to: offer) } catch { return fail("the answer: \(error)") }
        remote = answer
        _ = apply(remote: answer)
    }

    private func start(role: ICEConfiguration.Role) -> (DTLSCertificate, ICEAgent)? {
        let certificate: DTLSCertificate
        do throws(DTLSError) { certificate = try DTLSCertificate() } catch { fail("certificate: \(error)"); return nil }
        let queue = self.queue
        weak let owner = self
        let agent: ICEAgent
        do throws(ICEError) {
            agent = try ICEAgent(ICEConfiguration(role: role, servers: iceServers, relayOnly: options.relayOnly,
                                                  localAddresses: options.localAddresses)) { event in
                queue.async { owner?.iceEvent(event) }
            }
        } catch {
            fail("ICE: \(error)")
            return nil
        }
        self.certificate = certificate
        ice = agent
        return (certificate, agent)
    }

    /// The peer's ICE credentials and candidates carried in its description.
    private func apply(remote description: DataChannelSDP) -> Bool {
        guard let ice else { return false }
        do throws(ICEError) {
            try ice.setRemoteCredentials(description.ice)
            for candidate in description.candidates { try ice.addRemoteCandidate(candidate.attributeValue) }
            if description.endOfCandidates { try ice.endOfRemoteCandidates() }
        } catch {
            fail("ICE: \(error)")
            return false
        }
        return true
    }

    private func gather() {
        do throws(ICEError) { try ice?.startGathering() } catch { fail("ICE: \(error)") }
    }

    private func addRemoteCandidate(_ candidate: CallCandidate) {
        guard let ice, let remote else { return fail("a candidate before the remote description") }
        guard remote.isForDataSection(candidate) else { return }
        do throws(ICEError) {
            if candidate.isEndOfCandidates { try ice.endOfRemoteCandidates() } else { try ice.addRemoteCandidate(candidate.candidate) }
        } catch {
            fail("a remote candidate: \(error)")
        }
    }

    // MARK: ICE

    private func iceEvent(_ event: ICEEvent) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !closed else { return }
        switch event {
        case let .localCandidate(value):
            guard let local else { return }
            report(.localCandidate(CallCandidate(candidate: value, sdpMid: local.mid, sdpMLineIndex: Self.sectionIndex)))
        case .gatheringComplete:
            guard let local else { return }
            report(.localCandidate(local.endOfCandidatesSignal))
        case let .stateChanged(state):
            switch state {
            case .connected, .ready: iceUp()
            case let .failed(failure): fail("ICE: \(failure)")
            case .disconnected, .gathering, .connecting: break
            }
        case let .selectedPair(local, remote):
            pair = (local, remote)
        case let .datagram(bytes):
            dtls?.receive(bytes)
            rescheduleDTLSTimer()
        }
    }

    /// The first working pair starts DTLS; the side whose `a=setup` says active is its client
    /// (RFC 8842; Tether answers active).
    private func iceUp() {
        guard !iceConnected, let certificate, let local, let remote, let ice else { return }
        iceConnected = true
        let role: DTLSRole = switch local.setup {
        case .active: .client
        case .passive: .server
        // The offerer's actpass: the answer chose.
        case .actpass: remote.setup == .active ? .server : .client
        }
        guard let fingerprint = remote.fingerprints.first else { return fail("the peer's description has no sha-256 fingerprint") }
        let transport: DTLSTransport
        do throws(DTLSError) {
            transport = try DTLSTransport(role: role, certificate: certificate, remoteFingerprint: fingerprint) { datagram in
                try? ice.send(datagram)
            }
        } catch {
            return fail(error.description)
        }
        transport.onConnected = { [weak self] in self?.dtlsUp() }
        transport.onApplicationData = { [weak self] bytes in self?.sctp?.receivePacket(Array(bytes)) }
        transport.onClose = { [weak self] error in
            guard let self else { return }
            // A DTLSError's description already begins with "DTLS".
            if let error { self.fail(error.description) } else { self.report(.channelClosed) }
        }
        dtls = transport
        transport.start()
        rescheduleDTLSTimer()
    }

    // MARK: DTLS and SCTP

    private func rescheduleDTLSTimer() {
        dtlsTimer?.cancel()
        dtlsTimer = nil
        guard let dtls, let timeout = dtls.nextTimeout else { return }
        let item = DispatchWorkItem { [weak self] in
            guard let self, !self.closed else { return }
            self.dtls?.handleTimeout()
            self.rescheduleDTLSTimer()
        }
        dtlsTimer = item
        let (seconds, attoseconds) = timeout.components
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)), execute: item)
    }

    private func dtlsUp() {
        guard sctp == nil, let dtls, let remote else { return }
        let queue = self.queue
        weak let owner = self
        let configuration = DataChannelConfiguration(role: dtls.role == .client ? .client : .server, opensChannel: isOfferer,
                                                     remotePort: remote.sctpPort,
                                                     peerMaxMessageSize: Int(clamping: remote.maxMessageSize))
        do throws(DataChannelSetupError) {
            sctp = try DataChannelAssociation(configuration: configuration, sendPacket: { packet in
                queue.async {
                    guard let owner, !owner.closed else { return }
                    try? owner.dtls?.send(packet)
                    owner.rescheduleDTLSTimer()
                }
            }, onEvent: { event in
                queue.async { owner?.sctpEvent(event) }
            })
        } catch {
            fail("SCTP: \(error)")
        }
    }

    private func sctpEvent(_ event: DataChannelEvent) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !closed else { return }
        switch event {
        case .channelOpen:
            channelWasOpen = true
            report(.channelOpen)
        case let .message(bytes): report(.channelMessage(bytes))
        case .channelClosed: report(.channelClosed)
        case .peerChannelRefused: break  // the association refused a second channel; ours goes on
        case .failed(.associationLost) where channelWasOpen, .failed(.shutDown) where channelWasOpen:
            // A peer that hangs up tears its association down (browsers abort it), often before
            // its `close` has crossed the signaling server: to the call that is the channel
            // closing, which waits for the `close` to say why, not a failure of its own.
            problem = "SCTP: the association ended"
            report(.channelClosed)
            close()
        case let .failed(failure): fail("SCTP: \(failure)")
        }
    }

    private func send(_ frame: [UInt8]) {
        guard let sctp else { return fail("a message before the data channel opened") }
        do throws(DataChannelSendError) { try sctp.send(frame) } catch { fail("send: \(error)") }
    }

    /// The candidate pair ICE selected, once it did (diagnostics and tests: a relay-only call
    /// must run over `relay` candidates on both ends). Never call it from a delegate callback.
    public func selectedPair() -> (local: ICECandidate, remote: ICECandidate)? {
        queue.sync { pair }
    }

    // MARK: Ending

    /// Nothing is reported after this; every layer is released (the ICE agent's close waits for
    /// its thread, at most a TURN round trip).
    private func close() {
        closed = true
        dtlsTimer?.cancel()
        dtlsTimer = nil
        sctp?.close()
        sctp = nil
        dtls?.close()
        dtls = nil
        ice?.close()
        ice = nil
        certificate = nil
    }

    /// What failed, for diagnostics only (no keys or addresses): the call learns `.failed` and
    /// ends with `close` `error`. Never call it from a delegate callback (it waits for the queue).
    public var lastProblem: String? { queue.sync { problem } }
    private var problem: String?

    private func fail(_ problem: String) {
        guard !closed else { return }
        self.problem = problem
        report(.failed)
        close()
    }

    private func report(_ event: CallMediaEvent) {
        delegate?.mediaTransport(self, didReport: event)
    }
}
