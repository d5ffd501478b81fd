//! Egress requests: made (at most a few waiting per sandbox, the same host asked twice
//! being one request), listed, and decided once.
//!
//! Migration 0013: a request is made unless the same host waits or the sandbox has 20
//! waiting, and decided once (`UPDATE … WHERE status = 'pending'`).

use sandboxd_core::egress_requests::{EgressRequestRecord, MAX_PENDING_PER_SANDBOX, RequestStatus};
use sqlx::Row as _;
use sqlx::any::AnyRow;

use crate::{Store, StoreError, new_id};

/// Requests `egress_requests` lists at most.
const LISTED: i64 = 200;

/// `SELECT` of every column, then `$tail`.
macro_rules! select_requests {
    ($tail:literal) => {
        concat!(
            "SELECT request_id, organization_id, sandbox_id, host, reason, status, \
             requested_by_user, requested_by_key, created_at, decided_at, decided_by_user, \
             decided_by_key FROM egress_requests ",
            $tail
        )
    };
}

fn record(row: &AnyRow) -> Result<EgressRequestRecord, StoreError> {
    let status: String = row.try_get("status")?;
    Ok(EgressRequestRecord {
        request_id: row.try_get("request_id")?,
        organization_id: row.try_get("organization_id")?,
        sandbox_id: row.try_get("sandbox_id")?,
        host: row.try_get("host")?,
        reason: row.try_get("reason")?,
        status: RequestStatus::parse(&status)
            .ok_or_else(|| StoreError::Corrupt(format!("egress request status {status:?}")))?,
        requested_by_user: row.try_get("requested_by_user")?,
        requested_by_key: row.try_get("requested_by_key")?,
        created_at: row.try_get("created_at")?,
        decided_at: row.try_get("decided_at")?,
        decided_by_user: row.try_get("decided_by_user")?,
        decided_by_key: row.try_get("decided_by_key")?,
    })
}

/// What became of a new request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Asked {
    /// Made now.
    Made(EgressRequestRecord),
    /// The same host was already waiting for this sandbox: that request.
    Waiting(EgressRequestRecord),
    /// The sandbox has as many requests waiting as it may.
    TooMany,
}

impl Store {
    /// Makes a pending request (its id and time set here) unless the same host waits
    /// already or the sandbox has [`MAX_PENDING_PER_SANDBOX`] waiting.
    pub async fn ask_egress(
        &self,
        mut request: EgressRequestRecord,
        now: i64,
    ) -> Result<Asked, StoreError> {
        let mut tx = self.write_tx().await?;
        let waiting = sqlx::query(select_requests!(
            "WHERE sandbox_id = $1 AND status = 'pending'"
        ))
        .bind(&request.sandbox_id)
        .fetch_all(&mut *tx)
        .await?
        .iter()
        .map(record)
        .collect::<Result<Vec<_>, _>>()?;
        if waiting.len() >= MAX_PENDING_PER_SANDBOX
            && !waiting.iter().any(|r| r.host == request.host)
        {
            return Ok(Asked::TooMany);
        }
        if let Some(same) = waiting.into_iter().find(|r| r.host == request.host) {
            return Ok(Asked::Waiting(same));
        }
        request.request_id = new_id()?;
        request.status = RequestStatus::Pending;
        request.created_at = now;
        sqlx::query(
            "INSERT INTO egress_requests (request_id, organization_id, sandbox_id, host, reason, \
             status, requested_by_user, requested_by_key, created_at) \
             VALUES ($1, $2, $3, $4, $5, 'pending', $6, $7, $8)",
        )
        .bind(&request.request_id)
        .bind(&request.organization_id)
        .bind(&request.sandbox_id)
        .bind(&request.host)
        .bind(request.reason.as_deref())
        .bind(&request.requested_by_user)
        .bind(&request.requested_by_key)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(Asked::Made(request))
    }

    /// An organization's request.
    pub async fn egress_request(
        &self,
        organization_id: &str,
        request_id: &str,
    ) -> Result<Option<EgressRequestRecord>, StoreError> {
        let row = sqlx::query(select_requests!(
            "WHERE organization_id = $1 AND request_id = $2"
        ))
        .bind(organization_id)
        .bind(request_id)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(record).transpose()
    }

    /// An organization's requests, newest first (at most 200): the pending ones of
    /// sandboxes still running or starting, or all; of one sandbox when named.
    pub async fn egress_requests(
        &self,
        organization_id: &str,
        pending_only: bool,
        sandbox_id: Option<&str>,
    ) -> Result<Vec<EgressRequestRecord>, StoreError> {
        let rows = sqlx::query(select_requests!(
            "WHERE organization_id = $1 \
             AND ($2 = '' OR sandbox_id = $2) \
             AND ($3 = 0 OR (status = 'pending' AND sandbox_id IN (SELECT sandbox_id FROM \
             sandboxes WHERE status IN ('running', 'creating')))) \
             ORDER BY created_at DESC, request_id DESC LIMIT $4"
        ))
        .bind(organization_id)
        .bind(sandbox_id.unwrap_or(""))
        .bind(i64::from(pending_only))
        .bind(LISTED)
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(record).collect()
    }

    /// Decides a pending request; `None` when it was no longer pending (decided by
    /// someone else meanwhile) or is not the organization's.
    pub async fn decide_egress(
        &self,
        organization_id: &str,
        request_id: &str,
        status: RequestStatus,
        by_user: &str,
        by_key: &str,
        now: i64,
    ) -> Result<Option<EgressRequestRecord>, StoreError> {
        let done = sqlx::query(
            "UPDATE egress_requests SET status = $1, decided_at = $2, decided_by_user = $3, \
             decided_by_key = $4 WHERE organization_id = $5 AND request_id = $6 \
             AND status = 'pending'",
        )
        .bind(status.as_str())
        .bind(now)
        .bind(by_user)
        .bind(by_key)
        .bind(organization_id)
        .bind(request_id)
        .execute(&self.pool)
        .await?;
        if done.rows_affected() == 0 {
            return Ok(None);
        }
        self.egress_request(organization_id, request_id).await
    }

    /// Deletes a sandbox's requests.
    pub(crate) async fn forget_egress_requests(&self, sandbox_id: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM egress_requests WHERE sandbox_id = $1")
            .bind(sandbox_id)
            .execute(&self.pool)
            .await?;
        Ok(())
    }
}
