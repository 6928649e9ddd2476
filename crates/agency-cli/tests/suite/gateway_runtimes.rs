//! Issue 11 items 1, 2 and 7 with the real daemon and real runtimes: the
//! built-in loop (both APIs) and Claude Code reach the scripted model
//! server only through the daemon's model gateway (`upstream = "NAME"`),
//! with their own token; the provider key, a secret read from a file
//! outside the home, is in no file under the home afterwards (transcripts,
//! captured output, the database, the log) nor in Claude Code's
//! environment; every model call is in `agency cost`. Agents run confined:
//! the model server's port is not one they may connect to, so an answer
//! at all proves the gateway carried the conversation.

#![allow(clippy::unwrap_used)]

use crate::agent_story;

use std::path::{Path, PathBuf};
use std::time::Duration;

use agent_story::{BIN, SCRIPT, Story, claude_bin, json};

const KEY: &str = "sk-provider-GATEWAY-LEAK-CHECK-42";

/// `[secrets]` and one `[models.up]` pointing at `base_url`; the key file
/// lives in `keys`, outside the home.
fn models_toml(api: &str, base_url: &str, keys: &Path) -> String {
    let file = keys.join("provider_key");
    std::fs::write(&file, KEY).unwrap();
    format!(
        "[secrets]\nprov = {{ file = {:?} }}\n[models.up]\napi = {api:?}\nbase_url = {base_url:?}\napi_key = \"${{secret:prov}}\"\n",
        file.display().to_string()
    )
}

fn files_containing(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    let mut hits = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(p);
            } else if ft.is_file()
                && let Ok(bytes) = std::fs::read(&p)
                && bytes.windows(needle.len()).any(|w| w == needle)
            {
                hits.push(p);
            }
        }
    }
    hits
}

/// The calls `agency cost` counts for the whole organisation, checked
/// against what the model server answered.
fn assert_metered(home: &Path, answered: usize) -> serde_json::Value {
    let cost = json(home, &["cost"]);
    assert_eq!(cost["subtree"]["calls"], answered, "{cost}");
    assert!(
        cost["subtree"]["usage"]["input_tokens"].as_i64().unwrap() > 0,
        "{cost}"
    );
    assert!(
        cost["subtree"]["usage"]["output_tokens"].as_i64().unwrap() > 0,
        "{cost}"
    );
    // The text form is a tree line per handler.
    let (code, out, err) = agent_story::agency(home, &["cost"]);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("self: {answered} calls")), "{out}");
    cost
}

async fn builtin_story(api: &str) {
    let script = agency_testkit::Script::from_json(SCRIPT).unwrap();
    let model = agency_testkit::ModelServer::start(script).await.unwrap();
    let keys = tempfile::tempdir().unwrap();
    let cfg = format!(
        "[agents]\nruntime = \"builtin\"\nagency_program = {BIN:?}\n[agents.builtin]\nupstream = \"up\"\nmodel = \"scripted\"\nmax_turns = 20\n{}",
        models_toml(api, &model.base_url(), keys.path())
    );
    let story = Story::start(&cfg, Duration::from_secs(60)).await;
    let (reply, agent) = story.ask_and_wait().await;
    assert_eq!(agent["end_reason"], "completed", "{agent}\n{}", story.log());
    let requests = model.requests();
    assert_eq!(requests.len(), 6, "{requests:?}");
    assert!(requests.iter().all(|r| r.status == 200));
    story.assert_common_outcome(&reply, &agent).await;
    let cost = assert_metered(&story.home, requests.len());
    // The agent's own count of tokens is the gateway's.
    let run = json(&story.home, &["run", agent["id"].as_str().unwrap()]);
    assert_eq!(
        run["output_tokens"], cost["subtree"]["usage"]["output_tokens"],
        "{run}\n{cost}"
    );
    // Stopped with the home kept (`stop` drops the story and its home,
    // which would make this search find nothing).
    let mut story = story;
    story.halt();
    assert!(story.home.join("agency.db").exists());
    let hits = files_containing(&story.home, KEY.as_bytes());
    assert!(hits.is_empty(), "the provider key is in {hits:?}");
    drop(story);
    model.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtin_loop_reaches_an_anthropic_upstream_only_through_the_gateway() {
    builtin_story("anthropic").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtin_loop_reaches_an_openai_upstream_only_through_the_gateway() {
    builtin_story("openai").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_reaches_its_upstream_through_the_gateway_and_never_holds_the_key() {
    let claude = std::fs::canonicalize(claude_bin()).unwrap();
    let script = agency_testkit::Script::from_json(SCRIPT).unwrap();
    let model = agency_testkit::ModelServer::start(script).await.unwrap();
    let keys = tempfile::tempdir().unwrap();
    let cfg = format!(
        "[agents]\nruntime = \"claude-code\"\n[agents.claude_code]\nprogram = {:?}\nmodel = \"scripted\"\nmax_turns = 20\nupstream = \"up\"\n[agents.claude_code.env]\nCLAUDE_CODE_MAX_RETRIES = \"1\"\n{}",
        claude.to_str().unwrap(),
        models_toml("anthropic", &model.base_url(), keys.path())
    );
    let story = Story::start(&cfg, Duration::from_secs(120)).await;
    let (reply, agent) = story.ask_and_wait().await;
    assert_eq!(agent["end_reason"], "completed", "{agent}\n{}", story.log());
    let requests = model.requests();
    let root = requests
        .iter()
        .filter(|r| r.scenario.as_deref() == Some("root"))
        .count();
    assert_eq!(root, 6, "{requests:?}");
    story.assert_common_outcome(&reply, &agent).await;
    // Claude Code's side requests are model calls too: all are counted.
    assert_metered(&story.home, requests.len());
    // Stopped with the home kept (`stop` drops the story and its home,
    // which would make this search find nothing).
    let mut story = story;
    story.halt();
    assert!(story.home.join("agency.db").exists());
    let hits = files_containing(&story.home, KEY.as_bytes());
    assert!(hits.is_empty(), "the provider key is in {hits:?}");
    drop(story);
    model.shutdown().await;
}

/// What Claude Code is given (a stand-in records its environment): the
/// gateway's URL and the agent's token, never the key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_codes_environment_names_the_gateway_and_holds_no_key() {
    let out = tempfile::tempdir().unwrap();
    let fake = out.path().join("claude");
    let o = out.path().display().to_string();
    std::fs::write(
        &fake,
        format!("#!/bin/sh\nenv > {o:?}/env.tmp\nmv {o:?}/env.tmp {o:?}/env.txt\nexec sleep 300\n"),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let keys = tempfile::tempdir().unwrap();
    let cfg = format!(
        "[agents]\nruntime = \"claude-code\"\n[agents.claude_code]\nprogram = {:?}\nupstream = \"up\"\n{}\n{}",
        fake.display().to_string(),
        models_toml("anthropic", "https://api.anthropic.example", keys.path()),
        agency_testkit::sandbox::sandbox_toml(&[out.path()])
    );
    let story = Story::start(&cfg, Duration::from_secs(60)).await;
    let (code, _, err) = agent_story::agency(&story.home, &["send", "hello"]);
    assert_eq!(code, 0, "{err}");
    let env_file = out.path().join("env.txt");
    let env = loop {
        if let Ok(t) = std::fs::read_to_string(&env_file) {
            break t;
        }
        assert!(
            std::time::Instant::now() < story_deadline(),
            "no environment recorded:\n{}",
            story.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(!env.contains(KEY), "the key reached Claude Code:\n{env}");
    assert!(!env.contains("ANTHROPIC_API_KEY="), "{env}");
    let base = env
        .lines()
        .find_map(|l| l.strip_prefix("ANTHROPIC_BASE_URL="))
        .unwrap();
    assert!(
        base.starts_with("http://127.0.0.1:") && base.ends_with("/model/up"),
        "{base}"
    );
    let token = env
        .lines()
        .find_map(|l| l.strip_prefix("ANTHROPIC_AUTH_TOKEN="))
        .unwrap();
    assert!(
        token.starts_with("agency"),
        "the agent's own token: {token}"
    );
    story.stop();
}

fn story_deadline() -> std::time::Instant {
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *START.get_or_init(std::time::Instant::now) + Duration::from_secs(60)
}
