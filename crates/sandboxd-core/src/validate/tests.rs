#![allow(clippy::type_complexity)]

use std::collections::BTreeMap;

use super::*;
use crate::api::EgressRequest;

fn create(edit: impl FnOnce(&mut CreateSandboxRequest)) -> Result<CreateSandbox, Invalid> {
    let mut req = CreateSandboxRequest {
        environment_id: "env_1".into(),
        template: Some("base".into()),
        ..Default::default()
    };
    edit(&mut req);
    create_sandbox(req)
}

fn paths_of(err: Invalid) -> Vec<String> {
    err.issues.into_iter().map(|i| i.path).collect()
}

#[test]
fn create_applies_defaults() {
    let cmd = create(|_| {}).expect("valid");
    assert_eq!(cmd.cpu, 1.0);
    assert_eq!(cmd.memory_mb, 512);
    assert_eq!(cmd.pids_limit, 256);
    assert_eq!(cmd.timeout_ms, 300_000);
    assert_eq!(cmd.network_mode, NetworkMode::Isolated);
    assert_eq!(cmd.workdir, None);
}

#[test]
fn create_bounds_are_inclusive() {
    let ok: [fn(&mut CreateSandboxRequest); 8] = [
        |r| r.cpu = Some(0.1),
        |r| r.cpu = Some(64.0),
        |r| r.memory_mb = Some(64),
        |r| r.memory_mb = Some(262_144),
        |r| r.pids_limit = Some(16),
        |r| r.pids_limit = Some(65_536),
        |r| r.timeout_ms = Some(10_000),
        |r| r.timeout_ms = Some(86_400_000),
    ];
    for edit in ok {
        assert!(create(edit).is_ok());
    }
    let bad: [(fn(&mut CreateSandboxRequest), &str); 12] = [
        (|r| r.cpu = Some(0.09), "cpu"),
        (|r| r.cpu = Some(64.5), "cpu"),
        (|r| r.memory_mb = Some(63), "memoryMb"),
        (|r| r.memory_mb = Some(262_145), "memoryMb"),
        (|r| r.pids_limit = Some(15), "pidsLimit"),
        (|r| r.pids_limit = Some(65_537), "pidsLimit"),
        (|r| r.timeout_ms = Some(9_999), "timeoutMs"),
        (|r| r.timeout_ms = Some(86_400_001), "timeoutMs"),
        (|r| r.env_vars = Some("A".repeat(65_537)), "envVars"),
        (|r| r.workdir = Some("home".into()), "workdir"),
        (|r| r.template = Some("Ruby!".into()), "template"),
        (|r| r.name = Some(String::new()), "name"),
    ];
    for (edit, field) in bad {
        assert_eq!(paths_of(create(edit).expect_err(field)), [field]);
    }
}

#[test]
fn create_needs_template_or_image() {
    let err = create(|r| r.template = None).expect_err("no image");
    assert_eq!(paths_of(err), ["image"]);
    let cmd = create(|r| {
        r.template = None;
        r.image = Some("busybox:latest".into());
    })
    .expect("image alone");
    assert_eq!(cmd.image.image.as_deref(), Some("busybox:latest"));
    assert!(create(|r| r.image = Some("bad image".into())).is_err());
    assert!(create(|r| r.image = Some("\u{5670}".into())).is_err());
    assert!(create(|r| r.image = Some("localhost:5000/team/app@sha256:ab12".into())).is_ok());
}

#[test]
fn create_reports_every_issue() {
    let err = create(|r| {
        r.environment_id = String::new();
        r.cpu = Some(0.0);
        r.memory_mb = Some(1);
    })
    .expect_err("three issues");
    assert_eq!(paths_of(err), ["environmentId", "cpu", "memoryMb"]);
}

fn exec_req(edit: impl FnOnce(&mut ExecRequest)) -> Result<ExecCommand, Invalid> {
    let mut req = ExecRequest {
        sandbox_id: "sb_1".into(),
        cmd: "echo hi".into(),
        ..Default::default()
    };
    edit(&mut req);
    exec(req)
}

#[test]
fn exec_checks_cmd_env_cwd_and_timeout() {
    let cmd = exec_req(|_| {}).expect("valid");
    assert_eq!(cmd.timeout_ms, 60_000);
    assert!(exec_req(|r| r.cmd = String::new()).is_err());
    assert!(exec_req(|r| r.cmd = "x".repeat(65_537)).is_err());
    assert!(exec_req(|r| r.cmd = "x".repeat(65_536)).is_ok());
    assert!(exec_req(|r| r.cmd = "a\0b".into()).is_err());
    assert!(exec_req(|r| r.timeout_ms = Some(999)).is_err());
    assert!(exec_req(|r| r.timeout_ms = Some(600_001)).is_err());
    assert!(exec_req(|r| r.cwd = Some("tmp".into())).is_err());
    let err = exec_req(|r| r.env = Some(BTreeMap::from([("1BAD".into(), "x".into())])))
        .expect_err("bad key");
    assert_eq!(paths_of(err), ["env.1BAD"]);
    let ok = exec_req(|r| {
        r.env = Some(BTreeMap::from([("GOOD_1".into(), "x y".into())]));
        r.cwd = Some("/tmp/../var".into());
    })
    .expect("valid env");
    assert_eq!(ok.cwd.as_deref(), Some("/var"));
    assert_eq!(ok.env, [("GOOD_1".to_owned(), "x y".to_owned())]);
}

fn write_req(edit: impl FnOnce(&mut WriteFileRequest)) -> Result<WriteFile, Invalid> {
    let mut req = WriteFileRequest {
        sandbox_id: "sb_1".into(),
        path: "/home/user/a.txt".into(),
        content: "hi".into(),
        ..Default::default()
    };
    edit(&mut req);
    write_file(req)
}

#[test]
fn write_file_decodes_and_checks() {
    assert_eq!(write_req(|_| {}).expect("utf8").content, b"hi");
    let b64 = write_req(|r| {
        r.encoding = Encoding::Base64;
        r.content = "AAEC/w==".into();
    })
    .expect("base64");
    assert_eq!(b64.content, [0, 1, 2, 255]);
    let unpadded = write_req(|r| {
        r.encoding = Encoding::Base64;
        r.content = "AAEC\n/w".into();
    })
    .expect("unpadded base64 with a newline");
    assert_eq!(unpadded.content, [0, 1, 2, 255]);
    assert!(
        write_req(|r| {
            r.encoding = Encoding::Base64;
            r.content = "***".into();
        })
        .is_err()
    );
    assert!(write_req(|r| r.mode = Some(0o7777)).is_ok());
    assert!(write_req(|r| r.mode = Some(0o10000)).is_err());
    assert!(write_req(|r| r.path = "/".into()).is_err());
    assert!(write_req(|r| r.path = "/tmp/..".into()).is_err());
}

#[test]
fn list_scope_needs_an_id() {
    let env = ListSandboxesQuery {
        environment_id: Some("env".into()),
        project_id: Some("proj".into()),
    };
    assert_eq!(list_scope(env), Ok(ListScope::Environment("env".into())));
    let project = ListSandboxesQuery {
        environment_id: Some(String::new()),
        project_id: Some("proj".into()),
    };
    assert_eq!(list_scope(project), Ok(ListScope::Project("proj".into())));
    assert!(list_scope(ListSandboxesQuery::default()).is_err());
}

#[test]
fn an_egress_list_goes_with_the_allowlist_mode_and_every_bad_entry_is_named() {
    let allow = |entries: &[&str]| {
        Some(EgressRequest {
            allow: entries.iter().map(|e| (*e).to_owned()).collect(),
            credentials: Vec::new(),
        })
    };
    let cmd = create(|r| {
        r.network_mode = Some(NetworkMode::Allowlist);
        r.egress = allow(&["API.Example.com", "*.pypi.org:443", "api.example.com"]);
    })
    .expect("valid");
    assert_eq!(cmd.network_mode, NetworkMode::Allowlist);
    assert_eq!(
        cmd.egress.len(),
        2,
        "lower-cased, without duplicates: {:?}",
        cmd.egress
    );
    assert!(cmd.egress.contains(&"api.example.com".to_owned()));
    // Allowlist with no list reaches nothing, until a list is set.
    let empty = create(|r| r.network_mode = Some(NetworkMode::Allowlist)).expect("valid");
    assert!(empty.egress.is_empty());
    // A list in another mode would mean nothing: refused.
    let err = create(|r| r.egress = allow(&["example.com"])).unwrap_err();
    assert_eq!(paths_of(err), ["egress"]);
    let err = create(|r| {
        r.network_mode = Some(NetworkMode::Allowlist);
        r.egress = allow(&["ok.example.com", "10.0.0.1", "*", "a..b"]);
    })
    .unwrap_err();
    let messages: Vec<_> = err
        .issues
        .iter()
        .map(|i| (i.path.as_str(), i.message.as_str()))
        .collect();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert!(messages.iter().all(|(path, _)| *path == "egress.allow"));
    assert!(messages[0].1.starts_with("[1]"), "{messages:?}");
    let set = |allow: Vec<&str>| SetEgressRequest {
        sandbox_id: "sb".into(),
        allow: allow.into_iter().map(str::to_owned).collect(),
    };
    assert_eq!(
        set_egress(set(vec!["Example.com:8080"])).unwrap().1,
        ["example.com:8080"]
    );
    assert_eq!(set_egress(set(vec![])).unwrap().1, Vec::<String>::new());
    assert_eq!(
        paths_of(set_egress(set(vec!["127.0.0.1"])).unwrap_err()),
        ["allow"]
    );
    assert!(
        set_egress(set(vec!["x.example"; 257])).is_err(),
        "at most 256"
    );
}

#[test]
fn egress_log_reads_are_checked() {
    let read = |cursor: Option<&str>, limit| {
        egress_log(crate::api::EgressLogQuery {
            sandbox_id: "sb".into(),
            cursor: cursor.map(str::to_owned),
            limit,
        })
    };
    let plain = read(None, None).unwrap();
    assert_eq!((plain.after, plain.limit), (None, 100));
    let cursor = "0001764806400000-000000000001-AbCd1234";
    assert_eq!(
        read(Some(cursor), Some(500)).unwrap().after.as_deref(),
        Some(cursor)
    );
    assert_eq!(
        paths_of(read(Some("x' OR 1=1"), None).unwrap_err()),
        ["cursor"]
    );
    assert_eq!(paths_of(read(None, Some(0)).unwrap_err()), ["limit"]);
    assert_eq!(paths_of(read(None, Some(501)).unwrap_err()), ["limit"]);
}

#[test]
fn activity_reads_are_checked() {
    use crate::activity::ActivityKind;
    let read = |cursor: Option<&str>, kinds: Option<&str>, latest: Option<bool>| {
        activity(crate::api::ActivityQuery {
            sandbox_id: "sb".into(),
            cursor: cursor.map(str::to_owned),
            limit: None,
            kinds: kinds.map(str::to_owned),
            latest,
        })
    };
    let plain = read(None, None, None).unwrap();
    assert_eq!(
        (plain.limit, plain.kinds.len(), plain.latest),
        (100, 0, false)
    );
    assert_eq!(
        read(None, Some("command, file,command"), Some(true))
            .unwrap()
            .kinds,
        [ActivityKind::Command, ActivityKind::File]
    );
    assert_eq!(
        paths_of(read(None, Some("command,everything"), None).unwrap_err()),
        ["kinds"]
    );
    let cursor = "0001764806400000-000000000001-AbCd1234";
    assert_eq!(
        paths_of(read(Some(cursor), None, Some(true)).unwrap_err()),
        ["latest"]
    );
    assert_eq!(
        paths_of(read(Some("x' OR 1=1"), None, None).unwrap_err()),
        ["cursor"]
    );
}

#[test]
fn egress_requests_are_checked() {
    use crate::api::RequestEgressRequest;
    let ask = |host: &str, reason: Option<&str>| {
        request_egress(RequestEgressRequest {
            sandbox_id: "sb".into(),
            host: host.into(),
            reason: reason.map(str::to_owned),
        })
    };
    let asked = ask("PyPI.org", Some("to install requests")).unwrap();
    assert_eq!(
        (asked.host.as_str(), asked.reason.as_deref()),
        ("pypi.org", Some("to install requests"))
    );
    assert_eq!(ask("*.example.com:8443", Some("  ")).unwrap().reason, None);
    assert_eq!(paths_of(ask("10.0.0.1", None).unwrap_err()), ["host"]);
    assert_eq!(paths_of(ask("", None).unwrap_err()), ["host"]);
    assert_eq!(
        paths_of(ask("a.example", Some(&"x".repeat(501))).unwrap_err()),
        ["reason"]
    );
    assert_eq!(
        paths_of(ask("a.example", Some("line\nbreak")).unwrap_err()),
        ["reason"]
    );
    let list = |status: Option<&str>| {
        egress_requests(crate::api::EgressRequestsQuery {
            status: status.map(str::to_owned),
            sandbox_id: None,
        })
    };
    assert_eq!(list(None).unwrap(), (true, None));
    assert_eq!(list(Some("all")).unwrap(), (false, None));
    assert_eq!(paths_of(list(Some("denied")).unwrap_err()), ["status"]);
}

#[test]
fn set_timeout_bounds() {
    let req = |timeout_ms| SetTimeoutRequest {
        sandbox_id: "sb".into(),
        timeout_ms,
    };
    assert!(set_timeout(req(10_000)).is_ok());
    assert!(set_timeout(req(9_999)).is_err());
    assert!(set_timeout(req(86_400_001)).is_err());
}

#[test]
fn process_checks() {
    assert_eq!(signal_number(None), Ok(15));
    assert_eq!(signal_number(Some("SIGKILL")), Ok(9));
    assert!(signal_number(Some("STOP")).is_err());
    assert_eq!(process_wait_ms(None), Ok(30_000));
    assert!(process_wait_ms(Some(600_001)).is_err());
    assert_eq!(
        process_data("aGk=".into(), Encoding::Base64),
        Ok(b"hi".to_vec())
    );
    assert!(process_data("x".repeat(1024 * 1024 + 1), Encoding::Utf8).is_err());
    assert!(process_id("").is_err());
}

#[test]
fn labels_are_bounded_and_kept() {
    let labels: BTreeMap<String, String> = [
        ("tenant_id".to_owned(), "acme".to_owned()),
        ("app.example/session".to_owned(), "s-1".to_owned()),
        ("empty".to_owned(), String::new()),
    ]
    .into();
    let cmd = create(|r| r.labels = Some(labels.clone())).expect("valid");
    assert_eq!(cmd.labels, labels);
    assert!(create(|_| {}).unwrap().labels.is_empty());
    let bad: [BTreeMap<String, String>; 5] = [
        [(String::new(), "v".to_owned())].into(),
        [("a".repeat(64), "v".to_owned())].into(),
        [("has space".to_owned(), "v".to_owned())].into(),
        [("k".to_owned(), "v".repeat(257))].into(),
        [("k".to_owned(), "line\nbreak".to_owned())].into(),
    ];
    for labels in bad {
        let err = create(|r| r.labels = Some(labels.clone())).expect_err("invalid");
        assert_eq!(paths_of(err), ["labels"], "{labels:?}");
    }
    let many: BTreeMap<String, String> =
        (0..33).map(|i| (format!("k{i}"), "v".to_owned())).collect();
    assert_eq!(
        paths_of(create(|r| r.labels = Some(many)).unwrap_err()),
        ["labels"]
    );
}

#[test]
fn a_metrics_range_is_two_times_in_order() {
    let parse = |text: &str| text.parse::<i64>().ok();
    let range = |from: Option<&str>, to: Option<&str>| {
        metrics_range(
            crate::api::SandboxMetricsQuery {
                sandbox_id: "sbx".into(),
                from: from.map(str::to_owned),
                to: to.map(str::to_owned),
            },
            parse,
        )
    };
    assert_eq!(
        range(Some("5"), Some("9")).unwrap(),
        MetricsRange {
            sandbox_id: "sbx".into(),
            from_ms: Some(5),
            to_ms: Some(9)
        }
    );
    assert_eq!(range(None, None).unwrap().from_ms, None);
    assert_eq!(paths_of(range(Some("9"), Some("5")).unwrap_err()), ["to"]);
    assert_eq!(
        paths_of(range(Some("yesterday"), Some("later")).unwrap_err()),
        ["from", "to"]
    );
}
