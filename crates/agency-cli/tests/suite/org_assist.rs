//! `agency compile --assist` through the real binary against the scripted
//! model server: a section the compiler does not know is sent to the home's
//! `[models.NAME]` upstream (both APIs), the answer is checked like
//! frontmatter (a wrong one is a diagnostic and exit 1), the placement is
//! said on stderr, and the provider key reaches only the model server.
//! Without `--assist` nothing is asked; without the upstream nothing is
//! compiled; a run never sends more than its bound of requests.

#![allow(clippy::unwrap_used)]

use crate::home;

use std::path::{Path, PathBuf};
use std::process::Output;

use agency_testkit::{Api, ModelServer, RecordedRequest, Script};
use home::TestHome;
use serde_json::{Value, json};

const KEY_VAR: &str = "AGENCY_ASSIST_TEST_KEY";
const KEY: &str = "sk-assist-LEAK-CHECK-7";

/// The section text decides the scripted answer, so a scenario that
/// answered proves the prompt carried that text.
fn script() -> Script {
    let s = json!({
        "scenarios": [
            {"name": "budget", "match": {"user_contains": "Spend at most five dollars."},
             "turns": [{"text": "Here you are:\n```json\n{\"budget\": {\"usd\": 5}}\n```"}]},
            {"name": "wrong", "match": {"user_contains": "Spend lots."},
             "turns": [{"text": "{\"budget\": {\"usd\": \"lots\"}, \"behaviour\": [\"x\"]}"}]},
            {"name": "down", "match": {"user_contains": "Spend nothing."},
             "turns": [{"error": {"status": 503, "message": "overloaded", "times": 5}},
                       {"text": "{}"}]}
        ],
        "fallback": {"text": "{}"}
    });
    Script::from_json(&s.to_string()).unwrap()
}

/// A home whose `[models.default]` (Anthropic) and `[models.other]`
/// (OpenAI) are the scripted server, the key read from an environment
/// variable through `[secrets]`.
fn home_with_models(base: &str) -> TestHome {
    let h = TestHome::new();
    h.init_with(&format!(
        "[secrets]\nprov = {{ env = {KEY_VAR:?} }}\n\
         [models.default]\napi = \"anthropic\"\nbase_url = {base:?}\napi_key = \"${{secret:prov}}\"\nmodel = \"assist-model-a\"\n\
         [models.other]\napi = \"openai\"\nbase_url = \"{base}/v1\"\napi_key = \"${{secret:prov}}\"\nmodel = \"assist-model-o\"\n"
    ));
    h
}

/// A source folder whose agent `Boss` has the section `## Budget` holding `text`.
fn folder(parent: &Path, text: &str) -> PathBuf {
    let dir = parent.join(format!("org-{}", text.len()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("A.agency"),
        "# Agency Name: A\n## Executive Agent\nBoss\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("Boss.agent"),
        format!("# Boss\n## Budget\n{text}\n"),
    )
    .unwrap();
    dir
}

/// Run the binary off the runtime's threads (the model server runs on them).
async fn run(h: &TestHome, args: &[&str]) -> Output {
    let mut c = h.command(args);
    c.env(KEY_VAR, KEY);
    tokio::task::spawn_blocking(move || c.output().unwrap())
        .await
        .unwrap()
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).unwrap()
}

fn asked(server: &ModelServer) -> Vec<RecordedRequest> {
    server.requests()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_places_a_section_through_either_api_and_it_is_said() {
    let server = ModelServer::start(script()).await.unwrap();
    let h = home_with_models(&server.base_url());
    let dir = folder(h.tmp.path(), "Spend at most five dollars.");
    let d = dir.to_str().unwrap();

    let out = run(&h, &["compile", d, "--assist"]).await;
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let model: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        model["agents"][0]["budget"]["usd"].as_f64(),
        Some(5.0),
        "{model}"
    );
    assert!(
        err.contains(
            "Boss.agent:2:4: warning: section `Budget` was placed by --assist: {\"budget\":{\"usd\":5}}"
        ),
        "{err}"
    );
    assert!(
        err.contains("note: --assist sent 1 request(s) to [models.default] (assist-model-a)"),
        "{err}"
    );
    let reqs = asked(&server);
    assert_eq!(reqs.len(), 1, "{reqs:?}");
    assert_eq!(reqs[0].api, Api::Anthropic);
    assert_eq!(reqs[0].model, "assist-model-a");
    assert_eq!(reqs[0].scenario.as_deref(), Some("budget"));
    assert_eq!(reqs[0].credential.as_deref(), Some(KEY));
    assert!(!err.contains(KEY) && !text(&out.stdout).contains(KEY));

    // The OpenAI API, named with --assist-model (which implies --assist).
    let out = run(&h, &["compile", d, "--assist-model", "other"]).await;
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let model: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(model["agents"][0]["budget"]["usd"].as_f64(), Some(5.0));
    assert!(
        err.contains("--assist sent 1 request(s) to [models.other] (assist-model-o)"),
        "{err}"
    );
    let reqs = asked(&server);
    assert_eq!(reqs.len(), 2);
    assert_eq!(reqs[1].api, Api::OpenAi);
    assert_eq!(reqs[1].model, "assist-model-o");
    assert_eq!(reqs[1].scenario.as_deref(), Some("budget"));
    assert_eq!(reqs[1].credential.as_deref(), Some(KEY));

    // `explain` shares the flag: the budget's origin is the section.
    let out = run(&h, &["explain", d, "Boss", "--assist"]).await;
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    assert!(
        shown.contains("budget  {\"usd\":5.0}    <- Boss.agent:2"),
        "{shown}"
    );
    assert_eq!(asked(&server).len(), 3);

    // Without --assist: the usual warning, the text kept as static
    // memory, and no request at all.
    let out = run(&h, &["compile", d]).await;
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("warning: section `Budget` is not one Agency reads"),
        "{err}"
    );
    assert!(!err.contains("--assist"), "{err}");
    let model: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(model["agents"][0].get("budget").is_none(), "{model}");
    assert_eq!(asked(&server).len(), 3, "no request without --assist");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_outside_the_schema_is_an_error_and_nothing_is_written() {
    let server = ModelServer::start(script()).await.unwrap();
    let h = home_with_models(&server.base_url());
    let dir = folder(h.tmp.path(), "Spend lots.");
    let file = h.tmp.path().join("model.json");
    std::fs::write(&file, "previous").unwrap();
    let out = run(
        &h,
        &[
            "compile",
            dir.to_str().unwrap(),
            "--assist",
            "-o",
            file.to_str().unwrap(),
        ],
    )
    .await;
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("Boss.agent:2:4: error: bad budget value for `usd`: expected a non-negative number of dollars, found `lots`"),
        "{err}"
    );
    assert!(
        err.contains("error: unknown key `behaviour` in the --assist answer for section `Budget`; did you mean `behavior`?"),
        "{err}"
    );
    assert!(err.contains("error: failed to compile"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "previous");
    assert_eq!(asked(&server)[0].scenario.as_deref(), Some("wrong"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_error_is_a_warning_naming_the_upstream_and_status() {
    let server = ModelServer::start(script()).await.unwrap();
    let h = home_with_models(&server.base_url());
    let dir = folder(h.tmp.path(), "Spend nothing.");
    let out = run(&h, &["compile", dir.to_str().unwrap(), "--assist"]).await;
    let err = text(&out.stderr);
    // The library's rule: an assistant that fails leaves the text as it
    // is without --assist, with a warning saying why.
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains(
            "warning: --assist could not place section `Budget`: [models.default] answered HTTP 503"
        ),
        "{err}"
    );
    assert!(err.contains("overloaded"), "{err}");
    assert!(!err.contains(KEY), "{err}");
    let model: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(model["agents"][0].get("budget").is_none(), "{model}");
    assert_eq!(asked(&server).len(), 1);
    assert_eq!(asked(&server)[0].status, 503);
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_home_or_the_upstream_nothing_is_compiled() {
    let server = ModelServer::start(script()).await.unwrap();
    let h = home_with_models(&server.base_url());
    let dir = folder(h.tmp.path(), "Spend at most five dollars.");
    let d = dir.to_str().unwrap();

    let out = run(&h, &["compile", d, "--assist-model", "missing"]).await;
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("declares no [models.missing]; add one (api = \"anthropic\" or \"openai\", base_url, api_key = \"${secret:NAME}\", model)"),
        "{err}"
    );
    assert_eq!(out.stdout, b"");

    let bare = TestHome::new();
    bare.init_with("");
    let out = run(&bare, &["compile", d, "--assist"]).await;
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("declares no [models.default]"), "{err}");
    assert_eq!(out.stdout, b"");

    let none = TestHome::new(); // never initialised
    let out = run(&none, &["compile", d, "--assist"]).await;
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("is not an Agency home"), "{err}");
    assert!(err.contains("[models.default]"), "{err}");
    assert_eq!(out.stdout, b"");

    // Without --assist the same homes compile, asking nothing.
    assert!(run(&none, &["compile", d]).await.status.success());
    assert!(asked(&server).is_empty());
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_sends_at_most_fifty_requests() {
    let server = ModelServer::start(script()).await.unwrap();
    let h = home_with_models(&server.base_url());
    let dir = h.tmp.path().join("many");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(
        dir.join("A.agency"),
        "# Agency Name: A\n## Executive Agent\nBoss\n",
    )
    .unwrap();
    let mut body = String::from("# Boss\n");
    for i in 0..51 {
        body.push_str(&format!("## Xylophone number {i}\nSome prose {i}.\n"));
    }
    std::fs::write(dir.join("Boss.agent"), body).unwrap();
    let out = run(&h, &["compile", dir.to_str().unwrap(), "--assist"]).await;
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("more text to place than the 50 requests one run sends"),
        "{err}"
    );
    assert!(
        err.contains("--assist could not place section `Xylophone number 50`: not asked"),
        "{err}"
    );
    assert_eq!(out.stdout, b"");
    assert_eq!(asked(&server).len(), 50);
    server.shutdown().await;
}
