//! The store's story, told on every backend (a real SQLite file and a real PostgreSQL
//! database): bootstrap, keys, projects, sandbox rows, secrets at rest, reconcile rows,
//! caches that follow every write, and writers racing without losing an update.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[macro_use]
mod common;

use common::{TestDb, sandbox};

use sandboxd_core::activity::{
    ActivityEntry, ActivityKind, ActivityRecord, CommandActivity, FileActivity, LifecycleActivity,
};
use sandboxd_core::egress_log::{Decision, EgressRecord};
use sandboxd_core::model::{KeyFormat, NetworkMode, SandboxStatus};
use sandboxd_core::quotas::Quotas;
use sandboxd_store::{Database, KeySpec};

on_every_backend!(
    bootstrap_authenticate_and_sandbox_rows,
    bootstrap_key_from_configuration,
    key_changes_take_effect_at_once_for_keys_seen_before,
    every_write_shows_in_the_next_read_of_a_cached_row,
    racing_creates_never_pass_the_quota,
    racing_removals_always_leave_an_owner,
    another_master_key_is_refused,
    websocket_tokens_are_single_use_bound_and_shared,
    dashboard_sessions_follow_their_key_expire_and_close,
    exposures_live_with_their_sandbox_and_links_with_their_exposure,
    an_egress_list_is_kept_and_replaced_only_on_a_running_allowlist_sandbox,
    an_egress_log_is_read_in_writing_order_rewritten_entries_last_and_trimmed,
    a_timeline_is_read_in_writing_order_narrowed_trimmed_and_kept_past_its_sandbox,
    egress_credentials_are_sealed_and_go_when_their_sandbox_is_killed,
    a_sandbox_has_at_most_twenty_egress_requests_waiting_and_one_per_host,
    snapshots_are_kept_per_organization_within_their_quota,
    volumes_are_mounted_only_while_ready_and_removed_only_when_unmounted,
    activity_does_not_move_the_end_of_a_fixed_timeout,
    sandboxes_paused_to_disk_are_counted_against_their_organization_s_quota,
    lists_read_every_field_back_newest_first,
    e2b_builds_wait_for_their_steps_and_uploads_stay_in_their_project,
    an_e2b_tag_names_one_build_of_its_template,
    build_contexts_are_read_whole_while_ready_and_within_the_organization_s_bound,
);

async fn bootstrap_authenticate_and_sandbox_rows(db: &TestDb) {
    let store = db.open().await;
    assert!(store.bootstrap(Some("short")).await.is_err());
    let boot = store
        .bootstrap(None)
        .await
        .unwrap()
        .expect("first start bootstraps");
    let key = boot.generated_key.clone().expect("a key is generated");
    assert!(key.starts_with("sbx_"));
    assert!(
        store.bootstrap(None).await.unwrap().is_none(),
        "second start does nothing"
    );

    let principal = store
        .authenticate(&key)
        .await
        .unwrap()
        .expect("key is valid");
    assert_eq!(principal.organization_id, boot.organization_id);
    assert!(store.authenticate("sbx_wrong").await.unwrap().is_none());
    assert!(store.authenticate("").await.unwrap().is_none());

    let projects = store
        .projects_with_environments(&boot.organization_id)
        .await
        .unwrap();
    assert_eq!(projects.len(), 1);
    assert_eq!(projects[0].0.name, "default");
    assert_eq!(projects[0].1[0].name, "production");
    assert!(
        store
            .environment("other-org", &boot.environment_id)
            .await
            .unwrap()
            .is_none()
    );
    let staging = store
        .create_environment(&boot.organization_id, &boot.project_id, "staging", None)
        .await
        .unwrap();
    assert!(staging.is_some());
    assert!(
        store
            .create_environment(&boot.organization_id, &boot.project_id, "staging", None)
            .await
            .is_err()
    );

    let secret = "API_TOKEN=plaintext-secret-value-123";
    let row = sandbox(
        &boot.organization_id,
        &boot.project_id,
        &boot.environment_id,
        1,
    );
    store
        .insert_sandbox(&row, Some(secret), &principal.user_id, &Quotas::default())
        .await
        .unwrap();
    assert_eq!(
        store
            .sandbox_env_vars(&row.sandbox_id)
            .await
            .unwrap()
            .as_deref(),
        Some(secret)
    );
    let running = store
        .mark_running(&row.sandbox_id, "cid", Some("1000:1000"), 1_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(running.status, SandboxStatus::Running);
    assert_eq!(running.expires_at, Some(61_000));
    assert_eq!(
        running.labels, row.labels,
        "labels come back as they went in"
    );
    store.touch(&row.sandbox_id, 2_000).await.unwrap();
    assert_eq!(
        store
            .sandbox(&row.sandbox_id)
            .await
            .unwrap()
            .unwrap()
            .expires_at,
        Some(62_000)
    );
    let extended = store
        .set_timeout(&row.sandbox_id, 120_000, 3_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(extended.expires_at, Some(123_000));
    assert_eq!(store.expired_sandboxes(122_999).await.unwrap().len(), 0);
    assert_eq!(store.expired_sandboxes(123_000).await.unwrap().len(), 1);
    assert_eq!(
        store
            .sandboxes_in_project(&boot.project_id)
            .await
            .unwrap()
            .len(),
        1
    );
    assert_eq!(store.live_rows().await.unwrap().len(), 1);
    let killed = store
        .mark_killed(&row.sandbox_id, 5_000)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(killed.status, SandboxStatus::Killed);
    store
        .mark_error(std::slice::from_ref(&row.sandbox_id))
        .await
        .unwrap();
    assert_eq!(
        store
            .sandbox(&row.sandbox_id)
            .await
            .unwrap()
            .unwrap()
            .status,
        SandboxStatus::Killed,
        "mark_error never overrides a kill"
    );
    store.close().await;

    // Nothing secret is in the database files in plaintext: not the env vars, not the key.
    if let Database::Sqlite { data_dir } = &db.database {
        for entry in std::fs::read_dir(data_dir).unwrap() {
            let bytes = std::fs::read(entry.unwrap().path()).unwrap();
            for needle in [secret.as_bytes(), b"plaintext-secret-value", key.as_bytes()] {
                assert!(!bytes.windows(needle.len()).any(|w| w == needle));
            }
        }
    }

    // The store reopens with the same master key: keys and secrets still work.
    let reopened = db.open().await;
    assert!(reopened.authenticate(&key).await.unwrap().is_some());
    assert_eq!(
        reopened
            .sandbox_env_vars(&row.sandbox_id)
            .await
            .unwrap()
            .as_deref(),
        Some(secret)
    );
}

async fn bootstrap_key_from_configuration(db: &TestDb) {
    let store = db.open().await;
    let chosen = "k".repeat(40);
    let boot = store.bootstrap(Some(&chosen)).await.unwrap().unwrap();
    assert!(boot.generated_key.is_none());
    assert!(store.authenticate(&chosen).await.unwrap().is_some());
    let id = store.instance_id().await.unwrap();
    assert_eq!(store.instance_id().await.unwrap(), id);
}

/// Keys are answered from memory once seen; every change that narrows what a key may do
/// takes effect on the very next check all the same.
async fn key_changes_take_effect_at_once_for_keys_seen_before(db: &TestDb) {
    use sandboxd_core::model::{MemberChanges, Role};
    let store = db.open().await;
    let boot = store.bootstrap(None).await.unwrap().unwrap();
    let org = boot.organization_id.clone();
    let member = store
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
    let key = store
        .create_key(
            &org,
            &member.user_id,
            KeySpec::named("k"),
            &Quotas::default(),
        )
        .await
        .unwrap();
    let check = || async { store.authenticate(&key.secret).await.unwrap() };
    for _ in 0..3 {
        assert_eq!(check().await.map(|p| p.role), Some(Role::Admin));
    }

    let changes = MemberChanges {
        role: Some(Role::Member),
        ..MemberChanges::default()
    };
    store
        .update_member(&org, &member.user_id, &changes)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(check().await.map(|p| p.role), Some(Role::Member));

    store
        .revoke_key(&org, &key.record.key_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(check().await, None, "revoked");

    // A key in E2B's form is a key like any other.
    let second = store
        .create_key(
            &org,
            &member.user_id,
            KeySpec {
                format: KeyFormat::E2b,
                ..KeySpec::named("k2")
            },
            &Quotas::default(),
        )
        .await
        .unwrap();
    assert!(second.secret.starts_with("e2b_"), "{}", second.secret);
    assert_eq!(second.record.prefix, &second.secret[..8]);
    assert!(store.authenticate(&second.secret).await.unwrap().is_some());
    assert!(store.remove_member(&org, &member.user_id).await.unwrap());
    assert_eq!(
        store.authenticate(&second.secret).await.unwrap(),
        None,
        "the member is gone"
    );

    let owner = store
        .authenticate(boot.generated_key.as_deref().unwrap())
        .await
        .unwrap()
        .unwrap();
    let expiring = store
        .create_key(
            &org,
            &owner.user_id,
            KeySpec {
                expires_at: Some(sandboxd_store::now_ms() + 300),
                ..KeySpec::named("short")
            },
            &Quotas::default(),
        )
        .await
        .unwrap();
    assert!(
        store
            .authenticate(&expiring.secret)
            .await
            .unwrap()
            .is_some()
    );
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(
        store.authenticate(&expiring.secret).await.unwrap(),
        None,
        "expired while cached"
    );
}

/// Rows are answered from memory once read; every write of the store shows in the very
/// next read all the same.
async fn every_write_shows_in_the_next_read_of_a_cached_row(db: &TestDb) {
    let store = db.open().await;
    let boot = store.bootstrap(None).await.unwrap().unwrap();
    let owner = store
        .authenticate(boot.generated_key.as_deref().unwrap())
        .await
        .unwrap()
        .unwrap();
    let mut row = sandbox(
        &boot.organization_id,
        &boot.project_id,
        &boot.environment_id,
        1,
    );
    row.status = SandboxStatus::Creating;
    store
        .insert_sandbox(&row, None, &owner.user_id, &Quotas::default())
        .await
        .unwrap();
    let id = row.sandbox_id.clone();
    let read = || async { store.sandbox(&id).await.unwrap().unwrap() };
    // A new handle has a memory of its own, empty: it reads what the database holds.
    let stored = || async {
        let other = db.open().await;
        other.sandbox(&id).await.unwrap().unwrap()
    };
    assert_eq!(read().await.status, SandboxStatus::Creating);

    store
        .mark_running(&id, "container-1", None, 1_000)
        .await
        .unwrap();
    read().await;
    let running = read().await;
    assert_eq!(
        (running.status, running.container_id.as_deref()),
        (SandboxStatus::Running, Some("container-1"))
    );

    store.touch(&id, 5_000).await.unwrap();
    let touched = read().await;
    assert_eq!(touched.last_activity_at, Some(5_000));
    assert_eq!(touched.expires_at, Some(5_000 + touched.timeout_ms));
    assert_eq!(touched, stored().await, "the same as in the database");

    store.set_timeout(&id, 60_000, 6_000).await.unwrap();
    assert_eq!(read().await.expires_at, Some(66_000));

    assert!(store.set_status(&id, SandboxStatus::Error).await.unwrap());
    read().await;
    assert_eq!(read().await.status, SandboxStatus::Error);
    assert!(!store.set_status(&id, SandboxStatus::Running).await.unwrap());
    assert_eq!(read().await, stored().await, "an error is not undone");

    store.mark_killed(&id, 7_000).await.unwrap();
    read().await;
    assert_eq!(read().await.status, SandboxStatus::Killed);
    store.touch(&id, 8_000).await.unwrap();
    assert_eq!(read().await, stored().await, "a killed row is not touched");

    // A kill is final: nothing written after it changes the status.
    for status in SandboxStatus::ALL {
        assert!(!store.set_status(&id, status).await.unwrap(), "{status:?}");
    }
    store.mark_error(std::slice::from_ref(&id)).await.unwrap();
    assert!(
        store
            .mark_running(&id, "c2", None, 9_000)
            .await
            .unwrap()
            .is_some()
    );
    assert!(
        store.mark_killed(&id, 9_000).await.unwrap().is_none(),
        "killed once"
    );
    assert_eq!(read().await.status, SandboxStatus::Killed);
    assert_eq!(read().await, stored().await);

    store.delete_sandbox(&id).await.unwrap();
    assert_eq!(store.sandbox(&id).await.unwrap(), None);
}

/// Two servers' handles on one database (two replicas on PostgreSQL) create sandboxes
/// at once under a quota of 5: exactly 5 are admitted, whoever made them.
async fn racing_creates_never_pass_the_quota(db: &TestDb) {
    let (a, b) = (db.open().await, db.open().await);
    let boot = a.bootstrap(None).await.unwrap().unwrap();
    let owner = a
        .authenticate(boot.generated_key.as_deref().unwrap())
        .await
        .unwrap()
        .unwrap();
    let quotas = Quotas {
        running_sandboxes: 5,
        ..Quotas::default()
    };
    let tries = (0..20).map(|i| {
        let store = if i % 2 == 0 { a.clone() } else { b.clone() };
        let row = sandbox(
            &boot.organization_id,
            &boot.project_id,
            &boot.environment_id,
            i,
        );
        let (user, quotas) = (owner.user_id.clone(), quotas);
        tokio::spawn(async move { store.insert_sandbox(&row, None, &user, &quotas).await })
    });
    let mut admitted = 0;
    for outcome in futures_join(tries).await {
        match outcome {
            Ok(()) => admitted += 1,
            Err(sandboxd_store::StoreError::Quota(_)) => {}
            Err(other) => panic!("unexpected failure: {other:?}"),
        }
    }
    assert_eq!(admitted, 5);
    let rows = a.sandboxes_in_project(&boot.project_id).await.unwrap();
    assert_eq!(rows.len(), 5, "every admitted row is stored, no other");
}

/// Two owners removed at once, each through another handle: one removal is refused, so
/// the organization keeps an owner.
async fn racing_removals_always_leave_an_owner(db: &TestDb) {
    use sandboxd_core::model::{MemberChanges, Role};
    let (a, b) = (db.open().await, db.open().await);
    let boot = a.bootstrap(None).await.unwrap().unwrap();
    let org = boot.organization_id.clone();
    let first = a
        .authenticate(boot.generated_key.as_deref().unwrap())
        .await
        .unwrap()
        .unwrap()
        .user_id;
    for round in 0..5 {
        let second = a
            .create_member(
                &org,
                &format!("owner-{round}"),
                &MemberChanges {
                    role: Some(Role::Owner),
                    ..MemberChanges::default()
                },
            )
            .await
            .unwrap()
            .user_id;
        let (ta, tb) = (a.clone(), b.clone());
        let (o1, o2) = (org.clone(), org.clone());
        let (u1, u2) = (first.clone(), second.clone());
        let one = tokio::spawn(async move { ta.remove_member(&o1, &u1).await });
        let two = tokio::spawn(async move { tb.remove_member(&o2, &u2).await });
        let (one, two) = (one.await.unwrap(), two.await.unwrap());
        assert!(
            one.is_ok() != two.is_ok(),
            "exactly one removal passes: {one:?} {two:?}"
        );
        let owners = a
            .members(&org)
            .await
            .unwrap()
            .into_iter()
            .filter(|m| m.role == Role::Owner)
            .count();
        assert_eq!(owners, 1, "round {round}");
        if one.is_ok() {
            // The first owner went: the second is the one left for the next round.
            return;
        }
    }
}

/// A server started with another master key than the one that sealed the database's
/// secrets refuses to start.
async fn another_master_key_is_refused(db: &TestDb) {
    let first = sandboxd_store::Store::connect(&db.database, db.dir.path(), Some(&[1; 32]))
        .await
        .unwrap();
    first.bootstrap(None).await.unwrap();
    let again = sandboxd_store::Store::connect(&db.database, db.dir.path(), Some(&[1; 32])).await;
    assert!(again.is_ok(), "the same key opens it");
    let other = sandboxd_store::Store::connect(&db.database, db.dir.path(), Some(&[2; 32])).await;
    assert!(
        matches!(other, Err(sandboxd_store::StoreError::WrongMasterKey)),
        "{other:?}"
    );
}

/// A token issued through one handle (replica) is redeemed through another, once, for
/// its sandbox and before its expiry; one organization cannot push out another's.
async fn websocket_tokens_are_single_use_bound_and_shared(db: &TestDb) {
    let (a, b) = (db.open().await, db.open().await);
    let now = sandboxd_store::now_ms();
    let later = now + 60_000;
    a.issue_session_token("t1", "org", "key", "sb", later, now)
        .await
        .unwrap();
    assert_eq!(
        b.redeem_session_token("t1", "other", now).await.unwrap(),
        None,
        "another sandbox"
    );
    assert_eq!(
        b.redeem_session_token("t1", "sb", now).await.unwrap(),
        None,
        "used up by the wrong try"
    );
    a.issue_session_token("t2", "org", "key", "sb", later, now)
        .await
        .unwrap();
    assert_eq!(
        b.redeem_session_token("t2", "sb", now)
            .await
            .unwrap()
            .as_deref(),
        Some("key")
    );
    assert_eq!(
        b.redeem_session_token("t2", "sb", now).await.unwrap(),
        None,
        "second use"
    );
    assert_eq!(
        a.redeem_session_token("made-up", "sb", now).await.unwrap(),
        None
    );
    a.issue_session_token("t3", "org", "key", "sb", later, now)
        .await
        .unwrap();
    assert_eq!(
        b.redeem_session_token("t3", "sb", later).await.unwrap(),
        None,
        "expired"
    );

    a.issue_session_token("quiet", "org", "key", "sb", later, now)
        .await
        .unwrap();
    let cap = sandboxd_store::MAX_TOKENS_PER_ORG;
    for n in 0..cap + 5 {
        let store = if n % 2 == 0 { &a } else { &b };
        store
            .issue_session_token(&format!("noisy-{n}"), "noisy", "k", "sb", later + n, now)
            .await
            .unwrap();
    }
    assert_eq!(a.session_tokens_of("noisy").await.unwrap(), cap);
    assert_eq!(
        b.redeem_session_token("noisy-0", "sb", now).await.unwrap(),
        None,
        "its own oldest went"
    );
    assert_eq!(
        b.redeem_session_token("quiet", "sb", now)
            .await
            .unwrap()
            .as_deref(),
        Some("key"),
        "the other's token stays"
    );
}

/// A dashboard session opened through one handle is seen by another until it expires or
/// is closed; one key holds a bounded number of them.
async fn dashboard_sessions_follow_their_key_expire_and_close(db: &TestDb) {
    let (a, b) = (db.open().await, db.open().await);
    let now = sandboxd_store::now_ms();
    let later = now + 3_600_000;
    a.open_dashboard_session("secret-1", "key", now, later)
        .await
        .unwrap();
    assert_eq!(
        b.dashboard_session("secret-1", now)
            .await
            .unwrap()
            .as_deref(),
        Some("key")
    );
    assert_eq!(
        b.dashboard_session("secret-1", later).await.unwrap(),
        None,
        "expired"
    );
    assert_eq!(b.dashboard_session("secret-2", now).await.unwrap(), None);
    b.close_dashboard_session("secret-1").await.unwrap();
    assert_eq!(
        a.dashboard_session("secret-1", now).await.unwrap(),
        None,
        "closed"
    );

    let cap = sandboxd_store::MAX_SESSIONS_PER_KEY;
    for n in 0..cap + 3 {
        a.open_dashboard_session(&format!("many-{n}"), "busy", now + n, later)
            .await
            .unwrap();
    }
    for n in 0..3 {
        let oldest = a
            .dashboard_session(&format!("many-{n}"), now)
            .await
            .unwrap();
        assert_eq!(oldest, None, "the oldest went");
    }
    let newest = a.dashboard_session(&format!("many-{}", cap + 2), now).await;
    assert_eq!(newest.unwrap().as_deref(), Some("busy"));
}

/// An exposure written through one handle is read through another while it lives and
/// its sandbox runs; exposing again replaces it (and its link); a sandbox's exposures go
/// when it is killed, and so do its ports' settings on the E2B domain.
async fn exposures_live_with_their_sandbox_and_links_with_their_exposure(db: &TestDb) {
    use sandboxd_core::ports::{Exposure, MAX_EXPOSED_PORTS};
    let (a, b) = (db.open().await, db.open().await);
    let boot = a.bootstrap(None).await.unwrap().unwrap();
    let principal = a
        .authenticate(boot.generated_key.as_deref().unwrap())
        .await
        .unwrap()
        .unwrap();
    let row = sandbox(
        &boot.organization_id,
        &boot.project_id,
        &boot.environment_id,
        1_000,
    );
    a.insert_sandbox(&row, None, &principal.user_id, &Quotas::default())
        .await
        .unwrap();
    let id = row.sandbox_id.clone();
    let exposure = |port: u16, nonce: &str, expires_at: i64| Exposure {
        sandbox_id: id.clone(),
        port,
        public: false,
        nonce: nonce.into(),
        key_id: principal.key_id.clone(),
        created_at: 1_000,
        expires_at,
    };
    assert!(
        !a.expose_port(&exposure(80, "n1", 10_000), 1_000)
            .await
            .unwrap(),
        "a sandbox still creating has no ports to expose"
    );
    a.mark_running(&id, "cid", None, 1_000).await.unwrap();
    let first = exposure(80, "n1", 10_000);
    assert!(a.expose_port(&first, 1_000).await.unwrap());
    assert_eq!(
        b.exposure(&id, 80, 2_000).await.unwrap(),
        Some(first.clone())
    );
    assert_eq!(b.exposure(&id, 80, 10_000).await.unwrap(), None, "expired");
    let token = a.link_token(&first);
    assert!(
        b.link_valid(&first, &token),
        "derived alike by every handle"
    );

    let second = Exposure {
        public: true,
        ..exposure(80, "n2", 20_000)
    };
    assert!(b.expose_port(&second, 2_000).await.unwrap());
    let now = a.exposure(&id, 80, 2_000).await.unwrap().unwrap();
    assert_eq!(now, second);
    assert!(
        !a.link_valid(&now, &token),
        "the first link ended with its exposure"
    );

    for port in 1..u16::try_from(MAX_EXPOSED_PORTS).unwrap() {
        a.expose_port(&exposure(1000 + port, "n", 20_000), 2_000)
            .await
            .unwrap();
    }
    assert!(matches!(
        a.expose_port(&exposure(9999, "n", 20_000), 2_000).await,
        Err(sandboxd_store::StoreError::Conflict(_))
    ));
    assert!(
        a.expose_port(&exposure(9999, "n", 40_000), 30_000)
            .await
            .unwrap(),
        "expired exposures do not count"
    );
    assert_eq!(b.exposures(&id, 30_000).await.unwrap().len(), 1);
    assert!(a.unexpose_port(&id, 9999).await.unwrap());
    assert!(!a.unexpose_port(&id, 9999).await.unwrap());

    a.expose_port(&exposure(80, "n3", 50_000), 30_000)
        .await
        .unwrap();

    // E2B's port settings: none for a sandbox not made through E2B's API; kept as
    // written (a second write replaces them), read by every handle, gone with a kill.
    use sandboxd_core::e2b::ports::PortSettings;
    assert_eq!(b.e2b_ports(&id).await.unwrap(), None);
    let private = PortSettings {
        public: false,
        mask_host: Some("app.example.com:${PORT}".into()),
    };
    a.set_e2b_ports(
        &id,
        &principal.key_id,
        &PortSettings {
            public: true,
            mask_host: None,
        },
    )
    .await
    .unwrap();
    a.set_e2b_ports(&id, &principal.key_id, &private)
        .await
        .unwrap();
    assert_eq!(
        b.e2b_ports(&id).await.unwrap(),
        Some((principal.key_id.clone(), private))
    );

    a.mark_killed(&id, 31_000).await.unwrap();
    assert_eq!(b.exposures(&id, 31_000).await.unwrap(), vec![]);
    assert_eq!(b.e2b_ports(&id).await.unwrap(), None);
}

async fn futures_join<T: Send + 'static>(
    tasks: impl Iterator<Item = tokio::task::JoinHandle<T>>,
) -> Vec<T> {
    let mut out = Vec::new();
    for task in tasks.collect::<Vec<_>>() {
        out.push(task.await.unwrap());
    }
    out
}

async fn an_egress_list_is_kept_and_replaced_only_on_a_running_allowlist_sandbox(db: &TestDb) {
    let store = db.open().await;
    let boot = store.bootstrap(None).await.unwrap().unwrap();
    let owner = store
        .authenticate(boot.generated_key.as_deref().unwrap())
        .await
        .unwrap()
        .unwrap();
    let row = |n| {
        sandbox(
            &boot.organization_id,
            &boot.project_id,
            &boot.environment_id,
            n,
        )
    };
    let mut listed = row(1);
    listed.network_mode = NetworkMode::Allowlist;
    listed.egress = vec!["pypi.org".into(), "*.pythonhosted.org:443".into()];
    let plain = row(2);
    for made in [&listed, &plain] {
        store
            .insert_sandbox(made, None, &owner.user_id, &Quotas::default())
            .await
            .unwrap();
    }
    let read = store.sandbox(&listed.sandbox_id).await.unwrap().unwrap();
    assert_eq!(
        (read.network_mode, read.egress.clone()),
        (NetworkMode::Allowlist, listed.egress.clone())
    );
    assert!(
        store
            .sandbox(&plain.sandbox_id)
            .await
            .unwrap()
            .unwrap()
            .egress
            .is_empty()
    );
    let new = vec!["api.example.com:8443".to_owned()];
    assert!(
        store
            .set_egress(&listed.sandbox_id, &listed.egress, &new)
            .await
            .unwrap()
            .is_none(),
        "not running yet"
    );
    for made in [&listed, &plain] {
        store
            .mark_running(&made.sandbox_id, "cid", None, 1_000)
            .await
            .unwrap()
            .unwrap();
    }
    assert!(
        store
            .set_egress(&listed.sandbox_id, &["other.example".to_owned()], &new)
            .await
            .unwrap()
            .is_none(),
        "a list that changed since it was read is not replaced"
    );
    let replaced = store
        .set_egress(&listed.sandbox_id, &listed.egress, &new)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(replaced.egress, new);
    assert_eq!(
        store
            .sandbox(&listed.sandbox_id)
            .await
            .unwrap()
            .unwrap()
            .egress,
        new,
        "the cached row follows"
    );
    assert!(
        store
            .set_egress(&plain.sandbox_id, &[], &new)
            .await
            .unwrap()
            .is_none(),
        "another mode has no list to replace"
    );
    assert!(
        store
            .sandbox(&plain.sandbox_id)
            .await
            .unwrap()
            .unwrap()
            .egress
            .is_empty()
    );
}

async fn an_egress_log_is_read_in_writing_order_rewritten_entries_last_and_trimmed(db: &TestDb) {
    let store = db.open().await;
    let entry = |n: u32, sandbox: &str| EgressRecord {
        entry_id: format!("entry{n}"),
        sandbox_id: sandbox.to_owned(),
        position: String::new(),
        at: 1_000 + i64::from(n),
        host: format!("h{n}.example"),
        port: 443,
        decision: if n.is_multiple_of(2) {
            Decision::Allowed
        } else {
            Decision::Refused
        },
        reason: (!n.is_multiple_of(2)).then(|| "not in the sandbox's egress list".to_owned()),
        address: n.is_multiple_of(2).then(|| "192.0.2.1:443".to_owned()),
        bytes_out: 0,
        bytes_in: 0,
        ended_at: None,
        unlogged: u64::from(n),
    };
    let hosts = |records: &[EgressRecord]| -> Vec<String> {
        records.iter().map(|r| r.host.clone()).collect()
    };
    let batch: Vec<EgressRecord> = (0..5).map(|n| entry(n, "sbA")).collect();
    store.write_egress_log(&batch).await.unwrap();
    store.write_egress_log(&[entry(9, "sbB")]).await.unwrap();
    let all = store.egress_log("sbA", None, 100).await.unwrap();
    assert_eq!(
        hosts(&all),
        [
            "h0.example",
            "h1.example",
            "h2.example",
            "h3.example",
            "h4.example"
        ]
    );
    assert_eq!(all[3].unlogged, 3);
    assert_eq!(all[1].decision, Decision::Refused);

    // An entry written again (its connection ended) moves after everything before.
    let mut ended = entry(0, "sbA");
    ended.bytes_out = 120;
    ended.bytes_in = u64::MAX;
    ended.ended_at = Some(2_000);
    store.write_egress_log(&[ended]).await.unwrap();
    let after = store
        .egress_log("sbA", Some(&all[4].position), 100)
        .await
        .unwrap();
    assert_eq!(hosts(&after), ["h0.example"]);
    assert_eq!(
        (after[0].bytes_out, after[0].bytes_in, after[0].ended_at),
        (120, i64::MAX as u64, Some(2_000)),
        "counts are kept (clamped to what the database holds)"
    );
    assert_eq!(store.egress_log("sbA", None, 100).await.unwrap().len(), 5);
    let first_two = store.egress_log("sbA", None, 2).await.unwrap();
    assert_eq!(hosts(&first_two), ["h1.example", "h2.example"]);

    // Trimmed to the newest; another sandbox's log is its own.
    assert_eq!(store.trim_egress_log("sbA", 2).await.unwrap(), 3);
    assert_eq!(
        hosts(&store.egress_log("sbA", None, 100).await.unwrap()),
        ["h4.example", "h0.example"]
    );
    assert_eq!(store.trim_egress_log("sbA", 2).await.unwrap(), 0);
    assert_eq!(store.egress_log("sbB", None, 100).await.unwrap().len(), 1);
}

/// A timeline: written in order (an entry written again moves last), read from a
/// cursor or as the newest, narrowed to kinds, trimmed oldest first to a count and to
/// bytes (counted as dropped), and kept after its sandbox for the retention only.
async fn a_timeline_is_read_in_writing_order_narrowed_trimmed_and_kept_past_its_sandbox(
    db: &TestDb,
) {
    let store = db.open().await;
    let boot = store.bootstrap(None).await.unwrap().unwrap();
    let owner = store
        .authenticate(boot.generated_key.as_deref().unwrap())
        .await
        .unwrap()
        .unwrap();
    let mut live = sandbox(
        &boot.organization_id,
        &boot.project_id,
        &boot.environment_id,
        1,
    );
    live.status = SandboxStatus::Creating;
    store
        .insert_sandbox(&live, None, &owner.user_id, &Quotas::default())
        .await
        .unwrap();
    let gone = "sb-gone";
    let entry = |n: u32, sandbox: &str| ActivityRecord {
        entry_id: format!("{sandbox}-{n}"),
        sandbox_id: sandbox.to_owned(),
        organization_id: boot.organization_id.clone(),
        position: String::new(),
        at: 1_000 + i64::from(n),
        entry: if n.is_multiple_of(2) {
            ActivityEntry::command(
                "exec",
                None,
                CommandActivity {
                    command: format!("echo {n}"),
                    exit_code: Some(0),
                    ..CommandActivity::default()
                },
            )
        } else {
            ActivityEntry::file(
                "write",
                None,
                FileActivity {
                    path: format!("/tmp/{n}"),
                    ..FileActivity::default()
                },
            )
        },
    };
    let ids = |records: &[ActivityRecord]| -> Vec<String> {
        records.iter().map(|r| r.entry_id.clone()).collect()
    };
    let batch: Vec<ActivityRecord> = (0..6).map(|n| entry(n, gone)).collect();
    store.write_activity(&batch).await.unwrap();
    store
        .write_activity(&[entry(0, &live.sandbox_id)])
        .await
        .unwrap();
    let all = store.activity(gone, None, &[], 100).await.unwrap();
    assert_eq!(
        ids(&all),
        [
            "sb-gone-0",
            "sb-gone-1",
            "sb-gone-2",
            "sb-gone-3",
            "sb-gone-4",
            "sb-gone-5"
        ]
    );
    assert_eq!(all[2].entry, entry(2, gone).entry, "read back whole");
    assert_eq!(all[2].at, 1_002);
    assert_eq!(
        store.activity_organization(gone).await.unwrap().as_deref(),
        Some(boot.organization_id.as_str())
    );

    // Written again: last, with what it holds now.
    let mut ended = entry(0, gone);
    ended.entry = ActivityEntry::lifecycle("kill", None, LifecycleActivity::default());
    store.write_activity(&[ended]).await.unwrap();
    let after = store
        .activity(gone, Some(&all[5].position), &[], 100)
        .await
        .unwrap();
    assert_eq!(ids(&after), ["sb-gone-0"]);
    assert_eq!(after[0].entry.kind(), ActivityKind::Lifecycle);
    // Narrowed, and the newest.
    let files = store
        .activity(gone, None, &[ActivityKind::File], 100)
        .await
        .unwrap();
    assert_eq!(ids(&files), ["sb-gone-1", "sb-gone-3", "sb-gone-5"]);
    let two = store
        .activity(
            gone,
            None,
            &[ActivityKind::Command, ActivityKind::Lifecycle],
            100,
        )
        .await
        .unwrap();
    assert_eq!(ids(&two), ["sb-gone-2", "sb-gone-4", "sb-gone-0"]);
    let newest = store.latest_activity(gone, &[], 2).await.unwrap();
    assert_eq!(ids(&newest), ["sb-gone-5", "sb-gone-0"]);

    // Trimmed to a count, then to bytes, oldest first; counted.
    assert_eq!(store.trim_activity(gone, 4, u64::MAX).await.unwrap(), 2);
    assert_eq!(
        ids(&store.activity(gone, None, &[], 100).await.unwrap()),
        ["sb-gone-3", "sb-gone-4", "sb-gone-5", "sb-gone-0"]
    );
    assert_eq!(
        store.trim_activity(gone, 100, 1).await.unwrap(),
        4,
        "each entry is larger than a byte"
    );
    assert_eq!(store.activity_dropped(gone).await.unwrap(), 6);
    store
        .count_activity_dropped(gone, &boot.organization_id, 3)
        .await
        .unwrap();
    assert_eq!(store.activity_dropped(gone).await.unwrap(), 9);
    assert_eq!(store.activity_dropped("sb-never").await.unwrap(), 0);
    store.write_activity(&[entry(7, gone)]).await.unwrap();

    // A timeline outlives its sandbox for the retention: marked ended at the first
    // pass, removed once that is older than the retention; a live sandbox's stays.
    assert_eq!(store.expire_activity(10_000, 0).await.unwrap(), 0);
    assert_eq!(store.expire_activity(20_000, 9_999).await.unwrap(), 0);
    assert_eq!(store.activity(gone, None, &[], 100).await.unwrap().len(), 1);
    assert_eq!(store.expire_activity(30_000, 10_001).await.unwrap(), 1);
    assert!(
        store
            .activity(gone, None, &[], 100)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.activity_organization(gone).await.unwrap(), None);
    assert_eq!(
        store
            .activity(&live.sandbox_id, None, &[], 100)
            .await
            .unwrap()
            .len(),
        1
    );
}

async fn egress_credentials_are_sealed_and_go_when_their_sandbox_is_killed(db: &TestDb) {
    use sandboxd_core::egress_credentials::EgressCredential;
    let store = db.open().await;
    let boot = store.bootstrap(None).await.unwrap().unwrap();
    let owner = store
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
    store
        .insert_sandbox(&row, None, &owner.user_id, &Quotas::default())
        .await
        .unwrap();
    let id = &row.sandbox_id;
    assert!(store.egress_credentials(id).await.unwrap().is_empty());
    let credentials = vec![EgressCredential {
        host: "api.example.com".into(),
        header: "authorization".into(),
        value: "Bearer plain-secret-value".into(),
    }];
    store
        .set_egress_credentials(id, &credentials)
        .await
        .unwrap();
    assert_eq!(store.egress_credentials(id).await.unwrap(), credentials);
    // Sealed under the master key: a store with another key cannot open them.
    let other_key = tempfile::tempdir().unwrap();
    if let Ok(other) = sandboxd_store::Store::connect(&db.database, other_key.path(), None).await {
        assert!(other.egress_credentials(id).await.is_err());
    }
    store
        .mark_running(id, "cid", None, 1_000)
        .await
        .unwrap()
        .unwrap();
    store.mark_killed(id, 2_000).await.unwrap().unwrap();
    assert!(
        store.egress_credentials(id).await.unwrap().is_empty(),
        "gone with the kill"
    );
}

async fn a_sandbox_has_at_most_twenty_egress_requests_waiting_and_one_per_host(db: &TestDb) {
    use sandboxd_core::egress_requests::{EgressRequestRecord, RequestStatus};
    use sandboxd_store::Asked;
    let store = db.open().await;
    let ask = |host: String| EgressRequestRecord {
        request_id: String::new(),
        organization_id: "org".into(),
        sandbox_id: "sb".into(),
        host,
        reason: None,
        status: RequestStatus::Pending,
        requested_by_user: "u".into(),
        requested_by_key: "k".into(),
        created_at: 0,
        decided_at: None,
        decided_by_user: None,
        decided_by_key: None,
    };
    let mut first = None;
    for n in 0..20 {
        match store
            .ask_egress(ask(format!("h{n}.example")), 1_000 + n)
            .await
            .unwrap()
        {
            Asked::Made(made) => first = first.or(Some(made.request_id)),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(
        store
            .ask_egress(ask("one-more.example".into()), 2_000)
            .await
            .unwrap(),
        Asked::TooMany
    );
    match store
        .ask_egress(ask("h0.example".into()), 2_000)
        .await
        .unwrap()
    {
        Asked::Waiting(same) => assert_eq!(Some(same.request_id), first),
        other => panic!("the same host is the same request: {other:?}"),
    }
    let decided = store
        .decide_egress(
            "org",
            first.as_deref().unwrap(),
            RequestStatus::Denied,
            "d",
            "k2",
            3_000,
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(decided.status, RequestStatus::Denied);
    assert!(matches!(
        store
            .ask_egress(ask("one-more.example".into()), 4_000)
            .await
            .unwrap(),
        Asked::Made(_)
    ));
}

async fn snapshots_are_kept_per_organization_within_their_quota(db: &TestDb) {
    use sandboxd_core::quotas::QuotaExceeded;
    use sandboxd_core::snapshots::Snapshot;
    use sandboxd_store::StoreError;
    let store = db.open().await;
    let boot = store.bootstrap(None).await.unwrap().unwrap();
    let owner = store
        .authenticate(boot.generated_key.as_deref().unwrap())
        .await
        .unwrap()
        .unwrap();
    let org = &boot.organization_id;
    let quotas = Quotas {
        snapshots: 2,
        snapshot_mb: 1,
        ..Quotas::default()
    };
    let snapshot = |id: &str, size_bytes: i64, created_at: i64| Snapshot {
        snapshot_id: id.into(),
        organization_id: org.clone(),
        project_id: boot.project_id.clone(),
        name: format!("snap {id}"),
        sandbox_id: "sandbox".into(),
        server_id: None,
        image: format!("sandboxd-snapshots:{id}"),
        source_image: "img".into(),
        template: Some("base".into()),
        user: Some("1000:1000".into()),
        workdir: "/home/user".into(),
        size_bytes,
        created_at,
        memory: None,
    };
    store.admit_snapshot(org, &quotas).await.unwrap();
    let first = snapshot("a", 600 * 1024, 1);
    store.insert_snapshot(&first, "u", &quotas).await.unwrap();
    // The bytes quota counts what is kept.
    let big = snapshot("b", 600 * 1024, 2);
    assert!(matches!(
        store.insert_snapshot(&big, "u", &quotas).await,
        Err(StoreError::Quota(QuotaExceeded::SnapshotBytes { .. }))
    ));
    // A snapshot's memory counts with its image.
    let memory = |bytes| {
        Some(sandboxd_core::snapshots::KeptMemory {
            bytes,
            agent_key: "ab".repeat(32),
        })
    };
    let too_much = Snapshot {
        memory: memory(400 * 1024),
        ..snapshot("m", 100 * 1024, 3)
    };
    assert!(matches!(
        store.insert_snapshot(&too_much, "u", &quotas).await,
        Err(StoreError::Quota(QuotaExceeded::SnapshotBytes { .. }))
    ));
    let second = Snapshot {
        memory: memory(200 * 1024),
        ..snapshot("c", 100 * 1024, 3)
    };
    store.insert_snapshot(&second, "u", &quotas).await.unwrap();
    assert!(matches!(
        store.admit_snapshot(org, &quotas).await,
        Err(StoreError::Quota(QuotaExceeded::Snapshots { limit: 2 }))
    ));
    let listed = store.snapshots(org).await.unwrap();
    assert_eq!(listed, vec![second.clone(), first.clone()], "newest first");
    assert_eq!(store.snapshot(org, "a").await.unwrap(), Some(first));
    assert_eq!(store.snapshot("another org", "a").await.unwrap(), None);
    // In use while a sandbox made from its image lives.
    let mut row = sandbox(org, &boot.project_id, &boot.environment_id, 1);
    row.image = second.image.clone();
    store
        .insert_sandbox(&row, None, &owner.user_id, &Quotas::default())
        .await
        .unwrap();
    assert!(store.image_in_use(&second.image).await.unwrap());
    store.mark_killed(&row.sandbox_id, 2).await.unwrap();
    assert!(!store.image_in_use(&second.image).await.unwrap());
    assert!(store.delete_snapshot("a").await.unwrap());
    assert!(!store.delete_snapshot("a").await.unwrap());
    store.admit_snapshot(org, &quotas).await.unwrap();
}

async fn volumes_are_mounted_only_while_ready_and_removed_only_when_unmounted(db: &TestDb) {
    use sandboxd_core::quotas::QuotaExceeded;
    use sandboxd_core::volumes::{Volume, VolumeMount};
    use sandboxd_store::StoreError;
    let store = db.open().await;
    let boot = store.bootstrap(None).await.unwrap().unwrap();
    let org = &boot.organization_id;
    let quotas = Quotas {
        volumes: 2,
        volume_mb: 100,
        ..Quotas::default()
    };
    let volume = |id: &str, name: &str, size_mb: i64| Volume {
        volume_id: id.into(),
        organization_id: org.clone(),
        project_id: boot.project_id.clone(),
        name: name.into(),
        server_id: None,
        size_mb,
        status: "creating".into(),
        created_at: 1,
    };
    let first = volume("v1", "data", 60);
    store.insert_volume(&first, "u", &quotas).await.unwrap();
    assert!(matches!(
        store
            .insert_volume(&volume("v2", "data", 1), "u", &quotas)
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        store
            .insert_volume(&volume("v2", "more", 41), "u", &quotas)
            .await,
        Err(StoreError::Quota(QuotaExceeded::VolumeSize { .. }))
    ));
    store
        .insert_volume(&volume("v2", "more", 40), "u", &quotas)
        .await
        .unwrap();
    assert!(matches!(
        store
            .insert_volume(&volume("v3", "third", 1), "u", &quotas)
            .await,
        Err(StoreError::Quota(QuotaExceeded::Volumes { limit: 2 }))
    ));
    // Not mounted while it is being made.
    let mut row = sandbox(org, &boot.project_id, &boot.environment_id, 1);
    row.volumes = vec![VolumeMount {
        volume_id: "v1".into(),
        path: "/data".into(),
        read_only: false,
    }];
    let owner = store
        .authenticate(boot.generated_key.as_deref().unwrap())
        .await
        .unwrap()
        .unwrap()
        .user_id;
    assert!(matches!(
        store
            .insert_sandbox(&row, None, &owner, &Quotas::default())
            .await,
        Err(StoreError::Conflict(_))
    ));
    assert!(store.volume_made("v1").await.unwrap());
    assert!(!store.volume_made("v1").await.unwrap());
    store
        .insert_sandbox(&row, None, &owner, &Quotas::default())
        .await
        .unwrap();
    assert_eq!(
        store
            .sandbox(&row.sandbox_id)
            .await
            .unwrap()
            .unwrap()
            .volumes,
        row.volumes
    );
    assert_eq!(
        store.volume_users(org, "v1").await.unwrap(),
        vec![row.sandbox_id.clone()]
    );
    assert_eq!(
        store.volume_users_all(org).await.unwrap(),
        [("v1".to_owned(), vec![row.sandbox_id.clone()])].into()
    );
    // Mounted: removal names the sandbox and marks nothing.
    assert_eq!(
        store.begin_volume_removal(org, "v1", 10).await.unwrap(),
        vec![row.sandbox_id.clone()]
    );
    assert_eq!(
        store.volume(org, "v1").await.unwrap().unwrap().status,
        "ready"
    );
    store.mark_killed(&row.sandbox_id, 2).await.unwrap();
    assert!(
        store
            .begin_volume_removal(org, "v1", 10)
            .await
            .unwrap()
            .is_empty()
    );
    // A removal cut short is taken again; a removing volume is mounted by no one.
    assert!(
        store
            .begin_volume_removal(org, "v1", 10)
            .await
            .unwrap()
            .is_empty()
    );
    let mut again = sandbox(org, &boot.project_id, &boot.environment_id, 3);
    again.volumes = row.volumes.clone();
    assert!(matches!(
        store
            .insert_sandbox(&again, None, &owner, &Quotas::default())
            .await,
        Err(StoreError::Conflict(_))
    ));
    // One being made is not taken from under its maker, unless it was cut short.
    assert!(matches!(
        store.begin_volume_removal(org, "v2", 0).await,
        Err(StoreError::Conflict(_))
    ));
    assert!(
        store
            .begin_volume_removal(org, "v2", 10)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(!store.volume_made("v2").await.unwrap());
    // Another organization's volume is unknown to a sandbox.
    assert_eq!(store.volume("another org", "v2").await.unwrap(), None);
    store.delete_volume("v1").await.unwrap();
    assert_eq!(
        store
            .volumes(org)
            .await
            .unwrap()
            .iter()
            .map(|v| v.name.as_str())
            .collect::<Vec<_>>(),
        ["more"]
    );
    assert!(matches!(
        store.begin_volume_removal(org, "v1", 10).await,
        Err(StoreError::Unknown(_))
    ));
}

async fn activity_does_not_move_the_end_of_a_fixed_timeout(db: &TestDb) {
    let store = db.open().await;
    let boot = store.bootstrap(None).await.unwrap().unwrap();
    let owner = store
        .authenticate(boot.generated_key.as_deref().unwrap())
        .await
        .unwrap()
        .unwrap();
    let mut row = sandbox(
        &boot.organization_id,
        &boot.project_id,
        &boot.environment_id,
        1,
    );
    row.status = SandboxStatus::Running;
    row.fixed_timeout = true;
    row.timeout_ms = 3_000;
    row.expires_at = Some(1 + 3_000);
    store
        .insert_sandbox(&row, None, &owner.user_id, &Quotas::default())
        .await
        .unwrap();
    let id = row.sandbox_id.clone();
    store.touch(&id, 2_000).await.unwrap();
    let touched = store.sandbox(&id).await.unwrap().unwrap();
    assert!(touched.fixed_timeout);
    assert_eq!(
        touched.last_activity_at,
        Some(2_000),
        "activity is still recorded"
    );
    assert_eq!(touched.expires_at, Some(3_001), "the end stays");
    let stored = db.open().await.sandbox(&id).await.unwrap().unwrap();
    assert_eq!(stored.expires_at, Some(3_001), "in the database too");
    // Setting the timeout moves it, from then.
    store.set_timeout(&id, 5_000, 2_500).await.unwrap();
    assert_eq!(
        store.sandbox(&id).await.unwrap().unwrap().expires_at,
        Some(7_500)
    );
}

/// A sandbox paused to disk keeps its paused timeout when it was paused in memory first,
/// counts its bytes against the organization's quota (another's past it is refused, and
/// the row stays as it was), is found by the move to disk only while paused in memory,
/// and is running again with nothing on disk after a resume.
async fn sandboxes_paused_to_disk_are_counted_against_their_organization_s_quota(db: &TestDb) {
    let store = db.open().await;
    let boot = store.bootstrap(None).await.unwrap().unwrap();
    let owner = store
        .authenticate(boot.generated_key.as_deref().unwrap())
        .await
        .unwrap()
        .unwrap();
    let mib = 1024 * 1024;
    let quotas = Quotas {
        hibernated_mb: 10,
        ..Quotas::default()
    };
    let mut ids = Vec::new();
    for _ in 0..2 {
        let mut row = sandbox(
            &boot.organization_id,
            &boot.project_id,
            &boot.environment_id,
            1,
        );
        row.status = SandboxStatus::Running;
        row.runtime = Some("runsc".into());
        row.paused_timeout_ms = 60_000;
        store
            .insert_sandbox(&row, None, &owner.user_id, &Quotas::default())
            .await
            .unwrap();
        ids.push(row.sandbox_id);
    }
    // The first, paused in memory at 1,000, then to disk at 5,000: its paused timeout
    // still counts from 1,000.
    store.pause(&ids[0], 1_000).await.unwrap().unwrap();
    let found = store.paused_in_memory_since(1_000).await.unwrap();
    assert_eq!(found.len(), 1);
    assert!(store.paused_in_memory_since(999).await.unwrap().is_empty());
    let on_disk = store
        .hibernate(&ids[0], 5_000, 6 * mib, Some(&quotas))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(on_disk.status, SandboxStatus::Paused);
    assert_eq!(on_disk.hibernated_bytes, Some(6 * mib));
    assert_eq!(on_disk.paused_at, Some(1_000));
    assert_eq!(on_disk.expires_at, Some(61_000));
    assert!(
        store
            .paused_in_memory_since(10_000)
            .await
            .unwrap()
            .is_empty()
    );
    // The second, running, would pass the quota: refused, and still running.
    let refused = store
        .hibernate(&ids[1], 6_000, 5 * mib, Some(&quotas))
        .await;
    assert!(
        matches!(
            refused,
            Err(sandboxd_store::StoreError::Quota(
                sandboxd_core::quotas::QuotaExceeded::Hibernated { .. }
            ))
        ),
        "{refused:?}"
    );
    let still = store.sandbox(&ids[1]).await.unwrap().unwrap();
    assert_eq!(still.status, SandboxStatus::Running);
    assert_eq!(still.hibernated_bytes, None);
    // Within it, it goes to disk, its paused timeout starting then.
    let second = store
        .hibernate(&ids[1], 6_000, 4 * mib, Some(&quotas))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(second.paused_at, Some(6_000));
    assert_eq!(second.expires_at, Some(66_000));
    // A resume brings the first back with nothing on disk; an undone one stays paused
    // in memory.
    let resumed = store.resume(&ids[0], 7_000, None).await.unwrap().unwrap();
    assert_eq!(resumed.status, SandboxStatus::Running);
    assert_eq!(resumed.hibernated_bytes, None);
    assert_eq!(resumed.paused_at, None);
    let undone = store.unhibernate(&ids[1]).await.unwrap().unwrap();
    assert_eq!(undone.status, SandboxStatus::Paused);
    assert_eq!(undone.hibernated_bytes, None);
    // The same in the database, through another store.
    let other = db.open().await;
    assert_eq!(
        other
            .sandbox(&ids[1])
            .await
            .unwrap()
            .unwrap()
            .hibernated_bytes,
        None
    );
}

/// The lists read each row as one JSON value made by the database: every field comes
/// back as written, text that needs escaping included, newest first with ties by id.
async fn lists_read_every_field_back_newest_first(db: &TestDb) {
    let store = db.open().await;
    let boot = store.bootstrap(None).await.unwrap().unwrap();
    let key = boot.generated_key.clone().unwrap();
    let principal = store.authenticate(&key).await.unwrap().unwrap();
    let (org, project, env) = (
        &boot.organization_id,
        &boot.project_id,
        &boot.environment_id,
    );
    let mut full = sandbox(org, project, env, 5);
    full.name = "a \"quoted\" name\\ with\nlines, tabs\t and ✓ 🦀".into();
    full.template = Some("python".into());
    full.container_id = Some("c0ffee".into());
    full.status = SandboxStatus::Running;
    full.cpu = 1.25;
    full.memory_mb = 4096;
    full.pids_limit = 1_000_000;
    full.timeout_ms = i64::from(i32::MAX) * 4;
    full.network_mode = NetworkMode::Allowlist;
    full.user = Some("1000:1000".into());
    full.runtime = Some("runsc".into());
    full.expires_at = Some(9_007_199_254_740_993);
    full.last_activity_at = Some(6);
    full.env_per_exec = true;
    full.labels = [
        ("team".to_owned(), "a\"b\\c".to_owned()),
        ("é".to_owned(), String::new()),
    ]
    .into();
    full.egress = vec!["example.com".into(), "*.pypi.org:443".into()];
    full.auto_pause = Some(sandboxd_core::model::PauseMemory::Disk);
    full.fixed_timeout = true;
    full.paused_timeout_ms = 1;
    let older = sandbox(org, project, env, 1);
    let (mut tie_a, mut tie_b) = (sandbox(org, project, env, 7), sandbox(org, project, env, 7));
    if tie_a.sandbox_id > tie_b.sandbox_id {
        std::mem::swap(&mut tie_a, &mut tie_b);
    }
    for row in [&older, &tie_b, &full, &tie_a] {
        store
            .insert_sandbox(row, None, &principal.user_id, &Quotas::default())
            .await
            .unwrap();
    }
    let newest_first = vec![tie_a.clone(), tie_b.clone(), full.clone(), older.clone()];
    assert_eq!(
        store.sandboxes_in_environment(env).await.unwrap(),
        newest_first
    );
    assert_eq!(
        store.sandboxes_in_project(project).await.unwrap(),
        newest_first
    );
    assert!(
        store
            .sandboxes_in_environment("none")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.sandboxes_in_project("none").await.unwrap().is_empty());
    // `full` is running and past its end at that time; the others are creating.
    assert_eq!(
        store
            .expired_sandboxes(9_007_199_254_740_993)
            .await
            .unwrap(),
        vec![full.clone()]
    );
    assert!(store.expired_sandboxes(0).await.unwrap().is_empty());
}

async fn an_e2b_tag_names_one_build_of_its_template(db: &TestDb) {
    use sandboxd_store::E2bBuild;
    let store = db.open().await;
    let boot = store.bootstrap(None).await.unwrap().unwrap();
    let org = &boot.organization_id;
    let project = &boot.project_id;
    let built = |id: &str, name: &str, tags: &[&str], at: i64| E2bBuild {
        build_id: id.into(),
        template_id: format!("t-{name}"),
        organization_id: org.clone(),
        project_id: project.clone(),
        name: name.into(),
        cpu: None,
        memory_mb: None,
        tags: tags.iter().map(|t| (*t).to_owned()).collect(),
        steps: None,
        created_by: "u".into(),
        created_at: at,
    };
    for build in [
        built("old", "app", &["v1", "latest"], 1),
        built("new", "app", &["v2"], 2),
        built("elsewhere", "other", &["latest"], 3),
    ] {
        let mut build = build;
        store.insert_e2b_build(&mut build).await.unwrap();
        assert!(store.e2b_build_started(&build.build_id, &[]).await.unwrap());
    }
    let mut waiting = built("waiting", "app", &["v3"], 4);
    store.insert_e2b_build(&mut waiting).await.unwrap();
    let named = store.e2b_builds_named(org, project, "app").await.unwrap();
    assert_eq!(
        named
            .iter()
            .map(|b| b.build_id.as_str())
            .collect::<Vec<_>>(),
        ["new", "old"],
        "started builds, newest first"
    );
    let by_id = store
        .e2b_builds_named(org, project, &named[0].template_id)
        .await
        .unwrap();
    assert_eq!(by_id.len(), 2, "a template's id names it too");

    let after = store
        .tag_e2b_build(org, "new", &["latest".into(), "prod".into()])
        .await
        .unwrap();
    assert_eq!(
        after,
        Some(vec!["v2".into(), "latest".into(), "prod".into()])
    );
    let tags_of = |id: &'static str| {
        let store = store.clone();
        let org = org.clone();
        async move { store.e2b_build(&org, id).await.unwrap().unwrap().tags }
    };
    assert_eq!(
        tags_of("old").await,
        ["v1"],
        "the tag left the build it named"
    );
    assert_eq!(
        tags_of("elsewhere").await,
        ["latest"],
        "another template keeps its own"
    );
    assert_eq!(
        store
            .tag_e2b_build("another org", "new", &["x".into()])
            .await
            .unwrap(),
        None
    );

    let changed = store
        .untag_e2b_builds(
            org,
            project,
            "app",
            &["v1".into(), "prod".into(), "none".into()],
        )
        .await
        .unwrap();
    assert_eq!(changed, 2);
    assert!(tags_of("old").await.is_empty());
    assert_eq!(tags_of("new").await, ["v2", "latest"]);
}

async fn e2b_builds_wait_for_their_steps_and_uploads_stay_in_their_project(db: &TestDb) {
    use sandboxd_core::quotas::QuotaExceeded;
    use sandboxd_store::{E2B_BUILD_WAITS_MS, E2bBuild, MAX_E2B_FILES_BYTES, StoreError};
    let store = db.open().await;
    let boot = store.bootstrap(None).await.unwrap().unwrap();
    let org = &boot.organization_id;
    let asked = |n: usize, at: i64| E2bBuild {
        build_id: format!("b{n}"),
        template_id: format!("t{n}"),
        organization_id: org.clone(),
        project_id: boot.project_id.clone(),
        name: format!("app{n}"),
        cpu: Some(2.0),
        memory_mb: Some(512),
        tags: vec!["default".into()],
        steps: None,
        created_by: "u".into(),
        created_at: at,
    };
    let mut first = asked(0, 1_000);
    store.insert_e2b_build(&mut first).await.unwrap();
    assert_eq!(
        store.e2b_build(org, "b0").await.unwrap(),
        Some(first.clone())
    );
    assert_eq!(store.e2b_build("another org", "b0").await.unwrap(), None);
    assert_eq!(
        store.e2b_template_project(org, "t0").await.unwrap(),
        Some(boot.project_id.clone())
    );
    // At most 32 wait at once in an organization.
    for n in 1..32 {
        store.insert_e2b_build(&mut asked(n, 1_000)).await.unwrap();
    }
    assert!(matches!(
        store.insert_e2b_build(&mut asked(99, 1_000)).await,
        Err(StoreError::Quota(QuotaExceeded::WaitingBuilds {
            limit: 32
        }))
    ));
    // Steps come once; a build that could not start waits again.
    let steps = vec!["base".to_owned(), "1".into()];
    assert!(store.e2b_build_started("b0", &steps).await.unwrap());
    assert!(!store.e2b_build_started("b0", &steps).await.unwrap());
    assert_eq!(
        store.e2b_build(org, "b0").await.unwrap().unwrap().steps,
        Some(steps.clone())
    );
    store.e2b_build_not_started("b0").await.unwrap();
    assert!(store.e2b_build_started("b0", &steps).await.unwrap());
    // Those that waited past an hour go with the next request.
    store
        .insert_e2b_build(&mut asked(100, 1_000 + E2B_BUILD_WAITS_MS + 1))
        .await
        .unwrap();
    assert_eq!(store.e2b_build(org, "b1").await.unwrap(), None);
    assert!(
        store.e2b_build(org, "b0").await.unwrap().is_some(),
        "started: kept"
    );

    // Uploads are kept per project and hash, the oldest going past the bound.
    let project = &boot.project_id;
    assert!(!store.has_e2b_files(project, "h1").await.unwrap());
    store
        .put_e2b_files(org, project, "h1", b"one", 10)
        .await
        .unwrap();
    assert!(store.has_e2b_files(project, "h1").await.unwrap());
    assert!(!store.has_e2b_files("another project", "h1").await.unwrap());
    assert_eq!(
        store.e2b_files(project, "h1").await.unwrap(),
        Some(b"one".to_vec())
    );
    let big = vec![7u8; (MAX_E2B_FILES_BYTES as usize) - 2];
    store
        .put_e2b_files(org, project, "h2", &big, 11)
        .await
        .unwrap();
    assert!(
        !store.has_e2b_files(project, "h1").await.unwrap(),
        "the oldest went"
    );
    assert_eq!(
        store
            .e2b_files(project, "h2")
            .await
            .unwrap()
            .map(|a| a.len()),
        Some(big.len())
    );

    // An upload token names its key, project and hash, until it expires.
    let token = store.e2b_upload_token(project, "h3", "key1", 2_000);
    assert_eq!(
        store
            .e2b_upload_key(project, "h3", &token, 1_999)
            .as_deref(),
        Some("key1")
    );
    assert_eq!(
        store.e2b_upload_key(project, "h3", &token, 2_001),
        None,
        "expired"
    );
    assert_eq!(store.e2b_upload_key(project, "h4", &token, 1_999), None);
    assert_eq!(store.e2b_upload_key("other", "h3", &token, 1_999), None);
    let forged = token.replacen("2000", "9000", 1);
    assert_eq!(store.e2b_upload_key(project, "h3", &forged, 1_999), None);
}

async fn build_contexts_are_read_whole_while_ready_and_within_the_organization_s_bound(
    db: &TestDb,
) {
    use sandboxd_core::quotas::QuotaExceeded;
    use sandboxd_store::{ContextContents, NewTemplateContext, StoreError};
    let store = db.open().await;
    let boot = store.bootstrap(None).await.unwrap().unwrap();
    let org = &boot.organization_id;
    let begun = |id: &str, at: i64| NewTemplateContext {
        context_id: id.into(),
        organization_id: org.clone(),
        project_id: boot.project_id.clone(),
        created_by: "u".into(),
        created_at: at,
        expires_at: at + 1_000,
    };
    let contents = |bytes: i64| ContextContents {
        files: 2,
        bytes,
        chunks: 2,
        index_json: "{\"files\":{}}".into(),
    };
    // Begun: room for the organization's bound; not readable until finished.
    assert_eq!(
        store
            .begin_template_context(&begun("c1", 100), 10)
            .await
            .unwrap(),
        10
    );
    store
        .put_template_context_chunk("c1", 0, b"hello ")
        .await
        .unwrap();
    store
        .put_template_context_chunk("c1", 1, b"world")
        .await
        .unwrap();
    assert_eq!(store.template_context(org, "c1", 150).await.unwrap(), None);
    store
        .finish_template_context(org, "c1", &contents(6), 10, 150)
        .await
        .unwrap();
    let kept = store
        .template_context(org, "c1", 150)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((kept.bytes, kept.chunks, kept.files), (6, 2, 2));
    assert_eq!(kept.index_json, "{\"files\":{}}");
    assert_eq!(
        store.template_context_chunk("c1", 1).await.unwrap(),
        Some(b"world".to_vec())
    );
    // Another organization does not find it.
    assert_eq!(
        store.template_context("other", "c1", 150).await.unwrap(),
        None
    );

    // A second upload may keep what is left; one finished past the bound is refused
    // and removed with its chunks.
    assert_eq!(
        store
            .begin_template_context(&begun("c2", 200), 10)
            .await
            .unwrap(),
        4
    );
    store
        .put_template_context_chunk("c2", 0, b"xxxxxxx")
        .await
        .unwrap();
    let refused = store
        .finish_template_context(org, "c2", &contents(7), 10, 200)
        .await;
    assert!(
        matches!(
            refused,
            Err(StoreError::Quota(QuotaExceeded::Contexts { .. }))
        ),
        "{refused:?}"
    );
    assert_eq!(store.template_context_chunk("c2", 0).await.unwrap(), None);
    // Full: the next upload is refused before it begins.
    store
        .begin_template_context(&begun("c3", 300), 6)
        .await
        .unwrap_err();

    // Expired: not read, and removed with its chunks (an unfinished one too).
    store
        .begin_template_context(&begun("c4", 400), 100)
        .await
        .unwrap();
    store
        .put_template_context_chunk("c4", 0, b"half")
        .await
        .unwrap();
    assert_eq!(
        store.template_context(org, "c1", 1_100).await.unwrap(),
        None
    );
    assert_eq!(
        store.remove_expired_template_contexts(1_100).await.unwrap(),
        1
    );
    assert_eq!(store.template_context_chunk("c1", 0).await.unwrap(), None);
    assert_eq!(
        store.remove_expired_template_contexts(1_400).await.unwrap(),
        1
    );
    assert_eq!(store.template_context_chunk("c4", 0).await.unwrap(), None);
}
