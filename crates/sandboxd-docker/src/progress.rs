//! The engine's progress streams (an image built, an image loaded): read to their end,
//! the first error the engine reports there ending the call.

use bollard::models::BuildInfo;
use futures_util::{Stream, StreamExt};

use crate::error::{EngineError, classify};

/// Reads `progress` to its end; an error it reports is the engine's refusal to `what`
/// (`prepare {image}`, `load the image`).
pub(crate) async fn follow(
    progress: impl Stream<Item = Result<BuildInfo, bollard::errors::Error>>,
    what: &str,
) -> Result<(), EngineError> {
    let mut progress = std::pin::pin!(progress);
    while let Some(step) = progress.next().await {
        let step = step.map_err(|e| classify("image", e))?;
        if let Some(detail) = step.error_detail.and_then(|d| d.message) {
            return Err(EngineError::Rejected {
                status: 500,
                message: format!("the engine could not {what}: {detail}"),
            });
        }
    }
    Ok(())
}
