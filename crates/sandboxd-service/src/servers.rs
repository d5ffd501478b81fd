//! `server.*`: remote servers of an organization. Administrators manage them; members
//! see and use the servers on their access list. A server's private key is sealed by
//! the store and goes only to the remote-server contract; its host key is pinned (given,
//! or learned by `server.test` and enforced from then on).
//!
//! Views never connect: health comes from the engine made, capacity as configured or as
//! the engine last reported. A server reached otherwise has its pools dropped, and is
//! reconnected and reconciled at once.

use std::time::Instant;

use sandboxd_core::access::{self, Permission, ServerRegistration};
use sandboxd_core::api::{Resources, ServerTestResult, ServerView};
use sandboxd_core::model::{Principal, Server, ServerChanges};
use sandboxd_core::rfc3339::format_millis as rfc3339;
use sandboxd_core::validate::NewServerSpec;
use serde_json::json;
use tracing::{info, warn};

use super::fleet::spec_of;
use super::{Resource, Service, ServiceError};

const MIB: i64 = 1024 * 1024;

fn resource(server: &Server) -> Resource<'_> {
    Resource {
        kind: "server",
        id: &server.server_id,
        name: Some(&server.name),
    }
}

/// The `server.*` operations. Depends on the fleet (the servers' engines), the warm
/// pools (a server's members go when it changes) and the duties (a reconcile of a
/// server reached again).
#[derive(Debug, Clone)]
pub struct Servers {
    service: Service,
}

impl Servers {
    pub(crate) fn new(service: Service) -> Self {
        Self { service }
    }

    /// Whether `caller` may add a server or point one elsewhere, under the operator's
    /// `[servers] registration`.
    async fn may_register_servers(&self, caller: &Principal) -> Result<(), ServiceError> {
        let registration = self.service.inner.options.server_registration;
        let operator = match registration {
            ServerRegistration::Admins => None,
            ServerRegistration::Operator => self.service.store().operator_organization().await?,
        };
        Ok(access::check_register_server(
            caller,
            registration,
            operator.as_deref(),
        )?)
    }

    /// Adds a server (administrators only). Nothing connects until its host key is
    /// pinned: given here, or learned by `server.test`.
    pub async fn create(
        &self,
        caller: &Principal,
        spec: NewServerSpec,
    ) -> Result<ServerView, ServiceError> {
        self.may_register_servers(caller).await?;
        let connector = self.service.fleet().connector()?;
        connector.check_keys(spec.host_key.as_deref(), Some(&spec.private_key))?;
        connector.check_address(&spec.address)?;
        let server = self
            .service
            .store()
            .insert_server(&caller.organization_id, &spec)
            .await?;
        self.service.access().record(
            &caller.organization_id,
            Some(caller),
            "server.create",
            resource(&server),
            json!({"address": server.address, "port": server.port, "user": server.user, "warmPools": server.warm_pools}),
        )
        .await;
        info!(server_id = %server.server_id, address = %server.address, "server added");
        self.server_view(server).await
    }

    /// The servers the caller may use, by name.
    pub async fn list(&self, caller: &Principal) -> Result<Vec<ServerView>, ServiceError> {
        let servers = self
            .service
            .store()
            .servers(&caller.organization_id)
            .await?;
        let mut views = Vec::with_capacity(servers.len());
        for server in servers {
            if self
                .service
                .access()
                .server_listed(caller, &server.server_id)
                .await?
            {
                views.push(self.server_view(server).await?);
            }
        }
        Ok(views)
    }

    /// One server the caller may use.
    pub async fn one(
        &self,
        caller: &Principal,
        server_id: &str,
    ) -> Result<ServerView, ServiceError> {
        let server = self.service.access().server_for(caller, server_id).await?;
        self.server_view(server).await
    }

    /// Changes a server (administrators only); its connection is made again with the new
    /// settings at its next use.
    pub async fn update(
        &self,
        caller: &Principal,
        server_id: &str,
        changes: ServerChanges,
    ) -> Result<ServerView, ServiceError> {
        self.service
            .access()
            .require(caller, Permission::OrganizationAdmin)?;
        // Pointing a server somewhere else is registering it anew.
        if changes.address.is_some() || changes.port.is_some() {
            self.may_register_servers(caller).await?;
        }
        self.service.fleet().connector()?.check_keys(
            changes.host_key.clone().flatten().as_deref(),
            changes.private_key.as_deref(),
        )?;
        if let Some(address) = &changes.address {
            self.service.fleet().connector()?.check_address(address)?;
        }
        let server = self
            .service
            .store()
            .update_server(&caller.organization_id, server_id, &changes)
            .await?
            .ok_or(ServiceError::NotFound("server"))?;
        // Only a change of how the server is reached makes its connection again.
        let reached_otherwise = changes.address.is_some()
            || changes.port.is_some()
            || changes.user.is_some()
            || changes.private_key.is_some()
            || changes.host_key.is_some()
            || changes.docker_socket.is_some()
            || changes.remote_dir.is_some();
        if reached_otherwise {
            self.reach_again(&server.server_id).await;
        }
        let fields: Vec<&str> = [
            ("name", changes.name.is_some()),
            ("address", changes.address.is_some()),
            ("port", changes.port.is_some()),
            ("user", changes.user.is_some()),
            ("privateKey", changes.private_key.is_some()),
            ("hostKey", changes.host_key.is_some()),
            ("dockerSocket", changes.docker_socket.is_some()),
            ("remoteDir", changes.remote_dir.is_some()),
            ("cpu", changes.cpu_capacity.is_some()),
            ("memoryMb", changes.memory_mb_capacity.is_some()),
            ("warmPools", changes.warm_pools.is_some()),
        ]
        .into_iter()
        .filter_map(|(name, changed)| changed.then_some(name))
        .collect();
        self.service
            .access()
            .record(
                &caller.organization_id,
                Some(caller),
                "server.update",
                resource(&server),
                json!({"changed": fields}),
            )
            .await;
        self.server_view(server).await
    }

    /// A server reached otherwise from now on: its warm members are removed (they are
    /// forwarded over the old connection), its sandboxes' agents are let go here, and in
    /// the background the connection is made again and their agents listened for
    /// again (a reconcile pass of that server). Until an agent is back, its sandbox's
    /// commands take the engine path.
    async fn reach_again(&self, server_id: &str) {
        self.service.pools().drop_server(server_id).await;
        match self.service.store().live_rows_on(Some(server_id)).await {
            Ok(rows) => {
                for row in rows {
                    // Its key and its socket on the server stay for the new connection.
                    self.service.agents().stop_listening(&row.sandbox_id);
                }
            }
            Err(error) => {
                warn!(%server_id, error = %sandboxd_core::error::chain(&error), "could not read a changed server's sandboxes; the next reconcile gives their agents back")
            }
        }
        self.service.fleet().made().forget(server_id);
        let service = self.service.clone();
        let server_id = server_id.to_owned();
        tokio::spawn(async move {
            if let Err(error) = service.duties().reconcile_on(Some(&server_id)).await {
                warn!(%server_id, error = %sandboxd_core::error::chain(&error), "a changed server could not be reached; the next reconcile tries again");
            }
        });
    }

    /// Removes a server (administrators only); refused while sandboxes run on it.
    pub async fn remove(&self, caller: &Principal, server_id: &str) -> Result<(), ServiceError> {
        self.service
            .access()
            .require(caller, Permission::OrganizationAdmin)?;
        let server = self
            .service
            .store()
            .server(&caller.organization_id, server_id)
            .await?
            .ok_or(ServiceError::NotFound("server"))?;
        if !self
            .service
            .store()
            .remove_server(&caller.organization_id, server_id)
            .await?
        {
            return Err(ServiceError::NotFound("server"));
        }
        self.service.pools().drop_server(server_id).await;
        self.service.fleet().made().forget(server_id);
        self.service
            .access()
            .record(
                &caller.organization_id,
                Some(caller),
                "server.remove",
                resource(&server),
                json!({}),
            )
            .await;
        Ok(())
    }

    /// Connects to a server once and asks its engine what it has (administrators
    /// only). With no host key pinned, the key the server presents is learned and
    /// pinned; a pinned one is enforced. A server that cannot be reached is an answer
    /// (`reachable: false` and why), not an error.
    pub async fn test(
        &self,
        caller: &Principal,
        server_id: &str,
    ) -> Result<ServerTestResult, ServiceError> {
        self.service
            .access()
            .require(caller, Permission::OrganizationAdmin)?;
        let server = self.service.access().server_for(caller, server_id).await?;
        let connector = self.service.fleet().connector()?;
        let key = self
            .service
            .store()
            .server_private_key(&server.server_id)
            .await?;
        let started = Instant::now();
        let probed = connector.probe(&spec_of(&server, key)).await;
        let duration_ms = started.elapsed().as_millis() as u64;
        let probe = match probed {
            Ok(probe) => probe,
            Err(error) => {
                // The tenant is told what its own settings did; how the operator's network
                // answered goes to the log only.
                warn!(server_id = %server.server_id, error = %sandboxd_core::error::chain(&error), "a server test failed");
                return Ok(ServerTestResult {
                    reachable: false,
                    host_key: None,
                    host_key_fingerprint: None,
                    host_key_learned: false,
                    api_version: None,
                    cpus: None,
                    memory_mb: None,
                    duration_ms,
                    error: Some(error.to_string()),
                });
            }
        };
        let learned = server.host_key.is_none()
            && self
                .service
                .store()
                .pin_host_key(&server.server_id, &probe.host_key)
                .await?;
        self.service.fleet().made().remember_capacity(
            &server.server_id,
            Resources {
                cpu: probe.cpus as f64,
                memory_mb: probe.memory_bytes / MIB,
            },
        );
        self.service.access().record(
            &caller.organization_id,
            Some(caller),
            "server.test",
            resource(&server),
            json!({"reachable": true, "hostKeyLearned": learned, "hostKeyFingerprint": probe.host_key_fingerprint}),
        )
        .await;
        Ok(ServerTestResult {
            reachable: true,
            host_key: Some(probe.host_key),
            host_key_fingerprint: Some(probe.host_key_fingerprint),
            host_key_learned: learned,
            api_version: Some(probe.api_version),
            cpus: Some(probe.cpus),
            memory_mb: Some(probe.memory_bytes / MIB),
            duration_ms,
            error: None,
        })
    }

    /// What a server is, with its capacity, what is reserved on it and its health
    /// (never connecting for it: a listing does not wait on a server).
    async fn server_view(&self, server: Server) -> Result<ServerView, ServiceError> {
        let (cpu, memory_mb) = self
            .service
            .store()
            .reserved_on(Some(&server.server_id))
            .await?;
        let learned = self.service.fleet().made().capacity(&server.server_id);
        let (capacity, capacity_source) = match (server.cpu_capacity, server.memory_mb_capacity) {
            (Some(cpu), Some(memory_mb)) => (Some(Resources { cpu, memory_mb }), "configured"),
            (cpu, memory) => match learned {
                Some(engine) => (
                    Some(Resources {
                        cpu: cpu.unwrap_or(engine.cpu),
                        memory_mb: memory.unwrap_or(engine.memory_mb),
                    }),
                    if cpu.is_some() || memory.is_some() {
                        "configured"
                    } else {
                        "engine"
                    },
                ),
                None => (None, "unknown"),
            },
        };
        let (health, last_error) = match self.service.fleet().made().engine(&server.server_id) {
            Some(engine) => {
                let (reachability, last) = engine.reachability().await;
                (reachability.as_str().to_owned(), last)
            }
            None => ("idle".to_owned(), None),
        };
        let warm_ready = self.service.pools().ready_on(&server.server_id);
        Ok(ServerView {
            host_key_fingerprint: server
                .host_key
                .as_deref()
                .and_then(|key| self.service.fleet().connector().ok()?.fingerprint(key)),
            server_id: server.server_id,
            name: server.name,
            address: server.address,
            port: server.port,
            user: server.user,
            host_key: server.host_key,
            docker_socket: server.docker_socket,
            remote_dir: server.remote_dir,
            capacity,
            capacity_source: capacity_source.to_owned(),
            reserved: Resources { cpu, memory_mb },
            health,
            last_error,
            warm_ready,
            warm_pools: server.warm_pools,
            created_at: rfc3339(server.created_at),
        })
    }
}
