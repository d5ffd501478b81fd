//! `sandboxd reap`: the sandbox containers on the local engine that nobody looks after
//! (made by another installation, without a record, ended, expired), read from the
//! engine and the data directory's store directly, so it works while the server is
//! down. Lists by default; removes only with `--kill`.
//!
//! The census comes first, then the survey (in that order: a create records its sandbox
//! before it makes the container), then `plan_reap`; a table or JSON. Another
//! installation's containers are removed only when asked for as well
//! (`Finding::removable`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use sandboxd_core::plan::LABEL_SANDBOX;
use sandboxd_core::reap::{Finding, Selection, Tracking, plan_reap};
use sandboxd_docker::DockerEngine;
use serde_json::{Value, json};

use crate::cli::table;

/// Flags of `sandboxd reap`.
#[derive(Debug, Args)]
#[command(
    after_help = "Examples:\n  sandboxd reap                                  (list only)\n  \
    sandboxd reap --older-than 1d --kill\n  \
    sandboxd reap --label sandboxd.projectId=proj_… --kill"
)]
pub struct ReapArgs {
    /// Only containers with this label (KEY=VALUE; repeat for several).
    #[arg(long = "label", value_parser = parse_label)]
    labels: Vec<(String, String)>,
    /// Only containers at least this old (e.g. 30m, 2h, 7d).
    #[arg(long, value_parser = crate::cli::parse_duration)]
    older_than: Option<Duration>,
    /// Remove the containers listed (without it nothing is touched).
    #[arg(long)]
    kill: bool,
    /// With --kill, remove other installations' containers too (they may belong to a
    /// server that is up on the same engine; naming one with --label
    /// sandboxd.instance=… is enough for that one).
    #[arg(long)]
    any_installation: bool,
    /// The server's TOML configuration file, as given to `sandboxd serve`.
    #[arg(long)]
    config: Option<PathBuf>,
    /// The server's data directory [default: ./sandboxd-data].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn parse_label(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((key, value)) if !key.is_empty() => Ok((key.to_owned(), value.to_owned())),
        _ => Err("expected KEY=VALUE".into()),
    }
}

pub async fn run(args: ReapArgs) -> anyhow::Result<ExitCode> {
    let mut config =
        crate::config::load(args.config.as_deref()).context("invalid configuration")?;
    if let Some(dir) = args.data_dir {
        config.data_dir = dir;
    }
    let engine = DockerEngine::connect_local().await.context(
        "cannot connect to the Docker engine (is it running, and may this user use its socket?)",
    )?;
    // The containers first, then the records: a create writes its record before it
    // makes its container, so no container listed here lacks a record read below
    // because it was made in between.
    let containers = engine.labelled_sandboxes().await?;
    let database = config.database()?;
    let tracking = match sandboxd_store::survey(&database).await.with_context(|| {
        format!(
            "cannot read the store {} (run this as the server's user)",
            database.describe()
        )
    })? {
        Some(survey) => survey.tracking,
        None => {
            eprintln!(
                "note: {} holds no sandboxd store; every sandbox container counts as another \
                 installation's (--any-installation lets --kill remove those)",
                database.describe()
            );
            Tracking::default()
        }
    };
    let selection = Selection {
        labels: args.labels,
        older_than_ms: args
            .older_than
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
    };
    let found = plan_reap(&containers, &tracking, &selection, sandboxd_store::now_ms());
    let mut failed = 0;
    let mut removed = Vec::with_capacity(found.len());
    for finding in &found {
        let outcome = if args.kill && !finding.removable(args.any_installation, &selection) {
            Some(Err(
                "another installation's: add --any-installation to remove it".to_owned(),
            ))
        } else if args.kill {
            match engine
                .remove_labelled(&finding.container.container_id)
                .await
            {
                Ok(()) => Some(Ok(())),
                Err(error) => {
                    failed += 1;
                    Some(Err(error.to_string()))
                }
            }
        } else {
            None
        };
        removed.push(outcome);
    }
    if args.json {
        let listed: Vec<Value> = found
            .iter()
            .zip(&removed)
            .map(|(f, outcome)| as_json(f, outcome.as_ref()))
            .collect();
        println!("{}", serde_json::to_string_pretty(&listed)?);
    } else {
        print!("{}", render(&found, &removed, args.kill));
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The labels worth showing: all but the mark every sandbox carries.
fn shown_labels(finding: &Finding) -> Vec<(&String, &String)> {
    finding
        .container
        .labels
        .iter()
        .filter(|(k, _)| k.as_str() != LABEL_SANDBOX)
        .collect()
}

fn as_json(finding: &Finding, removed: Option<&Result<(), String>>) -> Value {
    let labels: serde_json::Map<String, Value> = shown_labels(finding)
        .into_iter()
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let mut value = json!({
        "containerId": finding.container.container_id,
        "name": finding.container.name,
        "image": finding.container.image,
        "running": finding.container.running,
        "createdAt": sandboxd_core::rfc3339::format_millis(finding.container.created_at),
        "ageSeconds": finding.age_ms / 1000,
        "reason": finding.reason.code(),
        "detail": finding.reason.describe(),
        "labels": labels,
        "removed": matches!(removed, Some(Ok(()))),
    });
    if let Some(Err(error)) = removed {
        value["error"] = Value::String(error.clone());
    }
    value
}

fn render(found: &[Finding], removed: &[Option<Result<(), String>>], kill: bool) -> String {
    if found.is_empty() {
        return "no sandbox container to reap\n".into();
    }
    let mut headers = vec!["CONTAINER", "NAME", "AGE", "STATE", "REASON", "LABELS"];
    if kill {
        headers.push("REMOVED");
    }
    let rows: Vec<Vec<String>> = found
        .iter()
        .zip(removed)
        .map(|(f, outcome)| {
            let labels = shown_labels(f)
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",");
            let mut row = vec![
                f.container.container_id.chars().take(12).collect(),
                f.container.name.clone(),
                table::age(f.age_ms),
                if f.container.running {
                    "running"
                } else {
                    "stopped"
                }
                .into(),
                f.reason.describe(),
                labels,
            ];
            if kill {
                row.push(match outcome {
                    Some(Ok(())) => "yes".into(),
                    Some(Err(error)) => format!("no: {error}"),
                    None => "-".into(),
                });
            }
            row
        })
        .collect();
    let mut out = table::render(&headers, &rows);
    if !kill {
        out.push_str(&format!(
            "{} container(s) listed; nothing removed (add --kill to remove them)\n",
            found.len()
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_key_value_pairs() {
        assert_eq!(parse_label("team=ml=x"), Ok(("team".into(), "ml=x".into())));
        assert!(parse_label("=x").is_err());
        assert!(parse_label("team").is_err());
    }
}
