//! Schedulers of the background passes: a tick, one pass, log the outcome. A pass that
//! is running when the server stops finishes first.

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::warn;

use crate::ServerConfig;
use crate::service::{Service, ServiceError};

/// How often the warm pools are topped up (each pass fills them completely).
const POOL_REFILL_INTERVAL: Duration = Duration::from_millis(200);

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
                        warn!(loop_name = name, %error, "background pass failed");
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

/// Starts the reaper, the warm-pool refill and the periodic reconcile.
pub fn spawn(
    service: Service,
    config: &ServerConfig,
    stop: watch::Receiver<bool>,
) -> Vec<JoinHandle<()>> {
    let reaper = service.clone();
    let filler = service.clone();
    let reconciler = service;
    vec![
        every(config.reaper_interval, stop.clone(), "reaper", move || {
            let service = reaper.clone();
            timed(crate::metrics::REAPER_DURATION, async move {
                service.reap_once().await.map(|_| ())
            })
        }),
        every(
            POOL_REFILL_INTERVAL,
            stop.clone(),
            "pool refill",
            move || {
                let service = filler.clone();
                async move {
                    service.fill_pools_once().await;
                    Ok(())
                }
            },
        ),
        every(config.reconcile_interval, stop, "reconcile", move || {
            let service = reconciler.clone();
            timed(crate::metrics::RECONCILE_DURATION, async move {
                service.reconcile_once().await.map(|_| ())
            })
        }),
    ]
}
