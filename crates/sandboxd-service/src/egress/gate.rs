//! One `allowlist` sandbox's way out: the connections its programs make to the proxy,
//! and what each may reach. The sandbox's list is read as it stands for every
//! connection (the store answers from a row at most a second old, and at once after a
//! change made here), so a `setEgress` holds for the next connection.
//!
//! `Gate::next` is the next connection a program made to the proxy (the channel
//! contract's `accept_egress`). `Gate::connect` takes the host named, never an address
//! (`sandboxd_core::egress::name_of`), resolves it (`dial.rs`), and drops the special
//! ranges and sandboxd's own addresses unless allowed (`egress::reachable`, `own.rs`).
//! `Gate::refuse` records, as the gate's own, a refusal the proxy made of what a
//! connection carried (a `Host`, a TLS name). Every decision is counted, logged within
//! the sandbox's allowance (`sandboxd_core::egress_log::Allowance`) and, for refusals,
//! audited within another; the connection made is wrapped by `counted.rs`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use sandboxd_contracts::{ByteStream, ChannelError, SandboxChannel};
use sandboxd_core::egress::{self, Policy, Refusal};
use sandboxd_core::egress_credentials::EgressCredential;
use sandboxd_core::egress_log::{Allowance, Decision, EgressRecord, shown_host};
use sandboxd_core::model::{NetworkMode, Sandbox, SandboxStatus};
use serde_json::json;

use super::counted::Counted;
use super::dial;
use crate::{Resource, Service, now_ms};

/// Counter of egress decisions (`decision` = `allowed` | `refused` | `failed`; `reason`
/// the kind of refusal or failure, empty when allowed).
pub const EGRESS_DECISIONS: &str = "sandboxd_egress_decisions_total";

/// Log entries a sandbox may write: a burst, then this many a second; the decisions
/// over it are counted in the next entry written (`unlogged`) and in the metrics.
const LOG_BURST: f64 = 200.0;
const LOG_PER_SECOND: f64 = 50.0;
/// Refusals a sandbox may write to the audit log: a few at once, then one every ten
/// seconds; each entry says how many were refused since the last.
const AUDIT_BURST: f64 = 3.0;
const AUDIT_PER_SECOND: f64 = 0.1;

/// A sandbox's proxy connections and what they may reach. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Gate {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    service: Service,
    /// The sandbox's row when its gate opened (who it belongs to, its name).
    sandbox: Sandbox,
    channel: Arc<dyn SandboxChannel>,
    allowances: Mutex<Allowances>,
    /// Headers added to its requests to their hosts (their values never logged).
    credentials: Vec<EgressCredential>,
}

#[derive(Debug)]
struct Allowances {
    log: Allowance,
    audit: Allowance,
}

/// A connection made for the sandbox, and the address it went to. Its log entry is
/// completed when it is dropped.
pub struct Upstream {
    pub stream: Box<dyn ByteStream>,
    pub address: SocketAddr,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Upstream")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

/// Why no connection was made for the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EgressError {
    /// The policy or the address rules refuse it.
    #[error("{0}")]
    Refused(Refusal),
    /// Allowed, but nothing answered.
    #[error("cannot connect: {0}")]
    Unreachable(String),
    /// The sandbox no longer runs in `allowlist` mode (killed, or its row is gone).
    #[error("the sandbox is not running")]
    Gone,
}

impl EgressError {
    fn decision(&self) -> (Decision, &'static str) {
        match self {
            Self::Refused(refusal) => (Decision::Refused, refusal.code()),
            Self::Unreachable(_) => (Decision::Failed, "unreachable"),
            Self::Gone => (Decision::Refused, "not_running"),
        }
    }
}

impl Gate {
    pub(super) fn new(
        service: Service,
        sandbox: Sandbox,
        channel: Arc<dyn SandboxChannel>,
        credentials: Vec<EgressCredential>,
    ) -> Self {
        let now = now_ms();
        Self {
            inner: Arc::new(Inner {
                service,
                sandbox,
                channel,
                allowances: Mutex::new(Allowances {
                    log: Allowance::new(LOG_PER_SECOND, LOG_BURST, now),
                    audit: Allowance::new(AUDIT_PER_SECOND, AUDIT_BURST, now),
                }),
                credentials,
            }),
        }
    }

    pub fn sandbox_id(&self) -> &str {
        &self.inner.sandbox.sandbox_id
    }

    /// The headers (name, value) sandboxd adds to the sandbox's requests to `host` (a
    /// name as the program gave it), speaking HTTPS to the host; none for most hosts.
    pub fn credentials_for(&self, host: &str) -> Vec<(String, String)> {
        let Ok(name) = egress::name_of(host) else {
            return Vec::new();
        };
        self.inner
            .credentials
            .iter()
            .filter(|c| c.host == name)
            .map(|c| (c.header.clone(), c.value.clone()))
            .collect()
    }

    /// The next connection a program in the sandbox makes to the proxy, once one
    /// arrives; an error once the agent's connection is gone (the gate is done).
    pub async fn next(&self) -> Result<Box<dyn ByteStream>, ChannelError> {
        self.inner.channel.accept_egress().await
    }

    /// A connection to `host` on `port` for the sandbox, if its list allows the host
    /// (named, never an address) and the host resolves to an address sandboxes may
    /// reach; made to that address. Every decision is counted and logged (within the
    /// sandbox's allowance), refusals also audited (within theirs).
    pub async fn connect(&self, host: &str, port: u16) -> Result<Upstream, EgressError> {
        let at = now_ms();
        let decided = self.decide(host, port).await;
        self.settle(host, port, at, decided).await
    }

    /// Records a refusal the proxy made itself, of what a request or a tunnel carried
    /// (a `Host` or a TLS name other than the one allowed): counted, logged and audited
    /// as the gate's own.
    pub async fn refuse(&self, host: &str, port: u16, why: Refusal) {
        let _ = self
            .settle(host, port, now_ms(), Err(EgressError::Refused(why)))
            .await;
    }

    /// Counts, logs and audits a decision; the connection, counted as it carries.
    async fn settle(
        &self,
        host: &str,
        port: u16,
        at: i64,
        decided: Result<Upstream, EgressError>,
    ) -> Result<Upstream, EgressError> {
        let (decision, code) = match &decided {
            Ok(_) => (Decision::Allowed, ""),
            Err(error) => error.decision(),
        };
        metrics::counter!(EGRESS_DECISIONS, "decision" => decision.as_str(), "reason" => code)
            .increment(1);
        let sandbox_id = self.sandbox_id();
        match &decided {
            Ok(upstream) => tracing::debug!(
                %sandbox_id, host, port, address = %upstream.address, "egress allowed"
            ),
            Err(why) => tracing::debug!(%sandbox_id, host, port, %why, "egress {decision}"),
        }
        let (logged, audited) = {
            let mut allowances = self
                .inner
                .allowances
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            let audited = match decided {
                Err(EgressError::Refused(_)) => allowances.audit.take(at),
                _ => None,
            };
            (allowances.log.take(at), audited)
        };
        let entry = logged.and_then(|unlogged| {
            Some(EgressRecord {
                entry_id: sandboxd_store::new_id().ok()?,
                sandbox_id: sandbox_id.to_owned(),
                position: String::new(),
                at,
                host: egress::name_of(host).unwrap_or_else(|_| shown_host(host)),
                port,
                decision,
                reason: decided.as_ref().err().map(ToString::to_string),
                address: decided.as_ref().ok().map(|u| u.address.to_string()),
                bytes_out: 0,
                bytes_in: 0,
                ended_at: None,
                unlogged,
            })
        });
        if let Some(entry) = &entry {
            self.inner
                .service
                .inner
                .egress_log
                .record(&self.inner.sandbox.organization_id, entry.clone());
        }
        if let (Some(refused_before), Err(why)) = (audited, &decided) {
            self.audit_refusal(host, port, why, refused_before).await;
        }
        let upstream = decided?;
        Ok(Upstream {
            stream: Box::new(Counted::new(
                upstream.stream,
                self.inner.service.clone(),
                self.inner.sandbox.organization_id.clone(),
                entry,
            )),
            address: upstream.address,
        })
    }

    async fn audit_refusal(&self, host: &str, port: u16, why: &EgressError, refused_before: u64) {
        let sandbox = &self.inner.sandbox;
        self.inner
            .service
            .access()
            .record(
                &sandbox.organization_id,
                None,
                "sandbox.egressRefused",
                Resource::sandbox(sandbox),
                json!({
                    "host": shown_host(host),
                    "port": port,
                    "reason": why.to_string(),
                    "refusedSinceLastEntry": refused_before,
                }),
            )
            .await;
    }

    async fn decide(&self, host: &str, port: u16) -> Result<Upstream, EgressError> {
        let name = egress::name_of(host).map_err(EgressError::Refused)?;
        let (policy, server_id) = self.policy().await?;
        if !policy.permits(&name, port) {
            return Err(EgressError::Refused(Refusal::NotAllowed));
        }
        // A sandbox on a remote server: its traffic leaves from that server, never from
        // this one's network (the name is resolved and checked here all the same).
        let dialer = match &server_id {
            Some(server_id) => Some(
                self.inner
                    .service
                    .fleet()
                    .dialer_of(server_id)
                    .await
                    .map_err(|error| EgressError::Unreachable(error.to_string()))?,
            ),
            None => None,
        };
        let operator = &self.inner.service.inner.options.egress;
        let own = self
            .inner
            .service
            .inner
            .own_host
            .current(&self.inner.service)
            .await;
        let addresses = dial::resolve(&name, port, operator, &own)
            .await
            .map_err(EgressError::Refused)?;
        let (stream, address) = dial::connect(&addresses, port, dialer.as_deref())
            .await
            .map_err(EgressError::Unreachable)?;
        Ok(Upstream { stream, address })
    }

    /// The sandbox's list as it stands, and the remote server it runs on.
    async fn policy(&self) -> Result<(Policy, Option<String>), EgressError> {
        let row = self
            .inner
            .service
            .store()
            .sandbox(self.sandbox_id())
            .await
            .map_err(|error| EgressError::Unreachable(format!("cannot read the sandbox: {error}")))?
            .ok_or(EgressError::Gone)?;
        if row.network_mode != NetworkMode::Allowlist || row.status != SandboxStatus::Running {
            return Err(EgressError::Gone);
        }
        // A list the store kept was checked when it was set; an entry that no longer
        // reads allows nothing.
        let policy = Policy::parse(&row.egress).unwrap_or_default();
        Ok((policy, row.server_id))
    }
}
