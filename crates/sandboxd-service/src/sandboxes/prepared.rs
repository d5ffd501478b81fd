//! Prepared images on each engine (`sandboxd_core::prepared_images`): which ones this
//! server knows are made, and making one in the background once a create had to have
//! its workdir made by the engine. A create of an image, workdir and owner whose
//! prepared image is known is made of it; one whose prepared image is gone from the
//! engine is made of its own image again. One that could not be made is not tried
//! again for a while.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sandboxd_contracts::{Engine, EnsuredImage};
use sandboxd_core::model::Sandbox;
use sandboxd_core::plan;
use sandboxd_core::prepared_images::{prepared_name, worth_preparing};
use tracing::{info, warn};

use super::Sandboxes;

/// How long a prepared image that could not be made is not tried again.
const RETRY_AFTER: Duration = Duration::from_secs(600);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    /// `None`: the local engine.
    server_id: Option<String>,
    /// The prepared image's name (its image's id, the workdir and the owner).
    name: String,
    /// The id of the image it is made from.
    image_id: String,
}

#[derive(Debug, Clone, Copy)]
enum State {
    Ready,
    Making,
    Failed(Instant),
}

/// The prepared images this server knows of, per engine.
#[derive(Debug, Default)]
pub(crate) struct Prepared {
    state: Mutex<HashMap<Key, State>>,
}

impl Prepared {
    fn state(&self) -> std::sync::MutexGuard<'_, HashMap<Key, State>> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn is_ready(&self, key: &Key) -> bool {
        matches!(self.state().get(key), Some(State::Ready))
    }

    /// Whether `key` is to be made now (and marks it being made).
    fn begin(&self, key: &Key) -> bool {
        let mut state = self.state();
        match state.get(key) {
            Some(State::Ready | State::Making) => false,
            Some(State::Failed(at)) if at.elapsed() < RETRY_AFTER => false,
            _ => {
                state.insert(key.clone(), State::Making);
                true
            }
        }
    }

    fn end(&self, key: &Key, made: bool) {
        let now = if made {
            State::Ready
        } else {
            State::Failed(Instant::now())
        };
        self.state().insert(key.clone(), now);
    }

    fn forget(&self, key: &Key) {
        self.state().remove(key);
    }

    /// Forgets every image prepared from the image `image_id`; answers them.
    fn forget_made_from(&self, image_id: &str) -> Vec<Key> {
        let mut state = self.state();
        let gone: Vec<Key> = state
            .keys()
            .filter(|key| key.image_id == image_id)
            .cloned()
            .collect();
        for key in &gone {
            state.remove(key);
        }
        gone
    }

    fn ready(&self) -> Vec<String> {
        let mut ready: Vec<String> = self
            .state()
            .iter()
            .filter(|(_, state)| matches!(state, State::Ready))
            .map(|(key, _)| key.name.clone())
            .collect();
        ready.sort();
        ready
    }
}

/// The prepared image a sandbox's container may be made of.
#[derive(Debug, Clone)]
pub(crate) struct Preparation {
    key: Key,
    owner: (u32, u32),
    /// Known to be made: the container is made of it.
    pub ready: bool,
}

impl Preparation {
    /// The image the container is made of.
    pub fn image<'a>(&'a self, row: &'a Sandbox) -> &'a str {
        if self.ready {
            &self.key.name
        } else {
            &row.image
        }
    }
}

/// The owner a sandbox's files get, when known before its container starts: its
/// template's user, or its image's when written as `uid:gid`, or root.
fn owner_before_start(row: &Sandbox, image: &EnsuredImage) -> Option<(u32, u32)> {
    if let Some(user) = &row.user {
        return plan::parse_user(user);
    }
    let configured = image.user.trim();
    if configured.is_empty() {
        return Some((0, 0));
    }
    configured
        .contains(':')
        .then(|| plan::parse_user(configured))
        .flatten()
}

impl Sandboxes {
    /// The prepared images this server knows are made (on any engine), by name.
    pub fn prepared_images(&self) -> Vec<String> {
        self.service.inner.prepared.ready()
    }

    /// The prepared image a sandbox of `row` may be made of, when it can gain from one.
    pub(crate) fn preparation(&self, row: &Sandbox, image: &EnsuredImage) -> Option<Preparation> {
        let owner = owner_before_start(row, image)?;
        if !worth_preparing(&row.image, &image.id, &row.workdir, owner) {
            return None;
        }
        let key = Key {
            server_id: row.server_id.clone(),
            name: prepared_name(&image.id, &row.workdir, owner),
            image_id: image.id.clone(),
        };
        let ready = self.service.inner.prepared.is_ready(&key);
        Some(Preparation { key, owner, ready })
    }

    /// The prepared image is gone from its engine: it is made again when next needed.
    pub(crate) fn prepared_gone(&self, preparation: &Preparation) {
        warn!(image = %preparation.key.name, "a prepared image is gone from its engine; made again when needed");
        self.service.inner.prepared.forget(&preparation.key);
    }

    /// Removes the images prepared from the image `image_id` (a built template's, being
    /// removed) from the engines they were made on, so that its layers go with it.
    pub(crate) async fn remove_prepared_from(&self, image_id: &str) {
        for key in self.service.inner.prepared.forget_made_from(image_id) {
            let Ok(engine) = self
                .service
                .fleet()
                .engine_of(key.server_id.as_deref())
                .await
            else {
                continue;
            };
            if let Err(error) = engine.remove_image(&key.name).await {
                warn!(image = %key.name, error = %sandboxd_core::error::chain(&error), "could not remove a prepared image");
            }
        }
    }

    /// The engine had to make the workdir of a sandbox of `row`: its prepared image is
    /// made in the background (once), so that the next create does not.
    pub(crate) fn prepare_later(
        &self,
        engine: &Arc<dyn Engine>,
        row: &Sandbox,
        preparation: &Preparation,
    ) {
        let prepared = &self.service.inner.prepared;
        if preparation.ready || !prepared.begin(&preparation.key) {
            return;
        }
        let service = self.service.clone();
        let engine = engine.clone();
        let key = preparation.key.clone();
        let owner = preparation.owner;
        let (image, image_id, workdir) = (
            row.image.clone(),
            preparation.key.image_id.clone(),
            row.workdir.clone(),
        );
        self.service.inner.removals.spawn(async move {
            let started = Instant::now();
            let outcome = engine
                .prepare_image(&image_id, &key.name, &workdir, owner)
                .await;
            match &outcome {
                Ok(()) => {
                    info!(%image, prepared = %key.name, %workdir, ms = started.elapsed().as_millis() as u64, "image prepared for sandboxes")
                }
                Err(error) => {
                    warn!(%image, %workdir, error = %sandboxd_core::error::chain(error), "could not prepare an image for sandboxes; its creates make their workdir")
                }
            }
            service.inner.prepared.end(&key, outcome.is_ok());
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> Key {
        Key {
            server_id: None,
            name: name.into(),
            image_id: format!("sha256:{name}"),
        }
    }

    #[test]
    fn an_image_is_made_once_and_not_retried_at_once_after_a_failure() {
        let prepared = Prepared::default();
        assert!(prepared.begin(&key("a")));
        assert!(!prepared.begin(&key("a")), "being made");
        assert!(!prepared.is_ready(&key("a")));
        prepared.end(&key("a"), true);
        assert!(prepared.is_ready(&key("a")));
        assert!(!prepared.begin(&key("a")), "made");
        prepared.forget(&key("a"));
        assert!(prepared.begin(&key("a")), "gone: made again");

        assert!(prepared.begin(&key("b")));
        prepared.end(&key("b"), false);
        assert!(!prepared.begin(&key("b")), "failed a moment ago");
        assert!(!prepared.is_ready(&key("b")));

        prepared.end(&key("a"), true);
        assert_eq!(prepared.forget_made_from("sha256:a"), vec![key("a")]);
        assert!(prepared.ready().is_empty(), "its image went");
        assert!(!prepared.begin(&key("b")), "another image's is kept");
    }
}
