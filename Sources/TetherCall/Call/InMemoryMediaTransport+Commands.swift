import Dispatch

extension InMemoryMediaTransport {
    /// One command, on the network's queue.
    func run(_ command: CallMediaCommand) {
        dispatchPrecondition(condition: .onQueue(network.queue))
        guard !isFinished else { return }
        switch command {
        case .createOffer:
            guard token == nil else { return finish(reporting: .failed) }
            let token = InMemoryMediaNetwork.newToken()
            self.token = token
            isOfferer = true
            hasLocalDescription = true
            network.register(self, token: token)
            gather(Self.description(token: token), token: token)
        case let .acceptOffer(sdp):
            guard token == nil, let offerToken = Self.token(in: sdp), let offerer = network.offerer(token: offerToken),
                  offerer.peer == nil, !offerer.isFinished else { return finish(reporting: .failed) }
            let token = InMemoryMediaNetwork.newToken()
            self.token = token
            peer = offerer
            offerer.peer = self
            hasRemoteDescription = true
            hasLocalDescription = true
            gather(Self.description(token: token), token: token)
        case let .setRemoteAnswer(sdp):
            guard isOfferer, !hasRemoteDescription, let peer, Self.token(in: sdp) == peer.token else { return finish(reporting: .failed) }
            hasRemoteDescription = true
        case let .addRemoteCandidate(candidate):
            guard hasRemoteDescription else { return finish(reporting: .failed) }
            // Only the peer's own candidate leads anywhere; others are unreachable addresses.
            if let peerToken = peer?.token, candidate == Self.hostCandidate(token: peerToken) { hasRemoteCandidate = true }
        case var .send(message):
            guard isOpen, let peer else {
                // A channel the peer closed swallows what is still sent; one never opened refuses.
                if peer?.isFinished == true { return }
                return finish(reporting: .failed)
            }
            if tamperNext, !message.isEmpty {
                tamperNext = false
                message[message.count - 1] ^= 0x01
            }
            peer.report(.channelMessage(message))
            return
        case .close:
            return finish(reporting: nil)
        }
        openIfConnected()
    }

    private func gather(_ description: String, token: String) {
        report(.localDescription(sdp: description))
        report(.localCandidate(Self.hostCandidate(token: token)))
        report(.localCandidate(Self.endOfCandidates))
    }

    /// ICE "connects" and the channel opens once both ends have both descriptions and one of
    /// the other's candidates.
    private func openIfConnected() {
        guard let peer, !isOpen, !peer.isFinished else { return }
        for end in [self, peer] {
            guard end.hasLocalDescription, end.hasRemoteDescription, end.hasRemoteCandidate else { return }
        }
        isOpen = true
        peer.isOpen = true
        report(.channelOpen)
        peer.report(.channelOpen)
    }
}
