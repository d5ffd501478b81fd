//! Contexts beyond plain Python: results in every format (a figure as a picture and as
//! chart data, a data frame as data, display() calls, IPython's syntax) in the code
//! interpreter's image, JavaScript and bash contexts, and the same through E2B's code
//! interpreter.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::contexts::run;
use crate::e2b_envd::{e2b_sandbox, e2b_sandbox_of};
use crate::harness::{KEY, TestServer, id};

async fn context(server: &TestServer, sandbox: &Value, language: &str) -> Value {
    let (status, context) = server
        .post(
            "sandbox.contextCreate",
            json!({"sandboxId": id(sandbox), "language": language}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{context}");
    assert_eq!(context["language"], language);
    context
}

fn formats(result: &Value) -> Vec<&str> {
    result["data"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect()
}

const FIGURE: &str = "import matplotlib.pyplot as plt
plt.figure()
plt.plot([1, 2, 3], [2, 4, 8], label='doubling')
plt.title('Growth')
plt.xlabel('Time (s)')
plt.show()
print('shown')
7";

#[tokio::test]
async fn python_shows_figures_frames_and_displays_in_every_format() {
    let server = TestServer::start().await;
    let sandbox = server
        .create(json!({"template": "code-interpreter-v1"}))
        .await;
    let python = context(&server, &sandbox, "python").await;

    let ran = run(&server, &sandbox, &python, FIGURE, 60_000).await;
    assert_eq!(ran["error"], Value::Null, "{ran}");
    assert_eq!(ran["stdout"], "shown\n");
    let results = ran["results"].as_array().unwrap();
    assert_eq!(results.len(), 2, "the figure shown, then the value: {ran}");
    let figure = &results[0];
    assert_eq!(figure["isMainResult"], false);
    assert_eq!(
        formats(figure),
        [
            "application/vnd.sandboxd.chart+json",
            "image/png",
            "text/plain"
        ]
    );
    let png = figure["data"]["image/png"].as_str().unwrap();
    assert!(
        png.starts_with("iVBORw0KGgo"),
        "a PNG, base64: {}",
        &png[..20]
    );
    let chart = &figure["data"]["application/vnd.sandboxd.chart+json"];
    assert_eq!(chart["type"], "line");
    assert_eq!(chart["title"], "Growth");
    assert_eq!(chart["x_unit"], "s");
    assert_eq!(chart["elements"][0]["label"], "doubling");
    assert_eq!(
        chart["elements"][0]["points"],
        json!([[1.0, 2.0], [2.0, 4.0], [3.0, 8.0]])
    );
    assert_eq!(results[1]["isMainResult"], true);
    assert_eq!(results[1]["data"]["text/plain"], "7");
    assert_eq!(ran["result"], "7");

    let frame = run(
        &server,
        &sandbox,
        &python,
        "import pandas as pd\npd.DataFrame({'a': [1, 2, 3], 'b': ['x', 'y', None]})",
        60_000,
    )
    .await;
    let data = &frame["results"][0]["data"];
    assert_eq!(
        data["application/vnd.sandboxd.data+json"],
        json!({"a": [1, 2, 3], "b": ["x", "y", null]})
    );
    assert!(data["text/html"].as_str().unwrap().contains("<table"));

    let shown = run(
        &server,
        &sandbox,
        &python,
        "from IPython.display import display, HTML, Markdown\n\
         display(HTML('<b>bold</b>'))\n\
         display({'text/latex': r'\\alpha'}, raw=True)\n\
         display(Markdown('# title'))\n\
         {'k': [1, 2]}",
        30_000,
    )
    .await;
    let shown: Vec<&Value> = shown["results"].as_array().unwrap().iter().collect();
    assert_eq!(shown[0]["data"]["text/html"], "<b>bold</b>");
    assert_eq!(formats(shown[1]), ["text/latex"]);
    assert_eq!(shown[2]["data"]["text/markdown"], "# title");
    assert_eq!(shown[3]["data"]["application/json"], json!({"k": [1, 2]}));

    // IPython's syntax, and what programs write to the process's own output.
    let shell = run(
        &server,
        &sandbox,
        &python,
        "!pwd\nimport os\nos.system('echo from-a-program')\n%cd /tmp\nprint(os.getcwd())",
        30_000,
    )
    .await;
    assert_eq!(
        shell["stdout"], "/home/user\nfrom-a-program\n/tmp\n/tmp\n",
        "{shell}"
    );

    let failed = run(&server, &sandbox, &python, "undefined_name", 30_000).await;
    assert_eq!(failed["error"]["name"], "NameError");
    assert_eq!(
        failed["error"]["value"],
        "name 'undefined_name' is not defined"
    );
    assert!(
        !failed["error"]["traceback"]
            .as_str()
            .unwrap()
            .contains("IPython/core"),
        "IPython's own frames are left out: {failed}"
    );
}

#[tokio::test]
async fn javascript_and_bash_contexts_keep_their_state_and_take_variables_per_run() {
    let server = TestServer::start().await;
    let sandbox = server.create(json!({"template": "base"})).await;
    let js = context(&server, &sandbox, "javascript").await;
    let ran = run(
        &server,
        &sandbox,
        &js,
        "import { basename } from 'path'\nconst n = await Promise.resolve(41)\nconsole.log(basename('/a/b.txt'))",
        30_000,
    )
    .await;
    assert_eq!(ran["error"], Value::Null, "{ran}");
    assert_eq!(ran["stdout"], "b.txt\n");
    let next = run(&server, &sandbox, &js, "n + 1", 30_000).await;
    assert_eq!(next["result"], "42");
    assert_eq!(next["executionCount"], 2);
    let text = run(&server, &sandbox, &js, "process.cwd()", 30_000).await;
    assert_eq!(text["result"], "/home/user", "a string is its own text");
    let thrown = run(
        &server,
        &sandbox,
        &js,
        "throw new RangeError('far')",
        30_000,
    )
    .await;
    assert_eq!(thrown["error"]["name"], "RangeError");
    assert_eq!(thrown["error"]["value"], "far");

    let bash = context(&server, &sandbox, "bash").await;
    let (status, ran) = server
        .post(
            "sandbox.contextRun",
            json!({"sandboxId": id(&sandbox), "contextId": bash["contextId"],
                   "code": "cd /tmp; KEPT=yes; echo \"$PWD\"; echo oops >&2"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{ran}");
    assert_eq!(
        (&ran["stdout"], &ran["stderr"]),
        (&json!("/tmp\n"), &json!("oops\n"))
    );
    let again = run(&server, &sandbox, &bash, "echo $KEPT $(pwd); false", 30_000).await;
    assert_eq!(again["stdout"], "yes /tmp\n");
    assert_eq!(again["error"]["value"], "exit status 1");
}

/// E2B's lines for one run of `body` on port 49999 of sandbox `id`.
async fn e2b_run(server: &TestServer, id: &str, token: &str, body: Value) -> Vec<Value> {
    let ran = server
        .client
        .post(format!("{}/e2b/envd/execute", server.url))
        .header("E2b-Sandbox-Id", id)
        .header("E2b-Sandbox-Port", "49999")
        .header("E2B-Traffic-Access-Token", token)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(ran.status(), StatusCode::OK);
    ran.text()
        .await
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[tokio::test]
async fn e2bs_interpreter_answers_results_as_its_fields_in_every_language() {
    let server = TestServer::start().await;
    let (id, token) = e2b_sandbox(&server, KEY).await;
    // E2B's default template is the interpreter's.
    let (rich, rich_token) = e2b_sandbox_of(
        &server,
        KEY,
        json!({"templateID": "code-interpreter-v1", "timeout": 120}),
    )
    .await;
    let lines = e2b_run(&server, &rich, &rich_token, json!({"code": FIGURE})).await;
    let results: Vec<&Value> = lines.iter().filter(|l| l["type"] == "result").collect();
    assert_eq!(results.len(), 2, "{lines:?}");
    assert!(results[0]["png"].as_str().unwrap().starts_with("iVBOR"));
    assert_eq!(results[0]["chart"]["type"], "line");
    assert_eq!(results[0]["is_main_result"], false);
    assert!(results[0].get("extra").is_none(), "{:?}", results[0]);
    assert_eq!(
        (&results[1]["text"], &results[1]["is_main_result"]),
        (&json!("7"), &json!(true))
    );

    let js = e2b_run(
        &server,
        &id,
        &token,
        json!({"code": "process.env.FOO", "language": "js", "env_vars": {"FOO": "bar"}}),
    )
    .await;
    assert_eq!(js[0]["text"], "bar", "{js:?}");
    let unset = e2b_run(
        &server,
        &id,
        &token,
        json!({"code": "process.env.FOO || 'default'", "language": "javascript"}),
    )
    .await;
    assert_eq!(unset[0]["text"], "default", "{unset:?}");
    let bash = e2b_run(
        &server,
        &id,
        &token,
        json!({"code": "echo $FOO", "language": "bash", "env_vars": {"FOO": "bar"}}),
    )
    .await;
    assert_eq!(
        (&bash[0]["type"], &bash[0]["text"]),
        (&json!("stdout"), &json!("bar\n"))
    );

    let listed: Vec<Value> = server
        .client
        .get(format!("{}/e2b/envd/contexts", server.url))
        .header("E2b-Sandbox-Id", &id)
        .header("E2b-Sandbox-Port", "49999")
        .header("E2B-Traffic-Access-Token", &token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let languages: Vec<&str> = listed
        .iter()
        .map(|c| c["language"].as_str().unwrap())
        .collect();
    for language in ["python", "javascript", "bash"] {
        assert!(languages.contains(&language), "{listed:?}");
    }
}
