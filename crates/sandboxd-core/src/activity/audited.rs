//! The timeline's entry of an action the audit log records on a sandbox (its create,
//! pause, kill, ports, egress requests, …), from the audit entry's action and metadata.

use super::{ActivityEntry, LifecycleActivity, MAX_TEXT_CHARS, NetworkActivity, shown};

/// The entry of an audited action on a sandbox (`sandbox.create`, `sandbox.pause`, …),
/// from the audit entry's action and metadata, with no one as `by`; `None` for the
/// actions the timeline writes otherwise (`sandbox.exec`) or not at all.
pub fn of_audited(action: &str, metadata: &serde_json::Value) -> Option<ActivityEntry> {
    let text = |key: &str| {
        metadata
            .get(key)
            .and_then(serde_json::Value::as_str)
            .map(|value| shown(value, MAX_TEXT_CHARS))
    };
    let number = |key: &str| metadata.get(key).and_then(serde_json::Value::as_u64);
    let reason = text("reason").filter(|reason| reason != "asked");
    let life = |word: &str, lifecycle: LifecycleActivity| {
        Some(ActivityEntry::lifecycle(word, None, lifecycle))
    };
    let network =
        |word: &str, network: NetworkActivity| Some(ActivityEntry::network(word, None, network));
    match action.strip_prefix("sandbox.")? {
        "create" => life(
            "create",
            LifecycleActivity {
                from: text("template").or_else(|| text("image")),
                reason: text("pool").map(|pool| format!("from the warm pool {pool}")),
                ..LifecycleActivity::default()
            },
        ),
        "pause" => life(
            "pause",
            LifecycleActivity {
                reason,
                ..LifecycleActivity::default()
            },
        ),
        "resume" => life(
            "resume",
            LifecycleActivity {
                reason,
                ..LifecycleActivity::default()
            },
        ),
        "kill" => life(
            "kill",
            LifecycleActivity {
                reason,
                ..LifecycleActivity::default()
            },
        ),
        "restart" => life(
            "restart",
            LifecycleActivity {
                reason,
                ..LifecycleActivity::default()
            },
        ),
        "remove" => life("remove", LifecycleActivity::default()),
        "rename" => life("rename", LifecycleActivity::default()),
        "setTimeout" => life(
            "timeout",
            LifecycleActivity {
                timeout_ms: number("timeoutMs"),
                ..LifecycleActivity::default()
            },
        ),
        "snapshot" => life(
            "snapshot",
            LifecycleActivity {
                made: text("snapshotId"),
                ..LifecycleActivity::default()
            },
        ),
        "exposePort" => network(
            "expose",
            NetworkActivity {
                port: number("port").and_then(|port| u16::try_from(port).ok()),
                ..NetworkActivity::default()
            },
        ),
        "unexposePort" => network(
            "unexpose",
            NetworkActivity {
                port: number("port").and_then(|port| u16::try_from(port).ok()),
                ..NetworkActivity::default()
            },
        ),
        "egressRefused" => network(
            "refused",
            NetworkActivity {
                port: number("port").and_then(|port| u16::try_from(port).ok()),
                host: text("host"),
                ..NetworkActivity::default()
            },
        ),
        "requestEgress" => network(
            "request",
            NetworkActivity {
                host: text("host"),
                ..NetworkActivity::default()
            },
        ),
        "setEgress" => network("allow", NetworkActivity::default()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::activity::ActivityKind;

    #[test]
    fn audited_actions_become_entries() {
        let pause = of_audited(
            "sandbox.pause",
            &serde_json::json!({"reason": "idle timeout"}),
        );
        let pause = pause.unwrap_or_else(|| panic!("a pause is an entry"));
        assert_eq!(
            (pause.kind(), pause.action.as_str()),
            (ActivityKind::Lifecycle, "pause")
        );
        assert_eq!(
            pause.lifecycle.and_then(|life| life.reason).as_deref(),
            Some("idle timeout")
        );
        let asked = of_audited("sandbox.resume", &serde_json::json!({"reason": "asked"}));
        assert_eq!(
            asked
                .and_then(|entry| entry.lifecycle)
                .and_then(|l| l.reason),
            None
        );
        let created = of_audited(
            "sandbox.create",
            &serde_json::json!({"image": "debian", "template": "python", "pool": null}),
        );
        assert_eq!(
            created
                .and_then(|entry| entry.lifecycle)
                .and_then(|l| l.from)
                .as_deref(),
            Some("python")
        );
        let exposed = of_audited("sandbox.exposePort", &serde_json::json!({"port": 8080}));
        assert_eq!(
            exposed.and_then(|entry| entry.network).and_then(|n| n.port),
            Some(8080)
        );
        assert!(of_audited("sandbox.exec", &serde_json::json!({})).is_none());
        assert!(of_audited("apiKey.create", &serde_json::json!({})).is_none());
        let huge = "x".repeat(10_000);
        let refused = of_audited("sandbox.egressRefused", &serde_json::json!({"host": huge}));
        let host = refused.and_then(|entry| entry.network).and_then(|n| n.host);
        assert_eq!(host.map(|host| host.chars().count()), Some(MAX_TEXT_CHARS));
    }
}
