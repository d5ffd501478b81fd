//! Long tool output held in memory so a model can read it page by page: bounded in
//! count, bytes and age, and readable only by the organization and sandbox it came from.
//!
//! Per organization and sandbox, for 10 minutes; 16 MiB per organization and 64 MiB in
//! all, the largest holder's oldest output going first.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sandboxd_core::api::{HeldStream, HeldText, MORE_OUTPUT_NEXT, MoreOutput, OutputPage};
use sandboxd_core::paging::{INLINE_PAGE_BYTES, page};
use sandboxd_store::StoreError;

/// How long held output stays readable.
pub const HOLD_FOR: Duration = Duration::from_secs(10 * 60);
/// Held output of all sessions together never exceeds this; past it, the organization
/// holding the most gives way first (its oldest), so one cannot push out another's.
pub const MAX_HELD_BYTES: usize = 64 * 1024 * 1024;
pub const MAX_HELD_OUTPUTS: usize = 1024;
/// One organization's share: past it, its own oldest output goes.
pub const MAX_HELD_BYTES_PER_ORG: usize = 16 * 1024 * 1024;
pub const MAX_HELD_OUTPUTS_PER_ORG: usize = 256;

/// Who may read a held output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub organization_id: String,
    pub sandbox_id: String,
}

#[derive(Debug)]
struct Held {
    id: String,
    owner: Owner,
    texts: Vec<(HeldStream, String)>,
    bytes: usize,
    at: Instant,
}

/// The held outputs of every MCP session of a server.
#[derive(Debug, Default)]
pub struct HeldOutputs {
    inner: Mutex<Shelf>,
}

#[derive(Debug, Default)]
struct Shelf {
    /// Oldest first.
    held: VecDeque<Held>,
    bytes: usize,
}

impl Shelf {
    /// Drops what expired, then keeps `organization` within its share (its own oldest
    /// first), then everything within the total (the largest holder's oldest first).
    fn expire(&mut self, now: Instant, organization: &str) {
        self.held
            .retain(|held| now.duration_since(held.at) < HOLD_FOR);
        loop {
            let (count, bytes) = self.usage_of(organization);
            if count <= MAX_HELD_OUTPUTS_PER_ORG && bytes <= MAX_HELD_BYTES_PER_ORG {
                break;
            }
            self.drop_oldest_of(organization);
        }
        while self.held.len() > MAX_HELD_OUTPUTS
            || self.held.iter().map(|h| h.bytes).sum::<usize>() > MAX_HELD_BYTES
        {
            let Some(largest) = self.largest_holder() else {
                break;
            };
            self.drop_oldest_of(&largest);
        }
        self.bytes = self.held.iter().map(|h| h.bytes).sum();
    }

    fn usage_of(&self, organization: &str) -> (usize, usize) {
        self.held
            .iter()
            .filter(|h| h.owner.organization_id == organization)
            .fold((0, 0), |(count, bytes), h| (count + 1, bytes + h.bytes))
    }

    fn largest_holder(&self) -> Option<String> {
        let mut totals: std::collections::HashMap<&str, usize> = Default::default();
        for held in &self.held {
            *totals.entry(&held.owner.organization_id).or_default() += held.bytes;
        }
        totals
            .into_iter()
            .max_by_key(|(_, bytes)| *bytes)
            .map(|(organization, _)| organization.to_owned())
    }

    fn drop_oldest_of(&mut self, organization: &str) {
        if let Some(at) = self
            .held
            .iter()
            .position(|h| h.owner.organization_id == organization)
        {
            self.held.remove(at);
        }
    }
}

impl HeldOutputs {
    /// Cuts each text to its first page in place. When any was longer, holds all of them
    /// in full and says so; otherwise holds nothing.
    pub fn hold_long(
        &self,
        owner: Owner,
        texts: &mut [(HeldStream, &mut String)],
    ) -> Result<Option<MoreOutput>, StoreError> {
        self.hold_long_at(owner, texts, Instant::now())
    }

    fn hold_long_at(
        &self,
        owner: Owner,
        texts: &mut [(HeldStream, &mut String)],
        now: Instant,
    ) -> Result<Option<MoreOutput>, StoreError> {
        if texts
            .iter()
            .all(|(_, text)| text.len() <= INLINE_PAGE_BYTES)
        {
            return Ok(None);
        }
        let mut more = MoreOutput {
            output_id: format!("out_{}", sandboxd_store::new_id()?),
            stdout: None,
            stderr: None,
            content: None,
            next: MORE_OUTPUT_NEXT,
        };
        let mut kept = Vec::with_capacity(texts.len());
        for (stream, text) in texts.iter_mut() {
            let full = std::mem::take(*text);
            let first = page(&full, 0, INLINE_PAGE_BYTES);
            text.push_str(first.text);
            let held = HeldText {
                bytes: full.len() as u64,
                shown: first.end as u64,
            };
            match stream {
                HeldStream::Stdout => more.stdout = Some(held),
                HeldStream::Stderr => more.stderr = Some(held),
                HeldStream::Content => more.content = Some(held),
            }
            kept.push((*stream, full));
        }
        let bytes = kept.iter().map(|(_, text)| text.len()).sum();
        let organization = owner.organization_id.clone();
        let mut shelf = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        shelf.held.push_back(Held {
            id: more.output_id.clone(),
            owner,
            texts: kept,
            bytes,
            at: now,
        });
        shelf.expire(now, &organization);
        Ok(Some(more))
    }

    /// A page of a held text, or `None` when it does not exist for this owner (never
    /// was, expired, or belongs to someone else: the caller cannot tell which).
    pub fn page(
        &self,
        owner: &Owner,
        output_id: &str,
        stream: HeldStream,
        offset: u64,
        limit: usize,
    ) -> Option<OutputPage> {
        self.page_at(owner, output_id, stream, offset, limit, Instant::now())
    }

    fn page_at(
        &self,
        owner: &Owner,
        output_id: &str,
        stream: HeldStream,
        offset: u64,
        limit: usize,
        now: Instant,
    ) -> Option<OutputPage> {
        let mut shelf = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        shelf.expire(now, &owner.organization_id);
        let held = shelf
            .held
            .iter()
            .find(|held| held.id == output_id && &held.owner == owner)?;
        let (_, text) = held.texts.iter().find(|(s, _)| *s == stream)?;
        let offset = usize::try_from(offset).unwrap_or(usize::MAX);
        let page = page(text, offset, limit);
        Some(OutputPage {
            output_id: output_id.to_owned(),
            stream,
            start: page.start as u64,
            end: page.end as u64,
            total_bytes: text.len() as u64,
            data: page.text.to_owned(),
            done: page.is_last(text.len()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(org: &str) -> Owner {
        Owner {
            organization_id: org.into(),
            sandbox_id: "sbx".into(),
        }
    }

    #[test]
    fn short_output_is_returned_whole_and_not_held() {
        let held = HeldOutputs::default();
        let mut out = "hi".to_owned();
        let mut err = String::new();
        let more = held.hold_long(
            owner("o"),
            &mut [
                (HeldStream::Stdout, &mut out),
                (HeldStream::Stderr, &mut err),
            ],
        );
        assert_eq!(more.unwrap(), None);
        assert_eq!(out, "hi");
    }

    #[test]
    fn long_output_is_cut_to_a_first_page_and_the_rest_is_readable() {
        let held = HeldOutputs::default();
        let full = "x".repeat(INLINE_PAGE_BYTES * 3 + 7);
        let mut out = full.clone();
        let mut err = "e".to_owned();
        let more = held
            .hold_long(
                owner("o"),
                &mut [
                    (HeldStream::Stdout, &mut out),
                    (HeldStream::Stderr, &mut err),
                ],
            )
            .unwrap()
            .unwrap();
        assert_eq!(out.len(), INLINE_PAGE_BYTES);
        let stdout = more.stdout.unwrap();
        assert_eq!(
            (stdout.bytes, stdout.shown),
            (full.len() as u64, INLINE_PAGE_BYTES as u64)
        );
        let mut offset = stdout.shown;
        let mut read = out.clone();
        loop {
            let page = held
                .page(
                    &owner("o"),
                    &more.output_id,
                    HeldStream::Stdout,
                    offset,
                    10_000,
                )
                .unwrap();
            read.push_str(&page.data);
            offset = page.end;
            if page.done {
                break;
            }
        }
        assert_eq!(read, full);
    }

    #[test]
    fn another_organization_or_sandbox_cannot_read_it() {
        let held = HeldOutputs::default();
        let mut out = "x".repeat(INLINE_PAGE_BYTES + 1);
        let more = held
            .hold_long(owner("o"), &mut [(HeldStream::Stdout, &mut out)])
            .unwrap()
            .unwrap();
        let id = &more.output_id;
        assert!(
            held.page(&owner("other"), id, HeldStream::Stdout, 0, 1024)
                .is_none()
        );
        let other_sandbox = Owner {
            sandbox_id: "sbx2".into(),
            ..owner("o")
        };
        assert!(
            held.page(&other_sandbox, id, HeldStream::Stdout, 0, 1024)
                .is_none()
        );
        assert!(
            held.page(&owner("o"), id, HeldStream::Stdout, 0, 1024)
                .is_some()
        );
    }

    #[test]
    fn one_organization_cannot_push_out_anothers_output() {
        let held = HeldOutputs::default();
        let start = Instant::now();
        let hold = |org: &str, size: usize| {
            let mut out = "x".repeat(size);
            held.hold_long_at(owner(org), &mut [(HeldStream::Stdout, &mut out)], start)
                .unwrap()
                .unwrap()
                .output_id
        };
        let theirs = hold("quiet", 64 * 1024);
        // A noisy organization holds far past its share, and past the total.
        let noisy: Vec<String> = (0..40).map(|_| hold("noisy", MAX_HELD_BYTES / 8)).collect();
        let readable = |org: &str, id: &str| {
            held.page_at(&owner(org), id, HeldStream::Stdout, 0, 1024, start)
                .is_some()
        };
        assert!(readable("quiet", &theirs), "another's output stays");
        assert!(readable("noisy", &noisy[39]));
        assert!(!readable("noisy", &noisy[0]), "its own oldest went");
        let shelf = held.inner.lock().unwrap();
        assert!(shelf.usage_of("noisy").1 <= MAX_HELD_BYTES_PER_ORG);
        // Many organizations within their shares: the largest gives way.
        drop(shelf);
        for org in 0..8 {
            hold(&format!("org{org}"), MAX_HELD_BYTES_PER_ORG - 1024);
        }
        assert!(
            readable("quiet", &theirs),
            "the smallest holder keeps its output"
        );
        assert!(held.inner.lock().unwrap().bytes <= MAX_HELD_BYTES);
    }

    #[test]
    fn held_output_expires_and_the_oldest_goes_first_when_full() {
        let held = HeldOutputs::default();
        let start = Instant::now();
        let hold = |at| {
            let mut out = "x".repeat(MAX_HELD_BYTES_PER_ORG / 4);
            held.hold_long_at(owner("o"), &mut [(HeldStream::Stdout, &mut out)], at)
                .unwrap()
                .unwrap()
                .output_id
        };
        let ids: Vec<String> = (0..5).map(|_| hold(start)).collect();
        let readable = |id: &str, at| {
            held.page_at(&owner("o"), id, HeldStream::Stdout, 0, 1024, at)
                .is_some()
        };
        assert!(!readable(&ids[0], start), "the oldest makes room");
        assert!(readable(&ids[4], start));
        assert!(!readable(&ids[4], start + HOLD_FOR), "expired");
        assert_eq!(held.inner.lock().unwrap().bytes, 0);
    }
}
