import TetherSync
import TetherNet
import TetherStore

extension PushServer {
    /// `POST /v1/register` (push.md §2.2): size, Tether's per-IP limit (`PUSH_REGISTER_RATE_LIMIT`,
    /// every request counts), then the fields, then a new registration written on a store lane
    /// before the answer (a registration that was not stored is never handed out).
    func myttyRegister(_ request: HTTPServerRequest, reply: @escaping @Sendable (PushAnswer) -> Void) {
        metrics.registers.increment()
        guard !BodySize.isTooLarge(request.body) else {
            metrics.registersRejected.increment()
            return reply(MyttyProfile.payloadTooLarge)
        }
        if gate.admitRequest(Self.myttyRegisterLimiter, ip: gate.clientIP(request.head, peer: request.peer)) != nil {
            metrics.registersRejected.increment()
            metrics.rateLimited.increment()
            return reply(MyttyProfile.rateLimited)
        }
        let fields: (deviceToken: String, environment: PushEnvironment)
        switch MyttyProfile.registration(from: request.body) {
        case let .failure(refusal):
            metrics.registersRejected.increment()
            diagnostic("push: mytty /v1/register -> \(refusal.answer.status)")
            return reply(refusal.answer)
        case let .success(valid): fields = valid
        }
        let (pushID, relaySecret) = MyttyProfile.newRegistration(random: random)
        let registration = MyttyRegistration(deviceToken: fields.deviceToken, environment: fields.environment, relaySecret: relaySecret)
        let expiresAt = (clock.wall() + MyttyProfile.registrationLifetime).unixMilliseconds
        storage.submit(lane: lane(pushID)) { [self] store in
            do {
                try store.putMytty(registration, pushID: pushID, expiresAt: expiresAt)
                metrics.registersWritten.increment()
                metrics.devices.increment()
                reply(MyttyProfile.registered(pushID: pushID, relaySecret: relaySecret))
            } catch {
                storageFailed(error)
                reply(.storageUnavailable)
            }
        }
    }

    /// `POST /v1/push` (push.md §2.5): step 1 (credentials) again here (a pipelined request
    /// skipped nothing: `screen` ran too), step 2 (size), then steps 3–4 (lookup, signature) on
    /// the registration's lane — or here, when a registration read lately authenticates it
    /// (`RegistrationCache`) — and `sendMytty`.
    func myttyPush(_ request: HTTPServerRequest, reply: @escaping @Sendable (PushAnswer) -> Void) {
        let wall = clock.wall(), now = wall.unixMilliseconds
        guard let credentials = MyttyProfile.credentials(request.head, nowSeconds: UInt64(wall.unixSeconds)) else {
            metrics.pushes.increment()
            metrics.badSecrets.increment()
            return reply(MyttyProfile.unauthorized)
        }
        metrics.pushes.increment()
        guard !BodySize.isTooLarge(request.body) else { return reply(MyttyProfile.payloadTooLarge) }
        let body = request.body
        let topic = configuration.topic
        // A registration read lately: an authentic push is sent from here, no store round trip.
        if let cached = myttyCache.value(for: credentials.pushID, now: clock.monotonic()),
           MyttyProfile.isAuthentic(credentials, body: body, registration: cached) {
            return sendMytty(credentials, body: body, registration: cached, topic: topic, reply: reply)
        }
        storage.submit(lane: lane(credentials.pushID)) { [self] store in
            let registration: MyttyRegistration?
            do {
                registration = try store.mytty(pushID: credentials.pushID, now: now)
            } catch {
                storageFailed(error)
                return reply(.storageUnavailable)
            }
            guard MyttyProfile.isAuthentic(credentials, body: body, registration: registration), let registration else {
                if registration == nil { metrics.unknownTokens.increment() } else { metrics.badSecrets.increment() }
                diagnostic("push: mytty /v1/push -> 401")
                return reply(MyttyProfile.unauthorized)
            }
            myttyCache.store(registration, for: credentials.pushID, now: clock.monotonic())
            sendMytty(credentials, body: body, registration: registration, topic: topic, reply: reply)
        }
    }

    /// Steps 5 and 7 for an authenticated push: the payload, APNs, then the registration renewed
    /// after the answer (at most hourly) or, on a token-permanent failure, deleted before it.
    private func sendMytty(_ credentials: MyttyProfile.Credentials, body: [UInt8], registration: MyttyRegistration, topic: String,
                           reply: @escaping @Sendable (PushAnswer) -> Void) {
        let notification: APNsNotification
        switch MyttyProfile.notification(body: body, registration: registration, topic: topic) {
        case let .failure(refusal): return reply(refusal.answer)
        case let .success(built): notification = built
        }
        let lane = lane(credentials.pushID)
        apns.send(notification) { [self] outcome in
            noteOutcome(outcome, profile: "mytty")
            let answer = MyttyProfile.answer(outcome)
            if case .delivered = outcome {
                reply(answer)
                guard renewals.withLock({ $0.shouldRenew(credentials.pushID, now: clock.monotonic()) }) else { return }
                let renewedUntil = (clock.wall() + MyttyProfile.registrationLifetime).unixMilliseconds
                storage.submit(lane: lane) { [self] store in
                    do { try store.renewMytty(pushID: credentials.pushID, expiresAt: renewedUntil, now: clock.wall().unixMilliseconds) } catch {
                        storageFailed(error)
                    }
                }
            } else if outcome.isTokenPermanent {
                myttyCache.remove(credentials.pushID)
                renewals.withLock { $0.forget(credentials.pushID) }
                storage.submit(lane: lane) { [self] store in
                    do {
                        try store.deleteMytty(pushID: credentials.pushID)
                        metrics.devices.decrement()
                    } catch {
                        storageFailed(error)
                    }
                    reply(answer)
                }
            } else {
                reply(answer)
            }
        }
    }

    /// Counts an APNs outcome and tells the operator when APNs refuses the relay's own setup.
    func noteOutcome(_ outcome: APNsOutcome, profile: String) {
        switch outcome {
        case .delivered:
            metrics.pushesDelivered.increment()
        case let .rejected(status, reason, failureClass, _):
            metrics.apnsErrors.increment()
            diagnostic("push: \(profile) APNs \(status) \(reason ?? "(no reason)") [\(failureClass.rawValue)]")
            if failureClass == .configuration {
                warn(reason ?? "\(status)", "push: APNs refuses the relay's configuration: \(reason ?? "status \(status)") (\(status)); "
                    + "every push fails until APNS_KEY_ID, APNS_TEAM_ID, the key or the topic is fixed")
            }
        case let .unreachable(reason):
            metrics.apnsErrors.increment()
            warn("unreachable", "push: APNs unreachable: \(reason)")
        }
    }
}
