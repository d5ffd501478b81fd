//! Two replicas on one PostgreSQL database, each with its own caches and duties: what
//! one commits reaches the other's caches through the change feed well before their own
//! time limits (1 s for rows, 2 s for keys), and one replica at a time holds a duty.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::{Duration, Instant};

use common::{TestDb, sandbox};
use sandboxd_core::model::{MemberChanges, Role, SandboxStatus};
use sandboxd_core::quotas::Quotas;
use sandboxd_store::{KeySpec, Store};
use sqlx::Connection as _;

/// What "at once" is held to here: well under the caches' own limits, so that a feed
/// that did not work fails the tests.
const NOTICE_BOUND: Duration = Duration::from_millis(300);

/// Polls `seen` until it holds; the time it took, or a failure past `NOTICE_BOUND`.
async fn within_bound<F, Fut>(what: &str, mut seen: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !seen().await {
        assert!(
            started.elapsed() < NOTICE_BOUND,
            "{what}: not seen within {NOTICE_BOUND:?}"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    started.elapsed()
}

/// Two replicas once both caches are on (the feed is listening).
async fn two_replicas(db: &TestDb) -> (Store, Store) {
    let (a, b) = (db.open().await, db.open().await);
    for store in [&a, &b] {
        let started = Instant::now();
        while !store.caches_on() {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "feed never listened"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    (a, b)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_row_written_through_one_replica_is_read_fresh_by_the_other() {
    let db = TestDb::postgres().await;
    let (a, b) = two_replicas(&db).await;
    let boot = a.bootstrap(None).await.unwrap().unwrap();
    let owner = a
        .authenticate(boot.generated_key.as_deref().unwrap())
        .await
        .unwrap()
        .unwrap();
    let row = sandbox(
        &boot.organization_id,
        &boot.project_id,
        &boot.environment_id,
        1,
    );
    let id = row.sandbox_id.clone();
    a.insert_sandbox(&row, None, &owner.user_id, &Quotas::default())
        .await
        .unwrap();
    a.mark_running(&id, "c1", None, 1_000).await.unwrap();
    let mut delays = Vec::new();
    for step in 0..10_i64 {
        // B holds the row in its cache...
        let before = b.sandbox(&id).await.unwrap().unwrap();
        assert_eq!(b.sandbox(&id).await.unwrap().unwrap(), before);
        // ...A writes it...
        let now = 10_000 + step * 1_000;
        a.touch(&id, now).await.unwrap();
        // ...and B's next reads see the write within the bound.
        delays.push(
            within_bound("a touch", || async {
                b.sandbox(&id).await.unwrap().unwrap().last_activity_at == Some(now)
            })
            .await,
        );
    }
    a.mark_killed(&id, 99_000).await.unwrap();
    delays.push(
        within_bound("a kill", || async {
            b.sandbox(&id).await.unwrap().unwrap().status == SandboxStatus::Killed
        })
        .await,
    );
    delays.sort();
    println!(
        "row change seen by the other replica: median {:?}, max {:?}",
        delays[delays.len() / 2],
        delays[delays.len() - 1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_revoked_through_one_replica_is_refused_by_the_other() {
    let db = TestDb::postgres().await;
    let (a, b) = two_replicas(&db).await;
    let boot = a.bootstrap(None).await.unwrap().unwrap();
    let org = boot.organization_id.clone();
    let member = a
        .create_member(
            &org,
            "dev",
            &MemberChanges {
                role: Some(Role::Admin),
                ..MemberChanges::default()
            },
        )
        .await
        .unwrap();
    let mut delays = Vec::new();
    for round in 0..10 {
        let key = a
            .create_key(
                &org,
                &member.user_id,
                KeySpec::named(&format!("k{round}")),
                &Quotas::default(),
            )
            .await
            .unwrap();
        // B has seen (and cached) the key.
        for _ in 0..3 {
            assert!(b.authenticate(&key.secret).await.unwrap().is_some());
        }
        a.revoke_key(&org, &key.record.key_id)
            .await
            .unwrap()
            .unwrap();
        delays.push(
            within_bound("a revocation", || async {
                b.authenticate(&key.secret).await.unwrap().is_none()
            })
            .await,
        );
    }
    // A role narrowed through A is what B answers next.
    let key = a
        .create_key(
            &org,
            &member.user_id,
            KeySpec::named("last"),
            &Quotas::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        b.authenticate(&key.secret).await.unwrap().map(|p| p.role),
        Some(Role::Admin)
    );
    let changes = MemberChanges {
        role: Some(Role::Member),
        ..MemberChanges::default()
    };
    a.update_member(&org, &member.user_id, &changes)
        .await
        .unwrap()
        .unwrap();
    delays.push(
        within_bound("a narrowed role", || async {
            b.authenticate(&key.secret).await.unwrap().map(|p| p.role) == Some(Role::Member)
        })
        .await,
    );
    delays.sort();
    println!(
        "key change seen by the other replica: median {:?}, max {:?}",
        delays[delays.len() / 2],
        delays[delays.len() - 1]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_at_a_time_holds_a_duty_and_another_takes_it_when_it_goes() {
    let db = TestDb::postgres().await;
    let (a, b) = (db.open().await, db.open().await);
    assert!(a.leases().hold("reaper").await);
    assert!(a.leases().hold("reaper").await, "kept");
    assert!(!b.leases().hold("reaper").await, "held by A");
    assert!(b.leases().hold("reconcile").await, "another duty is free");
    assert!(!a.leases().hold("reconcile").await);

    // A stops: B takes its duty at its next try.
    a.close().await;
    assert!(b.leases().hold("reaper").await);

    // C takes nothing B holds; B's session ended by the server (a replica whose
    // connection died) lets C take both, and B no longer claims them.
    let c = db.open().await;
    assert!(!c.leases().hold("reaper").await);
    let common::TestDb { database, .. } = &db;
    let sandboxd_store::Database::Postgres { url } = database else {
        unreachable!()
    };
    let mut admin = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::query(
        "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' \
         AND granted AND pid <> pg_backend_pid() AND database = \
         (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    .execute(&mut admin)
    .await
    .unwrap();
    let started = Instant::now();
    while !c.leases().hold("reaper").await {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "never taken over"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(c.leases().hold("reconcile").await);
    assert!(
        !b.leases().hold("reaper").await,
        "B lost it with its session"
    );
    assert!(!b.leases().hold("reconcile").await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_changed_through_one_replica_is_announced_to_the_other() {
    use sandboxd_core::validate::NewServerSpec;
    use sandboxd_store::ServerChange;
    let db = TestDb::postgres().await;
    let (a, b) = two_replicas(&db).await;
    let boot = a.bootstrap(None).await.unwrap().unwrap();
    let mut heard = b.server_changes();
    let mut own = a.server_changes();
    let spec = NewServerSpec {
        name: "s1".into(),
        address: "203.0.113.9".into(),
        port: 22,
        user: "sandboxd".into(),
        private_key: "not a real key".into(),
        host_key: None,
        docker_socket: "/var/run/docker.sock".into(),
        remote_dir: "/var/lib/sandboxd".into(),
        cpu: None,
        memory_mb: None,
        warm_pools: Default::default(),
    };
    let server = a.insert_server(&boot.organization_id, &spec).await.unwrap();
    a.pin_host_key(&server.server_id, "ssh-ed25519 AAAA")
        .await
        .unwrap();
    let started = Instant::now();
    let change = tokio::time::timeout(NOTICE_BOUND, heard.recv())
        .await
        .expect("announced within the bound")
        .unwrap();
    assert_eq!(change, ServerChange::One(server.server_id.clone()));
    println!("server change heard after {:?}", started.elapsed());
    assert!(
        a.remove_server(&boot.organization_id, &server.server_id)
            .await
            .unwrap()
    );
    let change = tokio::time::timeout(NOTICE_BOUND, heard.recv())
        .await
        .expect("removal announced")
        .unwrap();
    assert_eq!(change, ServerChange::One(server.server_id));
    assert!(
        own.try_recv().is_err(),
        "a replica is not told its own changes"
    );
}
