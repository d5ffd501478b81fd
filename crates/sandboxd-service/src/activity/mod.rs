//! A sandbox's activity timeline: every part that does something in a sandbox notes it
//! here (commands, files, terminals, ports, its life), with who asked; entries go to the
//! process's journal, which writes them without holding up the request, and are read
//! back by `sandbox.activity` from any replica.
//!
//! `Timeline` (held by the service) takes the entries; `Activity` (a part) reads them
//! and makes the masker that hides the sandbox's secret values in them. A timeline
//! outlives its sandbox for `[activity] retention` (`Duties::expire_activity_once`).

mod book;
pub(crate) mod recording;

use std::sync::Arc;
use std::time::Instant;

pub use book::ACTIVITY_DROPPED;
use sandboxd_core::activity::{
    ActivityBy, ActivityEntry, ActivityRecord, CommandActivity, Keeping, MAX_COMMAND_CHARS,
    MAX_LINE_CHARS, MAX_TEXT_CHARS, Masker, shown,
};
use sandboxd_core::model::{Principal, Sandbox};
use sandboxd_core::validate::ActivityRead;
use sandboxd_store::Store;

use crate::journal::{Journal, page_of};
use crate::{Service, ServiceError, now_ms};
use book::ActivityBook;

/// Who asked, as an entry says.
pub(crate) fn by(caller: &Principal) -> Option<ActivityBy> {
    Some(ActivityBy {
        key_id: caller.key_id.clone(),
        user_id: caller.user_id.clone(),
    })
}

/// The process's timeline writer, and whether entries are kept at all.
#[derive(Debug)]
pub(crate) struct Timeline {
    journal: Journal<ActivityBook>,
    on: bool,
    keeping: Keeping,
}

/// An entry written when something started, to be written again when it ends.
#[derive(Debug, Clone)]
pub(crate) struct Noted {
    entry_id: String,
    at: i64,
    started: Instant,
}

impl Noted {
    /// Milliseconds since it started.
    pub(crate) fn elapsed_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }
}

impl Timeline {
    pub(crate) fn new(store: Store, keeping: Keeping, on: bool) -> Self {
        Self {
            journal: Journal::new(ActivityBook { store, keeping }),
            on,
            keeping,
        }
    }

    pub(crate) fn keeping(&self) -> Keeping {
        self.keeping
    }

    /// Starts an entry now, without writing it: `write` writes it (again).
    pub(crate) fn start(&self) -> Noted {
        Noted {
            // No id (nothing is written) when timelines are not kept.
            entry_id: if self.on {
                sandboxd_store::new_id().unwrap_or_default()
            } else {
                String::new()
            },
            at: now_ms(),
            started: Instant::now(),
        }
    }

    /// Writes an entry of `sandbox` that happened now.
    pub(crate) fn note(&self, sandbox: &Sandbox, entry: ActivityEntry) {
        let noted = self.start();
        self.write(sandbox, &noted, entry);
    }

    /// Writes `noted`'s entry as it stands now (a later write replaces an earlier one).
    pub(crate) fn write(&self, sandbox: &Sandbox, noted: &Noted, entry: ActivityEntry) {
        self.write_for(
            (&sandbox.sandbox_id, &sandbox.organization_id),
            noted,
            entry,
        );
    }

    /// Writes the entry of an audited action on a sandbox (`sandboxd_core::activity::
    /// of_audited`), if it has one.
    pub(crate) fn note_audited(
        &self,
        (sandbox_id, organization_id): (&str, &str),
        actor: Option<&Principal>,
        action: &str,
        metadata: &serde_json::Value,
    ) {
        if let Some(mut entry) = sandboxd_core::activity::of_audited(action, metadata) {
            entry.by = actor.and_then(by);
            self.write_for((sandbox_id, organization_id), &self.start(), entry);
        }
    }

    fn write_for(
        &self,
        (sandbox_id, organization_id): (&str, &str),
        noted: &Noted,
        entry: ActivityEntry,
    ) {
        if !self.on || noted.entry_id.is_empty() {
            return;
        }
        self.journal.record(
            organization_id,
            ActivityRecord {
                entry_id: noted.entry_id.clone(),
                sandbox_id: sandbox_id.to_owned(),
                organization_id: organization_id.to_owned(),
                position: String::new(),
                at: noted.at,
                entry,
            },
        );
    }
}

/// A page of a sandbox's timeline.
#[derive(Debug, Clone)]
pub struct ActivityPage {
    pub entries: Vec<ActivityRecord>,
    /// The cursor to read on from.
    pub next: Option<String>,
    /// Whether more were written after these.
    pub more: bool,
    /// Entries of this timeline trimmed or never written.
    pub dropped: u64,
}

/// Reading timelines, and what entries need from the sandbox.
#[derive(Debug, Clone)]
pub struct Activity {
    service: Service,
}

impl Activity {
    pub(crate) fn new(service: Service) -> Self {
        Self { service }
    }

    /// Entries of the timeline of a sandbox the caller may read (or could, before it
    /// was removed), as `read` asks.
    #[tracing::instrument(skip_all, fields(sandbox_id = %read.sandbox_id))]
    pub async fn read(
        &self,
        caller: &Principal,
        read: &ActivityRead,
    ) -> Result<ActivityPage, ServiceError> {
        self.service
            .access()
            .timeline_for(caller, &read.sandbox_id)
            .await?;
        let store = self.service.store();
        if read.latest {
            let entries = store
                .latest_activity(&read.sandbox_id, &read.kinds, read.limit)
                .await?;
            let next = entries.last().map(|entry| entry.position.clone());
            return Ok(ActivityPage {
                entries,
                next,
                more: false,
                dropped: store.activity_dropped(&read.sandbox_id).await?,
            });
        }
        let read_on = store
            .activity(
                &read.sandbox_id,
                read.after.as_deref(),
                &read.kinds,
                read.limit + 1,
            )
            .await?;
        let (entries, next, more) = page_of(read_on, read.limit, read.after.as_ref(), |entry| {
            &entry.position
        });
        Ok(ActivityPage {
            entries,
            next,
            more,
            dropped: store.activity_dropped(&read.sandbox_id).await?,
        })
    }

    /// A command's entry, from before it runs to its end: written by `finish` or
    /// `fail`, or, when dropped before (its caller went away and the command with it),
    /// as cancelled. Nothing is written when the sandbox's variables cannot be read.
    pub(crate) async fn command(
        &self,
        sandbox: &Sandbox,
        caller: &Principal,
        action: &'static str,
        (command, cwd): (&str, &str),
        env: &[(String, String)],
    ) -> PendingCommand {
        let masker = self.masker(sandbox, env).await;
        let activity = masker.as_ref().map(|masker| CommandActivity {
            command: shown(&masker.mask(command), MAX_COMMAND_CHARS),
            cwd: Some(shown(&masker.mask(cwd), MAX_TEXT_CHARS)),
            ..CommandActivity::default()
        });
        PendingCommand {
            timeline: self.service.inner.timeline.clone(),
            sandbox: (sandbox.sandbox_id.clone(), sandbox.organization_id.clone()),
            noted: self.service.timeline().start(),
            action,
            by: by(caller),
            masker: masker.unwrap_or_default(),
            activity,
        }
    }

    /// A terminal session's recording, as asciicast v2, of a sandbox the caller may read
    /// (or could, before it was removed).
    #[tracing::instrument(skip_all, fields(sandbox_id = %sandbox_id))]
    pub async fn recording(
        &self,
        caller: &Principal,
        sandbox_id: &str,
        terminal_id: &str,
    ) -> Result<String, ServiceError> {
        self.service
            .access()
            .timeline_for(caller, sandbox_id)
            .await?;
        self.service
            .store()
            .recording(sandbox_id, terminal_id)
            .await?
            .ok_or(ServiceError::NotFound("recording"))
    }

    /// The recording of a new terminal session of `sandbox`, within its bounds: `None`
    /// when terminals are not recorded, the sandbox's recordings are full, or its
    /// secrets cannot be read to mask them.
    pub(crate) async fn start_recording(
        &self,
        sandbox: &Sandbox,
        terminal_id: &str,
        size: (u16, u16),
    ) -> Option<recording::Recording> {
        let keeping = self.service.timeline().keeping();
        if !self.service.timeline().on || keeping.recording_bytes == 0 {
            return None;
        }
        let store = self.service.store();
        let held = match store.recorded_bytes(&sandbox.sandbox_id).await {
            Ok(held) => held,
            Err(error) => {
                tracing::warn!(sandbox_id = %sandbox.sandbox_id, error = %sandboxd_core::error::chain(&error), "cannot read how much a sandbox has recorded; its terminal is not recorded");
                return None;
            }
        };
        let room = keeping
            .recordings_bytes
            .saturating_sub(held)
            .min(keeping.recording_bytes);
        if room == 0 {
            return None;
        }
        let masker = self.masker(sandbox, &[]).await?;
        Some(recording::Recording::start(
            store.clone(),
            (sandbox.sandbox_id.clone(), terminal_id.to_owned()),
            sandboxd_core::recording::CastWriter::new(masker, room),
            size,
            keeping.record_input,
        ))
    }

    /// The masker of a sandbox's secret values and of `extra` variables' values;
    /// `None` when its variables cannot be read (then nothing from it is kept).
    pub(crate) async fn masker(
        &self,
        sandbox: &Sandbox,
        extra: &[(String, String)],
    ) -> Option<Masker> {
        let vars = match self.service.sandbox_vars(sandbox).await {
            Ok(vars) => vars,
            Err(error) => {
                tracing::warn!(sandbox_id = %sandbox.sandbox_id, error = %sandboxd_core::error::chain(&error), "cannot read a sandbox's variables to mask its activity");
                return None;
            }
        };
        Some(Masker::new(
            vars.iter().chain(extra).map(|(_, value)| value.clone()),
        ))
    }
}

/// A command's entry until it is written (see `Activity::command`).
#[derive(Debug)]
pub(crate) struct PendingCommand {
    timeline: Arc<Timeline>,
    /// The sandbox's id and organization.
    sandbox: (String, String),
    noted: Noted,
    action: &'static str,
    by: Option<ActivityBy>,
    masker: Masker,
    /// `None` once written, or when nothing is to be written.
    activity: Option<CommandActivity>,
}

impl PendingCommand {
    /// Writes the entry of the command that ran, as `fill` completes it (with the
    /// masker of its secrets); its duration is set.
    pub(crate) fn finish(mut self, fill: impl FnOnce(&mut CommandActivity, &Masker)) {
        if let Some(mut activity) = self.activity.take() {
            fill(&mut activity, &self.masker);
            self.write(activity);
        }
    }

    /// Writes the entry of a command started in the background as `process_id`: its
    /// end is not written here.
    pub(crate) fn started(mut self, process_id: &str) {
        if let Some(mut activity) = self.activity.take() {
            activity.process_id = Some(process_id.to_owned());
            let entry = ActivityEntry::command(self.action, self.by.clone(), activity);
            self.timeline
                .write_for((&self.sandbox.0, &self.sandbox.1), &self.noted, entry);
        }
    }

    /// Writes the entry of a command that could not run.
    pub(crate) fn fail(self, error: &ServiceError) {
        let error = shown(&error.to_string(), MAX_LINE_CHARS);
        self.finish(|activity, _| activity.error = Some(error));
    }

    fn write(&self, mut activity: CommandActivity) {
        activity.duration_ms = Some(self.noted.elapsed_ms());
        let entry = ActivityEntry::command(self.action, self.by.clone(), activity);
        self.timeline
            .write_for((&self.sandbox.0, &self.sandbox.1), &self.noted, entry);
    }
}

impl Drop for PendingCommand {
    fn drop(&mut self) {
        if let Some(mut activity) = self.activity.take()
            && tokio::runtime::Handle::try_current().is_ok()
        {
            activity.error = Some("cancelled: its caller went away".into());
            self.write(activity);
        }
    }
}
