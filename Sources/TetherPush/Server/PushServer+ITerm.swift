import TetherSync
import TetherNet
import TetherStore

extension PushServer {
    /// `POST /register` (push.md §3.2): size, the per-IP limit (every request counts, skipped
    /// re-registrations too), the fields, then on the token's lane the write — skipped when the
    /// stored record is the same and younger than half its lifetime.
    func itermRegister(_ request: HTTPServerRequest, reply: @escaping @Sendable (PushAnswer) -> Void) {
        metrics.registers.increment()
        guard !BodySize.isTooLarge(request.body) else {
            metrics.registersRejected.increment()
            return reply(ITermProfile.requestTooLarge)
        }
        if gate.admitRequest(Self.registerLimiter, ip: gate.clientIP(request.head, peer: request.peer)) != nil {
            metrics.registersRejected.increment()
            metrics.rateLimited.increment()
            return reply(ITermProfile.rateLimited)
        }
        let registration: ITermProfile.Registration
        switch ITermProfile.registration(from: request.body) {
        case let .failure(refusal):
            metrics.registersRejected.increment()
            return reply(refusal.answer)
        case let .success(valid): registration = valid
        }
        let wall = clock.wall(), now = wall.unixMilliseconds
        storage.submit(lane: lane(registration.token)) { [self] store in
            do {
                let stored = try store.iterm(token: registration.token, now: now)
                guard ITermProfile.needsWrite(registration, stored: stored, now: wall) else {
                    metrics.registersSkipped.increment()
                    return reply(ITermProfile.skipped)
                }
                try store.putITerm(ITermRegistration(secretHash: registration.secretHash, sandbox: registration.sandbox, registeredAt: now),
                                   token: registration.token, expiresAt: (wall + ITermProfile.registrationLifetime).unixMilliseconds)
                metrics.registersWritten.increment()
                if stored == nil { metrics.devices.increment() }
                reply(ITermProfile.ok)
            } catch {
                storageFailed(error)
                reply(.storageUnavailable)
            }
        }
    }

    /// `POST /push` and `/push/mutable` (push.md §3.4–§3.7): size, JSON and fields, then on the
    /// token's lane the lookup, the secret, the per-token limit (authenticated pushes only), the
    /// APNs call, and a token-permanent failure's delete before the answer.
    func itermPush(_ kind: ITermProfile.Kind, _ request: HTTPServerRequest, reply: @escaping @Sendable (PushAnswer) -> Void) {
        metrics.pushes.increment()
        guard !BodySize.isTooLarge(request.body) else { return reply(ITermProfile.requestTooLarge) }
        let push: ITermProfile.Push
        switch ITermProfile.push(kind, from: request.body) {
        case let .failure(refusal): return reply(refusal.answer)
        case let .success(valid): push = valid
        }
        let now = clock.wall().unixMilliseconds
        let topic = configuration.topicITerm2
        let lane = lane(push.token)
        storage.submit(lane: lane) { [self] store in
            let registration: ITermRegistration?
            do {
                registration = try store.iterm(token: push.token, now: now)
            } catch {
                storageFailed(error)
                return reply(.storageUnavailable)
            }
            guard let registration else {
                metrics.unknownTokens.increment()
                return reply(ITermProfile.unknownDeviceToken)
            }
            guard ITermProfile.isSecretValid(push.secret, for: registration) else {
                metrics.badSecrets.increment()
                return reply(ITermProfile.badSecret)
            }
            // Counted in the shared store when there is one, so N nodes do not allow N× the limit.
            let allowed: Bool
            do {
                allowed = try store.hitSharedPushWindow(token: push.token, limit: ITermProfile.pushesPerWindow,
                                                       windowMs: UInt64(ITermProfile.window.millisecondsClamped))
                    ?? pushWindows.withLock { $0.hit(push.token, now: clock.monotonic()) }
            } catch {
                storageFailed(error)
                return reply(.storageUnavailable)
            }
            guard allowed else {
                metrics.rateLimited.increment()
                return reply(ITermProfile.rateLimited)
            }
            let notification = APNsNotification(environment: registration.sandbox ? .sandbox : .production, deviceToken: push.token,
                                                topic: topic, collapseID: push.notification.collapse, payload: push.notification.payload)
            apns.send(notification) { [self] outcome in
                noteOutcome(outcome, profile: "iterm2")
                let answer = ITermProfile.answer(outcome)
                guard outcome.isTokenPermanent else { return reply(answer) }
                storage.submit(lane: lane) { [self] store in
                    do {
                        try store.deleteITerm(token: push.token)
                        metrics.devices.decrement()
                    } catch {
                        storageFailed(error)
                    }
                    reply(answer)
                }
            }
        }
    }
}
