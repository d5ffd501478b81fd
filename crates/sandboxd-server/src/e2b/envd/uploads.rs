//! What E2B's uploads may hold of the server: at most a few at once per sandbox and per
//! organization, a gzip body decoded a bounded piece at a time (a small body can expand
//! a thousandfold), and, for the bodies whose size is not known before they end (gzip,
//! multipart), a temporary file within a budget shared by the whole server.
//!
//! 4 uploads per sandbox and 16 per organization at once; the spool within twice the
//! transfer limit for the whole server (`UploadBounds`, in `AppState`).

use std::collections::HashMap;
use std::io::Write as _;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::{Stream, StreamExt as _};
use tokio::io::{AsyncSeekExt as _, AsyncWriteExt as _};

/// Uploads one sandbox may have under way at once.
pub const UPLOADS_PER_SANDBOX: u32 = 4;
/// Uploads one organization may have under way at once.
pub const UPLOADS_PER_ORGANIZATION: u32 = 16;
/// The most of a gzip body fed to the decoder at once: what it makes of it is at most
/// its own buffer (32 KiB) more, whatever the ratio.
const GZIP_STEP: usize = 4 * 1024;

/// The most of a multipart body its parser may hold that has not come out of it as a
/// part's bytes: its preamble, a part's headers, a boundary split across chunks. The
/// parser buffers until it finds what it looks for, so without this a body that never
/// says where its part starts would be held whole.
const MULTIPART_HELD: u64 = 1 << 20;

/// How much of a multipart body was handed to its parser and not yet taken out as a
/// part's bytes; the body is not read further past `MULTIPART_HELD`.
#[derive(Debug, Default)]
pub struct MultipartHeld {
    held: std::sync::atomic::AtomicU64,
    reader: futures_util::task::AtomicWaker,
}

impl MultipartHeld {
    /// `taken` bytes of a part came out of the parser: that much more may be read.
    pub fn took(&self, taken: usize) {
        let _ = self.held.fetch_update(
            std::sync::atomic::Ordering::AcqRel,
            std::sync::atomic::Ordering::Acquire,
            |held| Some(held.saturating_sub(taken as u64)),
        );
        self.reader.wake();
    }
}

/// `body`, read only while its parser holds less than `MULTIPART_HELD` of it.
pub fn metered<S>(
    body: S,
    held: Arc<MultipartHeld>,
) -> impl Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static
where
    S: Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
{
    use std::sync::atomic::Ordering;
    use std::task::Poll;
    let mut body = Box::pin(body);
    futures_util::stream::poll_fn(move |cx| {
        if held.held.load(Ordering::Acquire) >= MULTIPART_HELD {
            held.reader.register(cx.waker());
            if held.held.load(Ordering::Acquire) >= MULTIPART_HELD {
                return Poll::Pending;
            }
        }
        let next = body.as_mut().poll_next(cx);
        if let Poll::Ready(Some(Ok(chunk))) = &next {
            held.held.fetch_add(chunk.len() as u64, Ordering::AcqRel);
        }
        next
    })
}

/// The uploads under way and what their spooled files hold. Cheap to clone.
#[derive(Debug, Clone)]
pub struct UploadBounds {
    held: Arc<Mutex<Held>>,
    /// The bytes all spooled uploads may hold on disk at once.
    spool_budget: u64,
}

#[derive(Debug, Default)]
struct Held {
    sandboxes: HashMap<String, u32>,
    organizations: HashMap<String, u32>,
    spooled: u64,
}

/// Why an upload may not start now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Busy {
    Sandbox,
    Organization,
}

/// An upload under way; its place is given back when dropped.
#[derive(Debug)]
pub struct UploadSlot {
    bounds: UploadBounds,
    sandbox_id: String,
    organization_id: String,
    /// The bytes its spooled file holds.
    spooled: u64,
}

impl UploadBounds {
    pub fn new(spool_budget: u64) -> Self {
        Self {
            held: Arc::default(),
            spool_budget,
        }
    }

    fn held(&self) -> std::sync::MutexGuard<'_, Held> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A place for an upload to `sandbox_id` of `organization_id`, if both have one.
    pub fn take(&self, sandbox_id: &str, organization_id: &str) -> Result<UploadSlot, Busy> {
        let mut held = self.held();
        if held.sandboxes.get(sandbox_id).copied().unwrap_or(0) >= UPLOADS_PER_SANDBOX {
            return Err(Busy::Sandbox);
        }
        if held
            .organizations
            .get(organization_id)
            .copied()
            .unwrap_or(0)
            >= UPLOADS_PER_ORGANIZATION
        {
            return Err(Busy::Organization);
        }
        *held.sandboxes.entry(sandbox_id.to_owned()).or_default() += 1;
        *held
            .organizations
            .entry(organization_id.to_owned())
            .or_default() += 1;
        Ok(UploadSlot {
            bounds: self.clone(),
            sandbox_id: sandbox_id.to_owned(),
            organization_id: organization_id.to_owned(),
            spooled: 0,
        })
    }

    /// The bytes spooled uploads hold now.
    pub fn spooled(&self) -> u64 {
        self.held().spooled
    }
}

impl UploadSlot {
    /// Counts `more` bytes into the slot's spooled file, if the budget has room.
    fn spool(&mut self, more: u64) -> bool {
        let mut held = self.bounds.held();
        if held.spooled.saturating_add(more) > self.bounds.spool_budget {
            return false;
        }
        held.spooled += more;
        self.spooled += more;
        true
    }

    /// Its spooled file is gone: its bytes are given back.
    pub fn unspool(&mut self) {
        let mut held = self.bounds.held();
        held.spooled = held.spooled.saturating_sub(self.spooled);
        self.spooled = 0;
    }
}

impl Drop for UploadSlot {
    fn drop(&mut self) {
        self.unspool();
        let mut held = self.bounds.held();
        let held = &mut *held;
        for (counts, key) in [
            (&mut held.sandboxes, &self.sandbox_id),
            (&mut held.organizations, &self.organization_id),
        ] {
            if let Some(count) = counts.get_mut(key) {
                *count -= 1;
                if *count == 0 {
                    counts.remove(key);
                }
            }
        }
    }
}

/// Why a body could not be taken.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// Past the transfer cap (413).
    TooLarge,
    /// Not gzip, or the body failed (400).
    Invalid(String),
    /// The server's spool is full (503).
    NoRoom,
    /// The spool file could not be written (500).
    Failed(String),
}

/// Feeds the decoder one step of `input`: how much it took, and what it made of it (at
/// most its own buffer's worth, whatever the ratio).
fn gunzip_step(
    decoder: &mut flate2::write::MultiGzDecoder<Vec<u8>>,
    input: &[u8],
) -> Result<(usize, Vec<u8>), Refused> {
    let used = decoder
        .write(&input[..input.len().min(GZIP_STEP)])
        .map_err(|error| Refused::Invalid(format!("invalid gzip body: {error}")))?;
    if used == 0 && !input.is_empty() {
        return Err(Refused::Invalid(
            "invalid gzip body: bytes after its end".into(),
        ));
    }
    Ok((used, std::mem::take(decoder.get_mut())))
}

/// Writes a body (gunzipped when `gzip`) to a temporary file within the slot's share
/// of the server's spool, refusing more than `cap` bytes; the file, rewound, and its
/// length.
pub async fn spool(
    chunks: impl Stream<Item = Result<Bytes, std::io::Error>>,
    gzip: bool,
    cap: u64,
    slot: &mut UploadSlot,
) -> Result<(tokio::fs::File, u64), Refused> {
    let failed =
        |error: std::io::Error| Refused::Failed(format!("cannot hold the upload: {error}"));
    let mut file = tokio::fs::File::from_std(tempfile::tempfile().map_err(failed)?);
    let mut decoder = gzip.then(|| flate2::write::MultiGzDecoder::new(Vec::new()));
    let mut length = 0u64;
    let mut chunks = std::pin::pin!(chunks);
    let result = async {
        while let Some(chunk) = chunks.next().await {
            let chunk = chunk
                .map_err(|error| Refused::Invalid(format!("the upload's body failed: {error}")))?;
            let mut wrote = async |bytes: &[u8]| -> Result<(), Refused> {
                length += bytes.len() as u64;
                if length > cap {
                    return Err(Refused::TooLarge);
                }
                if !slot.spool(bytes.len() as u64) {
                    return Err(Refused::NoRoom);
                }
                file.write_all(bytes).await.map_err(failed)
            };
            match decoder.as_mut() {
                Some(decoder) => {
                    // Each step's output is written before the next step is decoded.
                    let mut input: &[u8] = &chunk;
                    while !input.is_empty() {
                        let (used, out) = gunzip_step(decoder, input)?;
                        input = &input[used..];
                        if !out.is_empty() {
                            wrote(&out).await?;
                        }
                    }
                }
                None => wrote(&chunk).await?,
            }
        }
        if let Some(decoder) = decoder.take() {
            let out = decoder
                .finish()
                .map_err(|error| Refused::Invalid(format!("invalid gzip body: {error}")))?;
            length += out.len() as u64;
            if length > cap {
                return Err(Refused::TooLarge);
            }
            if !slot.spool(out.len() as u64) {
                return Err(Refused::NoRoom);
            }
            file.write_all(&out).await.map_err(failed)?;
        }
        file.flush().await.map_err(failed)?;
        file.rewind().await.map_err(failed)?;
        Ok(length)
    }
    .await;
    match result {
        Ok(length) => Ok((file, length)),
        Err(refused) => {
            // The unnamed file goes with its handle: its bytes are free again.
            drop(file);
            slot.unspool();
            Err(refused)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn uploads_are_bounded_per_sandbox_and_per_organization() {
        let bounds = UploadBounds::new(0);
        let mut held = Vec::new();
        for _ in 0..UPLOADS_PER_SANDBOX {
            held.push(bounds.take("s1", "o1").unwrap());
        }
        assert_eq!(bounds.take("s1", "o1").err(), Some(Busy::Sandbox));
        for n in 0..(UPLOADS_PER_ORGANIZATION - UPLOADS_PER_SANDBOX) {
            held.push(bounds.take(&format!("s{}", n + 2), "o1").unwrap());
        }
        assert_eq!(bounds.take("another", "o1").err(), Some(Busy::Organization));
        assert!(
            bounds.take("s1", "o2").is_err(),
            "the sandbox is busy whoever asks"
        );
        assert!(
            bounds.take("elsewhere", "o2").is_ok(),
            "another organization goes on"
        );
        held.truncate(UPLOADS_PER_SANDBOX as usize - 1);
        assert!(
            bounds.take("s1", "o1").is_ok(),
            "a place given back is taken again"
        );
        drop(held);
        assert!(bounds.held().sandboxes.is_empty() && bounds.held().organizations.is_empty());
    }

    #[test]
    fn a_gzip_bomb_is_decoded_a_bounded_piece_at_a_time() {
        let bomb = gzip(&vec![0u8; 64 << 20]);
        assert!(bomb.len() < 128 * 1024, "{}", bomb.len());
        let mut decoder = flate2::write::MultiGzDecoder::new(Vec::new());
        let (mut total, mut largest) = (0usize, 0usize);
        let mut input: &[u8] = &bomb;
        while !input.is_empty() {
            let (used, out) = gunzip_step(&mut decoder, input).unwrap();
            input = &input[used..];
            total += out.len();
            largest = largest.max(out.len());
        }
        total += decoder.finish().unwrap().len();
        assert_eq!(total, 64 << 20);
        assert!(largest <= 64 * 1024, "a piece of {largest} bytes");
    }

    #[tokio::test]
    async fn a_multipart_parser_is_not_fed_past_what_it_holds() {
        let held = Arc::new(MultipartHeld::default());
        let chunks = (0..64).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![b'x'; 64 * 1024])));
        let mut body = std::pin::pin!(metered(futures_util::stream::iter(chunks), held.clone()));
        let mut fed = 0;
        while let Ok(Some(Ok(chunk))) =
            tokio::time::timeout(std::time::Duration::from_millis(50), body.next()).await
        {
            fed += chunk.len();
        }
        assert_eq!(
            fed as u64, MULTIPART_HELD,
            "read up to the bound, then held"
        );
        held.took(64 * 1024);
        let next = tokio::time::timeout(std::time::Duration::from_millis(50), body.next()).await;
        assert!(
            matches!(next, Ok(Some(Ok(_)))),
            "read again once a part's bytes came out"
        );
    }

    #[tokio::test]
    async fn a_spooled_body_stops_at_the_cap_and_the_budget_and_gives_its_room_back() {
        let body = gzip(&vec![7u8; 8 << 20]);
        let chunks = || futures_util::stream::iter([Ok(Bytes::from(body.clone()))]);
        let bounds = UploadBounds::new(4 << 20);
        let mut slot = bounds.take("s", "o").unwrap();
        assert_eq!(
            spool(chunks(), true, 1 << 20, &mut slot).await.err(),
            Some(Refused::TooLarge)
        );
        assert_eq!(bounds.spooled(), 0, "given back");
        assert_eq!(
            spool(chunks(), true, 16 << 20, &mut slot).await.err(),
            Some(Refused::NoRoom)
        );
        assert_eq!(bounds.spooled(), 0);
        let small = gzip(b"hello");
        let (_, length) = spool(
            futures_util::stream::iter([Ok(Bytes::from(small))]),
            true,
            1 << 20,
            &mut slot,
        )
        .await
        .unwrap();
        assert_eq!((length, bounds.spooled()), (5, 5));
        drop(slot);
        assert_eq!(bounds.spooled(), 0);
        let mut slot = bounds.take("s", "o").unwrap();
        assert!(matches!(
            spool(
                futures_util::stream::iter([Ok(Bytes::from_static(b"not gzip"))]),
                true,
                1 << 20,
                &mut slot
            )
            .await,
            Err(Refused::Invalid(_))
        ));
    }
}
