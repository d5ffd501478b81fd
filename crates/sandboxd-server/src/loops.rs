//! Schedulers of the background passes: a tick, one pass, log the outcome. A pass that
//! is running when the server stops finishes first.
//!
//! Replicas on one database share the passes: each pass runs on the replica that holds
//! its duty (`Store::leases`), taken through the database. [`REAPER`] kills expired
//! sandboxes; [`ENGINES`] is everything that acts on the engines' containers (reconcile,
//! reviving a container that died, the warm pools), one duty so that the replica that
//! reconciles knows every warm member it must keep. On SQLite the one server holds both.
//!
//! The reaper, the warm-pool refill (every 200 ms) and reconcile run on their intervals;
//! a replica that does not reconcile only listens again for its own agents and lets go of
//! those that ended elsewhere. On every replica: the lease loop (every third of the
//! grace), the usage readings of the sandboxes whose agents it holds (every 5 s) and the
//! replica heartbeat. The watch on the local engine's container deaths (on
//! the replica holding `engines`) revives a container 300 ms after it died and, when the
//! event stream comes back after an outage, waits for the engine to answer and reconciles
//! it at once; `watch_fleet` gives every remote server's engine such a watch of its own
//! once it is connected (checked every 2 s, renewed when the server's engine is made
//! again). A follower of remote-server changes from other replicas drops the engines made
//! for them.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use sandboxd_contracts::Engine;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{info, warn};

use crate::Config;
use crate::service::{Service, ServiceError};

/// The duty of the reaper.
pub const REAPER: &str = "reaper";
/// The duty of reconcile, revival and the warm pools.
pub const ENGINES: &str = "engines";

/// Whether this replica runs `duty` now.
async fn holds(service: &Service, duty: &str) -> bool {
    service.store().leases().hold(duty).await
}

/// How often the warm pools are topped up (each pass fills them completely).
const POOL_REFILL_INTERVAL: Duration = Duration::from_millis(200);

/// How often images past their keeping time are looked for (`[builds] keep_images_hours`).
const IMAGES_COLLECTED_EVERY: Duration = Duration::from_secs(600);

fn every<F, Fut>(
    period: Duration,
    mut stop: watch::Receiver<bool>,
    name: &'static str,
    mut pass: F,
) -> JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = Result<(), ServiceError>> + Send,
{
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(period);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            tokio::select! {
                _ = stop.changed() => return,
                _ = ticks.tick() => {
                    if let Err(error) = pass().await {
                        warn!(loop_name = name, error = %sandboxd_core::error::chain(&error), "background pass failed");
                    }
                }
            }
        }
    })
}

/// Runs a pass and records its duration in the histogram `name`.
async fn timed<T>(name: &'static str, pass: impl Future<Output = T>) -> T {
    let started = std::time::Instant::now();
    let outcome = pass.await;
    metrics::histogram!(name).record(started.elapsed().as_secs_f64());
    outcome
}

/// How long after a container's death its revival waits, so that a deliberate restart
/// (kill, then start) is not raced.
const REVIVE_DELAY: Duration = Duration::from_millis(300);

/// How often the engines of remote servers connected meanwhile get their watch.
const FLEET_WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// Watches the deaths on every remote server's engine once it is connected (one watch
/// per server, renewed when its engine is made again after a change of the server).
fn watch_fleet(service: Service, mut stop: watch::Receiver<bool>) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut watched: HashMap<String, (usize, JoinHandle<()>)> = HashMap::new();
        loop {
            let engines = service.fleet().remote_engines();
            // A server forgotten (removed, or reached otherwise) is no longer watched: its
            // old connection goes with the watch.
            watched.retain(|server_id, (_, task)| {
                let kept = engines.iter().any(|(id, _)| id == server_id);
                if !kept {
                    task.abort();
                }
                kept
            });
            for (server_id, engine) in engines {
                // The engine's address tells a new engine of the server from the one watched.
                let identity = Arc::as_ptr(&engine) as *const () as usize;
                if watched
                    .get(&server_id)
                    .is_some_and(|(seen, _)| *seen == identity)
                {
                    continue;
                }
                let task = watch_deaths(
                    service.clone(),
                    engine,
                    Some(server_id.clone()),
                    stop.clone(),
                );
                if let Some((_, old)) = watched.insert(server_id, (identity, task)) {
                    old.abort();
                }
            }
            tokio::select! {
                _ = stop.changed() => break,
                _ = tokio::time::sleep(FLEET_WATCH_INTERVAL) => {}
            }
        }
        for (_, (_, task)) in watched {
            task.abort();
        }
    })
}

/// Follows an engine's container deaths and revives each (see `Service::revive`); the
/// subscription is renewed whenever the engine connection ends. When the engine comes
/// back from an outage (stopped, restarted: every container stopped with it, and no
/// death was seen while it was away), a reconcile pass of that engine runs at once and
/// starts its sandboxes' containers again, without waiting for the periodic pass.
fn watch_deaths(
    service: Service,
    engine: Arc<dyn Engine>,
    server_id: Option<String>,
    mut stop: watch::Receiver<bool>,
) -> JoinHandle<()> {
    use futures_util::StreamExt as _;
    tokio::spawn(async move {
        let mut backoff = Duration::from_millis(100);
        let mut first = true;
        loop {
            if !first {
                // The stream ended: wait until the engine answers, then reconcile it once.
                while engine.host().await.is_err() {
                    tokio::select! {
                        _ = stop.changed() => return,
                        _ = tokio::time::sleep(backoff) => {}
                    }
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
                if holds(&service, ENGINES).await {
                    match service.duties().reconcile_on(server_id.as_deref()).await {
                        Ok(report) => info!(
                            server_id = server_id.as_deref().unwrap_or("local"),
                            restarted = report.restarted.len(),
                            "the engine answers again; its sandboxes were reconciled"
                        ),
                        Err(error) => {
                            warn!(error = %sandboxd_core::error::chain(&error), "the engine answers again but could not be reconciled yet")
                        }
                    }
                }
            }
            first = false;
            let mut deaths = engine.container_deaths(service.instance_id());
            loop {
                let death = tokio::select! {
                    _ = stop.changed() => return,
                    death = deaths.next() => death,
                };
                match death {
                    Some(Ok(death)) => {
                        backoff = Duration::from_millis(100);
                        let service = service.clone();
                        tokio::spawn(async move {
                            tokio::time::sleep(REVIVE_DELAY).await;
                            if !holds(&service, ENGINES).await {
                                return;
                            }
                            if let Err(error) = service.sandboxes().revive(&death).await {
                                warn!(sandbox_id = %death.sandbox_id, error = %sandboxd_core::error::chain(&error), "cannot act on a stopped container");
                            }
                        });
                    }
                    Some(Err(error)) => {
                        warn!(error = %sandboxd_core::error::chain(&error), "the engine's event stream failed; subscribing again");
                        break;
                    }
                    None => break,
                }
            }
            tokio::select! {
                _ = stop.changed() => return,
                _ = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(Duration::from_secs(2));
        }
    })
}

/// Reconciles when this replica holds [`ENGINES`]; else only listens again for the agents
/// of its own sandboxes (after a restart), which no other replica can do.
/// Either way, it lets go of the sockets of its sandboxes that ended through another
/// replica.
pub async fn reconcile_or_restore(service: &Service) -> Result<(), ServiceError> {
    if holds(service, ENGINES).await {
        timed(
            crate::metrics::RECONCILE_DURATION,
            service.duties().reconcile_once(),
        )
        .await?;
    } else {
        service.duties().restore_agents_once().await?;
    }
    service.duties().release_ended_agents_once().await
}

/// Drops the engines of remote servers another replica changed (on PostgreSQL).
fn follow_server_changes(service: Service, mut stop: watch::Receiver<bool>) -> JoinHandle<()> {
    use tokio::sync::broadcast::error::RecvError;
    tokio::spawn(async move {
        let mut changes = service.store().server_changes();
        loop {
            let change = tokio::select! {
                _ = stop.changed() => return,
                change = changes.recv() => change,
            };
            match change {
                Ok(change) => service.fleet().servers_changed(&change),
                Err(RecvError::Lagged(_)) => {
                    service
                        .fleet()
                        .servers_changed(&sandboxd_store::ServerChange::All);
                }
                Err(RecvError::Closed) => return,
            }
        }
    })
}

/// Starts the reaper, the warm-pool refill, the periodic reconcile and the watch on
/// containers that stop.
pub fn spawn(
    service: Service,
    config: &Config,
    stop: watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let reaper = service.clone();
    let filler = service.clone();
    let collector = service.clone();
    let watcher = watch_deaths(
        service.clone(),
        service.engine().clone(),
        None,
        stop.clone(),
    );
    let fleet = watch_fleet(service.clone(), stop.clone());
    let server_changes = follow_server_changes(service.clone(), stop.clone());
    let beating = service.clone();
    let sampling = service.duties();
    let leasing = service.duties();
    let reconciler = service;
    vec![
        // Every replica renews the leases of the agents it holds.
        every(
            leasing.lease_interval(),
            stop.clone(),
            "sandbox leases",
            move || {
                let duties = leasing.clone();
                async move {
                    duties.lease_once().await;
                    Ok(())
                }
            },
        ),
        // Every replica keeps the readings of the sandboxes whose agents it holds.
        every(
            Duration::from_millis(sandboxd_core::usage_history::SAMPLE_EVERY_MS as u64),
            stop.clone(),
            "usage readings",
            move || {
                let duties = sampling.clone();
                async move {
                    duties.sample_usage_once().await;
                    Ok(())
                }
            },
        ),
        every(
            crate::service::HEARTBEAT_EVERY,
            stop.clone(),
            "replica heartbeat",
            move || {
                let service = beating.clone();
                async move {
                    service.replicas().heartbeat_once().await;
                    Ok(())
                }
            },
        ),
        watcher,
        fleet,
        server_changes,
        every(
            config.reaper_interval(),
            stop.clone(),
            "reaper",
            move || {
                let service = reaper.clone();
                async move {
                    if !holds(&service, REAPER).await {
                        return Ok(());
                    }
                    timed(
                        crate::metrics::REAPER_DURATION,
                        service.duties().reap_once(),
                    )
                    .await
                    .map(|_| ())
                }
            },
        ),
        every(
            IMAGES_COLLECTED_EVERY,
            stop.clone(),
            "image collection",
            move || {
                let service = collector.clone();
                async move {
                    if holds(&service, ENGINES).await {
                        service.duties().collect_images_once().await?;
                        service.duties().collect_contexts_once().await?;
                        service.duties().expire_activity_once().await?;
                    }
                    Ok(())
                }
            },
        ),
        every(
            POOL_REFILL_INTERVAL,
            stop.clone(),
            "pool refill",
            move || {
                let service = filler.clone();
                async move {
                    if holds(&service, ENGINES).await {
                        service.pools().fill_once().await;
                    }
                    Ok(())
                }
            },
        ),
        every(config.reconcile_interval(), stop, "reconcile", move || {
            let service = reconciler.clone();
            async move { reconcile_or_restore(&service).await }
        }),
    ]
}
