//! The ports of a running sandbox: connections to `127.0.0.1:<port>` inside it, carried
//! by its agent (so they work for `isolated` sandboxes, which have no interface, and on
//! remote servers, over the agent's connection), and exposures, which let a port be
//! reached without a key (by anyone, or with a signed link) for a while. A part of the
//! sandbox service; what reaches a port (previews, forwarding) is built on it.
//!
//! Opening a connection is activity for the idle timeout, and so are the bytes it carries
//! (`traffic.rs`); the operator's `port_traffic_is_activity = false` turns both off.
//! Exposures (`expose`, `exposed_ports`, `unexpose`) are audited. `admit` says who a
//! request to a port acts as: the key that exposed it, as that key stands now, for a
//! public port or a valid link, else the request's own caller
//! (`sandboxd_core::ports::admit`); `admit_e2b` the same on the E2B domain, by E2B's
//! rules.

use std::time::Duration;

use sandboxd_contracts::{ByteStream, ChannelError, RefusalKind};
use sandboxd_core::access::SandboxNeed;
use sandboxd_core::model::{NotRunning, Principal, SandboxStatus};
use sandboxd_core::ports::{self as rules, Credential, Entry, Exposure};
use sandboxd_core::validate::ExposePort;
use serde_json::json;

use crate::access::Resource;
use crate::executor::NEEDS_AGENT;
use crate::{Service, ServiceError, now_ms};

/// Connections to the ports of sandboxes, and their exposures.
#[derive(Debug, Clone)]
pub struct Ports {
    service: Service,
}

/// An exposure with its signed link's token (`None` for a public port, which needs none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exposed {
    pub exposure: Exposure,
    pub link: Option<String>,
}

/// A signed link's token as a request brings it.
#[derive(Debug, Clone, Copy)]
pub struct Link<'a> {
    pub token: &'a str,
    /// In the address (a link being opened), not in the cookie a link left: a stale
    /// one is refused, where a stale cookie is only ignored.
    pub opened: bool,
}

/// Who a request to a port acts as.
#[derive(Debug, Clone)]
pub struct Admitted {
    pub principal: Principal,
    /// It acts for the key that exposed the port (a public port or a link), not for
    /// its own key.
    pub as_exposer: bool,
    /// A link opened with this request, valid until then (epoch ms): the browser keeps
    /// it as a cookie.
    pub link_until: Option<i64>,
    /// It entered by a link's cookie alone (not a public port, a key or a link in the
    /// address): what a browser sends whoever made the request, so its origin matters.
    pub by_kept_link: bool,
    /// The exposure it entered by (its nonce), when it acts as the exposer.
    exposure: Option<String>,
}

/// How often a connection that entered by an exposure checks that it still holds.
const RECHECK: Duration = Duration::from_secs(1);

impl Ports {
    pub(crate) fn new(service: Service) -> Self {
        Self { service }
    }

    /// A connection to `port` inside the sandbox, for `caller` (who must be able to use
    /// it). Opening one and the bytes it carries count as activity for the sandbox's
    /// idle timeout, unless the operator says they do not.
    #[tracing::instrument(skip_all, fields(%sandbox_id, port))]
    pub async fn connect(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        port: u16,
    ) -> Result<Box<dyn ByteStream>, ServiceError> {
        if port == 0 {
            return Err(ServiceError::Refused(
                "port must be between 1 and 65535".into(),
            ));
        }
        let sandbox = self
            .service
            .access()
            .sandbox_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        let executor = self.service.executor(&sandbox).await?;
        let agent = executor.agent_only()?;
        if self.service.inner.options.port_traffic_ignored {
            return agent.open_port(port).await.map_err(port_error);
        }
        // The activity is recorded while the agent dials, not after.
        let store = self.service.store();
        let (touched, opened) =
            tokio::join!(store.touch(sandbox_id, now_ms()), agent.open_port(port));
        if let Err(error) = touched {
            tracing::warn!(%sandbox_id, error = %sandboxd_core::error::chain(&error), "could not record the sandbox's activity");
        }
        let stream = opened.map_err(port_error)?;
        let every = crate::traffic::every(sandbox.timeout_ms);
        Ok(Box::new(crate::traffic::Traffic::new(
            stream,
            store.clone(),
            sandbox_id,
            every,
        )))
    }

    /// Whether `caller` may reach the sandbox's ports now (it may use the sandbox, which
    /// runs): what a request needs before it goes over a connection to a port that an
    /// earlier request opened.
    pub async fn may_reach(
        &self,
        caller: &Principal,
        sandbox_id: &str,
    ) -> Result<(), ServiceError> {
        let sandbox = self
            .service
            .access()
            .sandbox_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        self.service.wake(&sandbox).await?;
        Ok(())
    }

    /// Who a request to a port of a sandbox acts as: anyone on a public port and the
    /// holder of a valid link act as the key that exposed it (as that key stands now);
    /// otherwise the request's own caller. Refused (401) without any of these, or with
    /// an opened link that is stale.
    pub async fn admit(
        &self,
        sandbox_id: &str,
        port: u16,
        caller: Option<&Principal>,
        link: Option<Link<'_>>,
    ) -> Result<Admitted, ServiceError> {
        let store = self.service.store();
        let exposure = store.exposure(sandbox_id, port, now_ms()).await?;
        let valid = |link: &Link<'_>| {
            exposure
                .as_ref()
                .is_some_and(|e| store.link_valid(e, link.token))
        };
        let credential = match link {
            Some(link) if valid(&link) => Credential::Link { valid: true },
            Some(link) if link.opened => Credential::Link { valid: false },
            _ if caller.is_some() => Credential::Caller,
            _ => Credential::Nothing,
        };
        let live_public = exposure.as_ref().is_some_and(|e| e.public);
        let entry = rules::admit(live_public, &credential)
            .map_err(|kept| ServiceError::Unauthenticated(kept.to_string()))?;
        match (entry, caller, exposure) {
            (Entry::AsCaller, Some(caller), _) => Ok(Admitted {
                principal: caller.clone(),
                as_exposer: false,
                link_until: None,
                by_kept_link: false,
                exposure: None,
            }),
            (Entry::AsExposer, _, Some(exposure)) => {
                let principal =
                    store
                        .principal_of_key(&exposure.key_id)
                        .await?
                        .ok_or_else(|| {
                            ServiceError::Unauthenticated(
                                "the key that exposed this port is no longer valid".into(),
                            )
                        })?;
                let opened = link.is_some_and(|l| l.opened);
                Ok(Admitted {
                    principal,
                    as_exposer: true,
                    link_until: (opened && credential == Credential::Link { valid: true })
                        .then_some(exposure.expires_at),
                    by_kept_link: !opened
                        && !live_public
                        && credential == Credential::Link { valid: true },
                    exposure: Some(exposure.nonce),
                })
            }
            _ => Err(ServiceError::Unauthenticated(
                rules::Kept::NoCredential.to_string(),
            )),
        }
    }

    /// Who a request to a port of a sandbox on the E2B domain acts as
    /// (`sandboxd_core::e2b::ports`), with the `Host` its app is to see: the caller its
    /// traffic token or key names; else, when the sandbox was created through E2B's API
    /// with public ports, the key that created it, as that key stands now (on the
    /// preview's own rate limit); else refused (403).
    pub async fn admit_e2b(
        &self,
        sandbox_id: &str,
        port: u16,
        caller: Option<&Principal>,
    ) -> Result<(Admitted, Option<String>), ServiceError> {
        use sandboxd_core::e2b::ports::{self as e2b, Entry as E2bEntry};
        let kept = self.service.store().e2b_ports(sandbox_id).await?;
        let mask = kept
            .as_ref()
            .and_then(|(_, settings)| settings.mask_host.as_deref())
            .map(|mask| e2b::masked_host(mask, port));
        let entry = e2b::who_enters(kept.as_ref().map(|(_, s)| s), caller.is_some());
        let (principal, as_exposer) = match (entry, caller, kept) {
            (E2bEntry::WithToken, Some(caller), _) => (caller.clone(), false),
            (E2bEntry::AsPublic, _, Some((key_id, _))) => {
                let maker = self.service.store().principal_of_key(&key_id).await?;
                (maker.ok_or(ServiceError::NotFound("sandbox"))?, true)
            }
            _ => {
                return Err(ServiceError::Forbidden(format!(
                    "the sandbox's ports need its traffic access token in {}",
                    e2b::TRAFFIC_TOKEN_HEADER
                )));
            }
        };
        let admitted = Admitted {
            principal,
            as_exposer,
            link_until: None,
            by_kept_link: false,
            exposure: None,
        };
        Ok((admitted, mask))
    }

    /// Resolves once what let `admitted` in no longer holds, checked every second: for a
    /// request that acts as the port's exposer, the exposure ended, was replaced or
    /// expired, or the key that made it is no longer valid; for a caller's own key (or
    /// the key its session was opened with), the key is no longer valid or no longer
    /// reaches the sandbox. What a connection that outlives its request (a WebSocket) is
    /// closed by.
    pub fn withdrawn(
        &self,
        sandbox_id: &str,
        port: u16,
        admitted: &Admitted,
    ) -> impl Future<Output = ()> + Send + 'static {
        let service = self.service.clone();
        let store = self.service.store().clone();
        let sandbox_id = sandbox_id.to_owned();
        let key_id = admitted.principal.key_id.clone();
        let nonce = admitted.exposure.clone();
        async move {
            let Some(nonce) = nonce else {
                return caller_withdrawn(&service, &sandbox_id, &key_id).await;
            };
            loop {
                tokio::time::sleep(RECHECK).await;
                let exposure = store.exposure(&sandbox_id, port, now_ms()).await;
                let held = match exposure {
                    Ok(Some(exposure)) if exposure.nonce == nonce => {
                        // A store that does not answer ends nothing.
                        !matches!(store.principal_of_key(&key_id).await, Ok(None))
                    }
                    Ok(_) => false,
                    Err(_) => true,
                };
                if !held {
                    return;
                }
            }
        }
    }

    /// Exposes a port of a running sandbox for `ttl` (never past the caller's key),
    /// publicly or behind a signed link; exposing it again replaces the earlier
    /// exposure and ends its links. Recorded in the audit log.
    #[tracing::instrument(skip_all, fields(sandbox_id = %cmd.sandbox_id, port = cmd.port))]
    pub async fn expose(
        &self,
        caller: &Principal,
        cmd: ExposePort,
    ) -> Result<Exposed, ServiceError> {
        let sandbox = self
            .service
            .access()
            .sandbox_for(caller, &cmd.sandbox_id, SandboxNeed::Use)
            .await?;
        self.service.wake(&sandbox).await?;
        let now = now_ms();
        let exposure = Exposure {
            sandbox_id: sandbox.sandbox_id.clone(),
            port: cmd.port,
            public: cmd.public,
            nonce: sandboxd_store::new_id()?,
            key_id: caller.key_id.clone(),
            created_at: now,
            expires_at: rules::expires_at(now, cmd.ttl_ms, caller.key_expires_at),
        };
        let store = self.service.store();
        if !store.expose_port(&exposure, now).await? {
            return Err(NotRunning(SandboxStatus::Killed).into());
        }
        self.service
            .access()
            .record(
                &sandbox.organization_id,
                Some(caller),
                "sandbox.exposePort",
                Resource::sandbox(&sandbox),
                json!({"port": cmd.port, "public": cmd.public, "expiresAt": exposure.expires_at}),
            )
            .await;
        Ok(self.exposed(exposure))
    }

    /// The live exposures of a sandbox, with their links.
    pub async fn exposed_ports(
        &self,
        caller: &Principal,
        sandbox_id: &str,
    ) -> Result<Vec<Exposed>, ServiceError> {
        let sandbox = self
            .service
            .access()
            .sandbox_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        let exposures = self
            .service
            .store()
            .exposures(&sandbox.sandbox_id, now_ms())
            .await?;
        Ok(exposures.into_iter().map(|e| self.exposed(e)).collect())
    }

    /// Ends a port's exposure: its links and public access are gone at once (a key
    /// still reaches the port). Whether it was exposed; recorded when it was.
    pub async fn unexpose(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        port: u16,
    ) -> Result<bool, ServiceError> {
        let sandbox = self
            .service
            .access()
            .sandbox_for(caller, sandbox_id, SandboxNeed::Use)
            .await?;
        let removed = self
            .service
            .store()
            .unexpose_port(&sandbox.sandbox_id, port)
            .await?;
        if removed {
            self.service
                .access()
                .record(
                    &sandbox.organization_id,
                    Some(caller),
                    "sandbox.unexposePort",
                    Resource::sandbox(&sandbox),
                    json!({"port": port}),
                )
                .await;
        }
        Ok(removed)
    }

    fn exposed(&self, exposure: Exposure) -> Exposed {
        let link = (!exposure.public).then(|| self.service.store().link_token(&exposure));
        Exposed { exposure, link }
    }
}

fn port_error(error: ChannelError) -> ServiceError {
    match error {
        ChannelError::Refused(refusal) => match refusal.kind {
            RefusalKind::Unreachable => ServiceError::PortUnreachable(refusal.message),
            RefusalKind::Limit => ServiceError::Unavailable(refusal.message),
            _ => ServiceError::Refused(refusal.message),
        },
        ChannelError::NotSent | ChannelError::NeedsAgent => {
            ServiceError::Unavailable(NEEDS_AGENT.into())
        }
        lost => ServiceError::Agent(Box::new(lost)),
    }
}

/// Resolves once the key `key_id` is no longer valid (revoked, expired, its member
/// removed) or no longer reaches the sandbox, checked every second; a store that does
/// not answer ends nothing.
async fn caller_withdrawn(service: &Service, sandbox_id: &str, key_id: &str) {
    loop {
        tokio::time::sleep(RECHECK).await;
        let principal = match service.store().principal_of_key(key_id).await {
            Ok(Some(principal)) => principal,
            Ok(None) => return,
            Err(_) => continue,
        };
        if let Err(ServiceError::NotFound(_) | ServiceError::Forbidden(_)) = service
            .access()
            .sandbox_for(&principal, sandbox_id, SandboxNeed::Use)
            .await
        {
            return;
        }
    }
}
