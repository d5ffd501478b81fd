//! Remote servers of an organization. The private key is sealed (the server id as
//! associated data) and read only to connect; no listing returns it.
//!
//! `pin_host_key` pins a host key only where none is pinned.

use sandboxd_core::model::{Server, ServerChanges};
use sandboxd_core::validate::NewServerSpec;
use std::collections::BTreeMap;

use sqlx::Row as _;
use sqlx::any::AnyRow;

use crate::store::now_ms;
use crate::{Store, StoreError, new_id};

/// `SELECT <every column [`server`] reads> FROM servers <tail>`, as a static string.
macro_rules! select_servers {
    ($tail:literal) => {
        concat!(
            "SELECT server_id, organization_id, name, address, port, ssh_user, host_key, ",
            "docker_socket, remote_dir, cpu_capacity_milli, memory_mb_capacity, warm_pools, ",
            "created_at ",
            "FROM servers ",
            $tail
        )
    };
}

fn server(row: &AnyRow) -> Result<Server, StoreError> {
    let port: i64 = row.try_get("port")?;
    let milli: Option<i64> = row.try_get("cpu_capacity_milli")?;
    let pools: String = row.try_get("warm_pools")?;
    let warm_pools = serde_json::from_str(&pools)
        .map_err(|_| StoreError::Corrupt(format!("the warm pools of a server: {pools}")))?;
    Ok(Server {
        server_id: row.try_get("server_id")?,
        organization_id: row.try_get("organization_id")?,
        name: row.try_get("name")?,
        address: row.try_get("address")?,
        port: u16::try_from(port).map_err(|_| StoreError::Corrupt(format!("port {port}")))?,
        user: row.try_get("ssh_user")?,
        host_key: row.try_get("host_key")?,
        docker_socket: row.try_get("docker_socket")?,
        remote_dir: row.try_get("remote_dir")?,
        cpu_capacity: milli.map(|m| m as f64 / 1000.0),
        memory_mb_capacity: row.try_get("memory_mb_capacity")?,
        warm_pools,
        created_at: row.try_get("created_at")?,
    })
}

fn pools_json(pools: &BTreeMap<String, usize>) -> String {
    serde_json::to_string(pools).unwrap_or_else(|_| "{}".into())
}

fn milli(cpu: f64) -> i64 {
    (cpu * 1000.0).round() as i64
}

fn name_taken(error: sqlx::Error) -> StoreError {
    match &error {
        sqlx::Error::Database(db) if db.is_unique_violation() => {
            StoreError::Conflict("a server with this name exists".into())
        }
        _ => error.into(),
    }
}

impl Store {
    /// Adds a server to an organization.
    pub async fn insert_server(
        &self,
        organization_id: &str,
        new: &NewServerSpec,
    ) -> Result<Server, StoreError> {
        let server_id = format!("srv_{}", &new_id()?[..16]);
        let sealed = self.secrets.seal(&server_id, new.private_key.as_bytes())?;
        let now = now_ms();
        sqlx::query(
            "INSERT INTO servers (server_id, organization_id, name, address, port, ssh_user, \
             private_key, host_key, docker_socket, remote_dir, cpu_capacity_milli, \
             memory_mb_capacity, warm_pools, created_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)",
        )
        .bind(&server_id)
        .bind(organization_id)
        .bind(&new.name)
        .bind(&new.address)
        .bind(i64::from(new.port))
        .bind(&new.user)
        .bind(sealed)
        .bind(&new.host_key)
        .bind(&new.docker_socket)
        .bind(&new.remote_dir)
        .bind(new.cpu.map(milli))
        .bind(new.memory_mb)
        .bind(pools_json(&new.warm_pools))
        .bind(now)
        .execute(&self.pool)
        .await
        .map_err(name_taken)?;
        self.server(organization_id, &server_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt("a server just written is missing".into()))
    }

    /// A server of the organization.
    pub async fn server(
        &self,
        organization_id: &str,
        server_id: &str,
    ) -> Result<Option<Server>, StoreError> {
        let row = sqlx::query(select_servers!(
            "WHERE server_id = $1 AND organization_id = $2"
        ))
        .bind(server_id)
        .bind(organization_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(server).transpose()
    }

    /// A server whatever its organization (for the engines of its sandboxes).
    pub async fn server_by_id(&self, server_id: &str) -> Result<Option<Server>, StoreError> {
        let row = sqlx::query(select_servers!("WHERE server_id = $1"))
            .bind(server_id)
            .fetch_optional(&self.pool)
            .await?;
        row.as_ref().map(server).transpose()
    }

    /// The organization's servers, by name.
    pub async fn servers(&self, organization_id: &str) -> Result<Vec<Server>, StoreError> {
        let rows = sqlx::query(select_servers!("WHERE organization_id = $1 ORDER BY name"))
            .bind(organization_id)
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(server).collect()
    }

    /// Every server of every organization (for the background loops).
    pub async fn all_servers(&self) -> Result<Vec<Server>, StoreError> {
        let rows = sqlx::query(select_servers!("ORDER BY created_at"))
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(server).collect()
    }

    /// The server's private key, opened.
    pub async fn server_private_key(&self, server_id: &str) -> Result<String, StoreError> {
        let row = sqlx::query("SELECT private_key FROM servers WHERE server_id = $1")
            .bind(server_id)
            .fetch_optional(&self.pool)
            .await?
            .ok_or_else(|| StoreError::Unknown(format!("server {server_id}")))?;
        let sealed: Vec<u8> = row.try_get("private_key")?;
        let opened = self.secrets.open(server_id, &sealed)?;
        String::from_utf8(opened).map_err(|_| StoreError::Corrupt("a private key".into()))
    }

    /// Changes a server; `None` when it is not the organization's.
    pub async fn update_server(
        &self,
        organization_id: &str,
        server_id: &str,
        changes: &ServerChanges,
    ) -> Result<Option<Server>, StoreError> {
        let mut tx = self.write_tx().await?;
        let Some(row) = sqlx::query(select_servers!(
            "WHERE server_id = $1 AND organization_id = $2"
        ))
        .bind(server_id)
        .bind(organization_id)
        .fetch_optional(&mut *tx)
        .await?
        else {
            return Ok(None);
        };
        let old = server(&row)?;
        let sealed = match &changes.private_key {
            Some(key) => Some(self.secrets.seal(server_id, key.as_bytes())?),
            None => None,
        };
        let host_key = changes.host_key.clone().unwrap_or(old.host_key);
        let cpu = changes.cpu_capacity.unwrap_or(old.cpu_capacity);
        let memory = changes.memory_mb_capacity.unwrap_or(old.memory_mb_capacity);
        sqlx::query(
            "UPDATE servers SET name = $1, address = $2, port = $3, ssh_user = $4, \
             host_key = $5, docker_socket = $6, remote_dir = $7, cpu_capacity_milli = $8, \
             memory_mb_capacity = $9, private_key = COALESCE($10, private_key), \
             warm_pools = $11 WHERE server_id = $12",
        )
        .bind(changes.name.as_ref().unwrap_or(&old.name))
        .bind(changes.address.as_ref().unwrap_or(&old.address))
        .bind(i64::from(changes.port.unwrap_or(old.port)))
        .bind(changes.user.as_ref().unwrap_or(&old.user))
        .bind(host_key)
        .bind(changes.docker_socket.as_ref().unwrap_or(&old.docker_socket))
        .bind(changes.remote_dir.as_ref().unwrap_or(&old.remote_dir))
        .bind(cpu.map(milli))
        .bind(memory)
        .bind(sealed)
        .bind(pools_json(
            changes.warm_pools.as_ref().unwrap_or(&old.warm_pools),
        ))
        .bind(server_id)
        .execute(&mut *tx)
        .await
        .map_err(name_taken)?;
        tx.commit().await?;
        self.server(organization_id, server_id).await
    }

    /// Pins a host key learned by a test, unless one was pinned meanwhile; returns
    /// whether it was pinned.
    pub async fn pin_host_key(&self, server_id: &str, host_key: &str) -> Result<bool, StoreError> {
        let done = sqlx::query(
            "UPDATE servers SET host_key = $1 WHERE server_id = $2 AND host_key IS NULL",
        )
        .bind(host_key)
        .bind(server_id)
        .execute(&self.pool)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    /// Removes a server; refused while sandboxes that are not killed live on it, or
    /// volumes or snapshots do (they could no longer be reached, nor removed).
    pub async fn remove_server(
        &self,
        organization_id: &str,
        server_id: &str,
    ) -> Result<bool, StoreError> {
        let mut tx = self.write_tx().await?;
        let live = sqlx::query(
            "SELECT COUNT(*) AS live FROM sandboxes WHERE server_id = $1 \
             AND status IN ('creating', 'running', 'paused')",
        )
        .bind(server_id)
        .fetch_one(&mut *tx)
        .await?;
        let live: i64 = live.try_get("live")?;
        if live > 0 {
            return Err(StoreError::Conflict(format!(
                "{live} sandboxes still run on this server; kill them first"
            )));
        }
        let kept = sqlx::query(
            "SELECT (SELECT COUNT(*) FROM volumes WHERE server_id = $1) AS volumes, \
             (SELECT COUNT(*) FROM snapshots WHERE server_id = $1) AS snapshots",
        )
        .bind(server_id)
        .fetch_one(&mut *tx)
        .await?;
        let (volumes, snapshots): (i64, i64) =
            (kept.try_get("volumes")?, kept.try_get("snapshots")?);
        if volumes + snapshots > 0 {
            return Err(StoreError::Conflict(format!(
                "{volumes} volumes and {snapshots} snapshots live on this server; remove them first"
            )));
        }
        let done = sqlx::query("DELETE FROM servers WHERE server_id = $1 AND organization_id = $2")
            .bind(server_id)
            .bind(organization_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(done.rows_affected() == 1)
    }

    /// CPU and memory (MiB) reserved on a server (`None`: the local engine) by its
    /// sandboxes that are creating or running, and the memory of its paused ones.
    pub async fn reserved_on(&self, server_id: Option<&str>) -> Result<(f64, i64), StoreError> {
        let row = sqlx::query(
            "SELECT CAST(COALESCE(SUM(CASE WHEN status = 'paused' THEN 0 ELSE cpu END), 0) AS DOUBLE PRECISION) AS cpu, \
             CAST(COALESCE(SUM(memory_mb), 0) AS BIGINT) AS memory \
             FROM sandboxes WHERE status IN ('creating', 'running', 'paused') \
             AND COALESCE(server_id, '') = $1",
        )
        .bind(server_id.unwrap_or(""))
        .fetch_one(&self.pool)
        .await?;
        Ok((row.try_get("cpu")?, row.try_get("memory")?))
    }
}
