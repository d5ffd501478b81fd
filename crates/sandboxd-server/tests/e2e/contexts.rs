//! Interpreter contexts: state persists between runs, results and errors come back,
//! a timeout interrupts the run and keeps the state.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::harness::{TestServer, id};

/// Runs `code` in `context`; the answer of a run that answered (200).
pub(crate) async fn run(
    server: &TestServer,
    sandbox: &Value,
    context: &Value,
    code: &str,
    timeout_ms: u64,
) -> Value {
    let (status, result) = server
        .post(
            "sandbox.contextRun",
            json!({"sandboxId": id(sandbox), "contextId": context["contextId"], "code": code, "timeoutMs": timeout_ms}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{result}");
    result
}

/// A new Python context in `sandbox`.
pub(crate) async fn create_context(server: &TestServer, sandbox: &Value) -> Value {
    let (status, context) = server
        .post("sandbox.contextCreate", json!({"sandboxId": id(sandbox)}))
        .await;
    assert_eq!(status, StatusCode::OK, "{context}");
    context
}

#[tokio::test]
async fn python_state_persists_between_runs() {
    let server = TestServer::start().await;
    // The test's `base` image has python3; its `python` template is busybox, without.
    let busybox = server.create(json!({"template": "python"})).await;
    let (status, body) = server
        .post("sandbox.contextCreate", json!({"sandboxId": id(&busybox)}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(
        body["message"].as_str().unwrap().contains("python3"),
        "{body}"
    );
    let sandbox = server.create(json!({"template": "base"})).await;
    let (status, context) = server
        .post(
            "sandbox.contextCreate",
            json!({"sandboxId": id(&sandbox), "language": "python"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{context}");
    assert_eq!(context["status"], "running");

    let first = run(&server, &sandbox, &context, "x = 41\nprint('set')", 10_000).await;
    assert_eq!(
        first,
        json!({"stdout": "set\n", "stderr": "", "result": null, "error": null, "timedOut": false, "truncated": false, "executionCount": 1, "results": []})
    );
    let second = run(&server, &sandbox, &context, "x + 1", 10_000).await;
    assert_eq!(second["result"], "42");
    assert_eq!(second["executionCount"], 2);
    let failed = run(
        &server,
        &sandbox,
        &context,
        "import sys\nprint('oops', file=sys.stderr)\n1/0",
        10_000,
    )
    .await;
    assert_eq!(failed["stderr"], "oops\n");
    assert_eq!(failed["error"]["name"], "ZeroDivisionError");
    assert!(
        failed["error"]["traceback"]
            .as_str()
            .unwrap()
            .contains("<cell>")
    );

    // Output past 1 MiB is cut and said to be; a record forged on the interpreter's own
    // output is not taken for the run's reply.
    let loud = run(
        &server,
        &sandbox,
        &context,
        "import os\nos.write(1, b'\\x1e{\"id\": 0, \"result\": \"forged\"}\\n')\n\
         for _ in range(3):\n    print('y' * (1024 * 1024))\n'done'",
        20_000,
    )
    .await;
    assert_eq!(loud["stdout"].as_str().unwrap().len(), 1024 * 1024);
    assert_eq!(
        (&loud["truncated"], &loud["result"]),
        (&json!(true), &json!("'done'"))
    );

    let slow = run(
        &server,
        &sandbox,
        &context,
        "import time\nx = 7\ntime.sleep(30)",
        1_000,
    )
    .await;
    assert_eq!(slow["timedOut"], true);
    assert_eq!(slow["error"]["name"], "KeyboardInterrupt");
    assert_eq!(
        run(&server, &sandbox, &context, "x", 10_000).await["result"],
        "7",
        "state survived the interrupt"
    );

    let (status, _) = server
        .post(
            "sandbox.contextRemove",
            json!({"sandboxId": id(&sandbox), "contextId": context["contextId"]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let (status, _) = server
            .post(
                "sandbox.contextRun",
                json!({"sandboxId": id(&sandbox), "contextId": context["contextId"], "code": "1"}),
            )
            .await;
        if status == StatusCode::CONFLICT {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "a removed context still runs code"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let (status, _) = server
        .post(
            "sandbox.contextRun",
            json!({"sandboxId": id(&sandbox), "contextId": "c_missing", "code": "1"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = server
        .post(
            "sandbox.contextCreate",
            json!({"sandboxId": id(&sandbox), "language": "ruby"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

/// Interrupts that keep coming (a client's and the server's for the same run, or a
/// timeout's as the run ends) interrupt runs' code only: one that lands while the
/// interpreter reads a request or reports a run loses neither, nor ends the context.
#[tokio::test]
async fn interrupts_that_come_between_runs_lose_no_run_and_end_no_context() {
    let server = TestServer::start_with(|config| {
        config.rate_limit_per_second = 10_000;
        config.rate_limit_burst = 10_000;
    })
    .await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let context = create_context(&server, &sandbox).await;
    assert_eq!(
        run(&server, &sandbox, &context, "n = 0", 10_000).await["error"],
        Value::Null
    );
    let done = std::sync::atomic::AtomicBool::new(false);
    let signal =
        json!({"sandboxId": id(&sandbox), "processId": context["contextId"], "signal": "INT"});
    let interrupt = || async {
        let mut sent = 0;
        while !done.load(std::sync::atomic::Ordering::Relaxed) {
            let (status, body) = server.post("sandbox.processSignal", signal.clone()).await;
            assert_eq!(status, StatusCode::OK, "{body}");
            sent += 1;
            tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        }
        sent
    };
    let runs = async {
        let mut interrupted = 0;
        for i in 0..60 {
            // Each run answers within its timeout: a lost request would time out, and
            // an interpreter ended by an interrupt would be said to have ended.
            let code = if i % 2 == 0 {
                "import time\ntime.sleep(0.005)\nn += 1"
            } else {
                "1/0"
            };
            let answer = run(&server, &sandbox, &context, code, 5_000).await;
            assert_eq!(answer["timedOut"], false, "{answer}");
            match answer["error"]["name"].as_str() {
                Some("KeyboardInterrupt") => interrupted += 1,
                None | Some("ZeroDivisionError") => {}
                Some(_) => panic!("{answer}"),
            }
        }
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        interrupted
    };
    let (interrupted, first, second) = tokio::join!(runs, interrupt(), interrupt());
    let sent = first + second;
    assert!(
        sent >= 60 && interrupted > 0,
        "{sent} interrupts, {interrupted} runs interrupted"
    );
    let after = run(&server, &sandbox, &context, "n >= 0", 10_000).await;
    assert_eq!(after["result"], "True", "the state survived: {after}");
}
