//! Issue 11 items 1 and 7: "the provider key appears nowhere under the
//! home, in logs, transcripts or any agent's environment", and no agent
//! reaches its model past the gateway.
//!
//! A real daemon holds a distinctive provider key as a secret
//! (`[models.up] api_key = "${secret:prov}"`); an agent of the built-in
//! runtime, and one of the real Claude Code CLI, run real turns against
//! the scripted model server. The agent's first tool call blocks until the
//! test releases it, so that the test reads `/proc/PID/environ` and
//! `cmdline` of every live agent process (found by the `AGENCY_AGENT`
//! variable every agent process gets) and the files of its run directory
//! while it runs. From inside, the same call tries the model server
//! directly, through the egress proxy (refused: no model host is
//! implicitly reachable) and past it (the sandbox refuses the connection).
//! Afterwards every file under the home, the daemon's log and output, the
//! run's transcript and captured output are searched for the key. The
//! model server records the credential of every request it answered: each
//! carries the key, so the search cannot pass because the key was never
//! used.
//!
//! The key's file lives outside the home (`[secrets] prov = { file =
//! ABSOLUTE }`): `secrets.rs` reads a secret once at start into memory and
//! writes it nowhere, so no file under the home is excepted from the scan.

#![allow(clippy::unwrap_used)]

use crate::agent_story;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use agent_story::{BIN, Story, agency, claude_bin, json};

/// The root's run: a blocking shell call first (named as the runtime
/// spells its shell tool), then the usual guide.
fn script(shell_tool: &str, command: &str) -> String {
    let first = serde_json::json!({ "tool_calls": [ { "name": shell_tool, "input": { "command": command } } ] });
    format!(
        r#"{{
  "scenarios": [{{
    "name": "root",
    "match": {{ "system_contains": "Help the user accomplish all their work" }},
    "turns": [
      {first},
      {{ "tool_calls": [ {{ "name": "mail_inbox", "input": {{}} }} ] }},
      {{ "tool_calls": [ {{ "name": "mail_ack", "input": {{ "messages": ["{{{{result:/messages/0/id}}}}"] }} }} ] }},
      {{ "tool_calls": [ {{ "name": "kb_create", "input": {{ "description": "Composting guide", "content": "Greens and browns, kept moist." }} }} ] }},
      {{ "tool_calls": [ {{ "name": "mail_send", "input": {{ "to": "boss", "file": "{{{{result:/file}}}}", "subject": "Your composting guide" }} }} ] }},
      {{ "tool_calls": [ {{ "name": "audit_submit", "input": {{ "summary": "Wrote the guide and sent it to the user." }} }} ] }},
      {{ "text": "Done: the guide is in your inbox." }}
    ]
  }}],
  "fallback": {{ "text": "ok" }}
}}"#
    )
}

/// What the blocking call does inside the agent's sandbox: try the model
/// server through the egress proxy and directly, record both, say it
/// started, and wait for the test's release.
fn blocking_command(out: &Path, model_port: u16) -> String {
    let o = out.display();
    format!(
        "curl -s -o /dev/null -w '%{{http_code}}' --max-time 10 --proxy \"$HTTP_PROXY\" --noproxy '' http://127.0.0.1:{model_port}/v1/models > {o}/via_proxy.txt 2>&1; \
         curl -s -o /dev/null -w '%{{http_code}}' --max-time 10 --noproxy '*' http://127.0.0.1:{model_port}/v1/models > {o}/direct.txt 2>&1; \
         echo $? > {o}/direct_exit.txt; \
         touch {o}/started; while [ ! -e {o}/release ]; do sleep 0.1; done; echo released"
    )
}

fn files_containing(dir: &Path, needle: &[u8]) -> (usize, Vec<PathBuf>) {
    let (mut seen, mut hits) = (0, Vec::new());
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
            } else if ft.is_file() {
                let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("read {p:?}: {e}"));
                seen += 1;
                if contains(&bytes, needle) {
                    hits.push(p);
                }
            }
        }
    }
    (seen, hits)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Every process of this machine we may read: (pid, environ, cmdline).
fn processes() -> Vec<(u32, Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let (Ok(env), Ok(cmd)) = (
            std::fs::read(e.path().join("environ")),
            std::fs::read(e.path().join("cmdline")),
        ) else {
            continue; // gone, or not ours
        };
        out.push((pid, env, cmd));
    }
    out
}

async fn wait_file(story: &Story, path: &Path, deadline: Instant) {
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} did not appear; daemon log:\n{}",
            path.display(),
            story.log()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Where the daemon gets the key.
#[derive(Clone, Copy, PartialEq)]
enum KeyIn {
    /// `[secrets] prov = { file = … }` and `[models.up]`.
    Secret,
    /// The deprecated `agents.builtin.base_url` + `api_key_env`: the key in
    /// the daemon's environment; the daemon makes `[models.default]`.
    DaemonEnv,
}

/// The whole story for one runtime. `runtime_toml` is the `[agents]`
/// part (`MODEL_URL` stands for the model server's URL); the key,
/// `[secrets]`, `[models.up]` (for [`KeyIn::Secret`]) and `[sandbox]` are
/// added.
async fn key_is_nowhere(key: &str, shell_tool: &str, runtime_toml: &str, key_in: KeyIn) {
    let out = tempfile::tempdir().unwrap();
    let keys = tempfile::tempdir().unwrap();
    // The script names the model server's port, which is known only once
    // it listens: bind first, then write the script and serve on it.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let script = script(shell_tool, &blocking_command(out.path(), port));
    let model = agency_testkit::ModelServer::start_on_listener(
        agency_testkit::Script::from_json(&script).unwrap(),
        listener,
    )
    .unwrap();
    let key_file = keys.path().join("provider_key");
    std::fs::write(&key_file, key).unwrap();
    let runtime_toml = runtime_toml.replace("MODEL_URL", &model.base_url());
    let sandbox = agency_testkit::sandbox::sandbox_toml(&[out.path()]);
    let (story, upstream) = match key_in {
        KeyIn::Secret => {
            let cfg = format!(
                "{runtime_toml}[secrets]\nprov = {{ file = {:?} }}\n[models.up]\napi = \"anthropic\"\nbase_url = {:?}\napi_key = \"${{secret:prov}}\"\n{sandbox}",
                key_file.display().to_string(),
                model.base_url(),
            );
            (Story::start(&cfg, Duration::from_secs(180)).await, "up")
        }
        KeyIn::DaemonEnv => {
            let cfg = format!("{runtime_toml}{sandbox}");
            let env = [("PROVIDER_KEY", key)];
            let story = Story::start_with_env(&cfg, Duration::from_secs(180), &env).await;
            (story, "default")
        }
    };
    // With the key in its environment, the daemon's own process holds it
    // there (where the user put it): that one process is not searched.
    let daemon_pid = (key_in == KeyIn::DaemonEnv).then(|| {
        let info: serde_json::Value =
            serde_json::from_slice(&std::fs::read(story.home.join("daemon.json")).unwrap())
                .unwrap();
        u32::try_from(info["pid"].as_u64().unwrap()).unwrap()
    });
    let deadline = Instant::now() + Duration::from_secs(150);
    let (code, _, err) = agency(&story.home, &["send", "Please write me a composting guide"]);
    assert_eq!(code, 0, "{err}");
    wait_file(&story, &out.path().join("started"), deadline).await;

    // While the agent runs (its shell call blocks): no live process holds
    // the key in its environment or command line, and the agent's own
    // processes hold the gateway's address and their token instead.
    let live: Vec<String> = json(&story.home, &["agents"])["live"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(live.len(), 1, "{live:?}");
    let procs = processes();
    let daemon = json(&story.home, &["status"]);
    let mut agent_procs = 0;
    let mut gateway_seen = false;
    for (pid, env, cmd) in &procs {
        if Some(*pid) == daemon_pid {
            continue;
        }
        assert!(
            !contains(env, key.as_bytes()),
            "the key is in the environment of process {pid} ({})",
            String::from_utf8_lossy(cmd)
        );
        assert!(
            !contains(cmd, key.as_bytes()),
            "the key is in the command line of process {pid}"
        );
        let vars: Vec<&[u8]> = env.split(|b| *b == 0).collect();
        // This daemon's agents only (other tests run theirs beside).
        if vars.iter().any(|v| {
            live.iter()
                .any(|id| *v == format!("AGENCY_AGENT={id}").as_bytes())
        }) {
            agent_procs += 1;
            // No provider variable but the gateway's.
            for v in &vars {
                let v = String::from_utf8_lossy(v);
                if let Some(url) = v.strip_prefix("ANTHROPIC_BASE_URL=") {
                    assert!(url.ends_with(&format!("/model/{upstream}")), "{v}");
                    gateway_seen = true;
                }
                assert!(!v.starts_with("ANTHROPIC_API_KEY=sk"), "{v}");
            }
        }
    }
    assert!(
        agent_procs >= 1,
        "no live agent process found to inspect (status: {daemon})"
    );
    // Claude Code is given the gateway in its environment; the built-in
    // loop in its configuration file (its key variable names the token).
    let (_, configs) = files_containing(
        &story.home.join("run"),
        format!("/model/{upstream}").as_bytes(),
    );
    assert!(
        gateway_seen || !configs.is_empty(),
        "the agent was not pointed at the gateway"
    );
    let (seen_live, hits) = files_containing(&story.home, key.as_bytes());
    assert!(hits.is_empty(), "while running, the key is in {hits:?}");
    assert!(seen_live > 0);

    // From inside: the model server through the egress proxy is refused
    // (403: no egress capability; no model host is implicit any more), and
    // directly the sandbox refuses the connection (curl's code 000).
    let via_proxy = std::fs::read_to_string(out.path().join("via_proxy.txt")).unwrap();
    assert_eq!(via_proxy.trim(), "403", "through the egress proxy");
    let direct = std::fs::read_to_string(out.path().join("direct.txt")).unwrap();
    assert_eq!(direct.trim(), "000", "directly");
    let direct_exit = std::fs::read_to_string(out.path().join("direct_exit.txt")).unwrap();
    assert_ne!(direct_exit.trim(), "0", "directly");

    std::fs::write(out.path().join("release"), "").unwrap();
    let agent = story.wait_for_the_agent(deadline).await;
    assert_eq!(agent["end_reason"], "completed", "{agent}\n{}", story.log());
    let inbox = json(&story.home, &["inbox"]);
    assert!(
        inbox
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["subject"] == "Your composting guide"),
        "{inbox}"
    );

    // The model calls went through the gateway: every one reached the
    // model server with the provider key (so the key was really in play),
    // and every one is metered.
    let requests = model.requests();
    assert!(requests.len() >= 7, "{requests:?}");
    for r in &requests {
        assert_eq!(r.credential.as_deref(), Some(key), "{r:?}");
    }
    let cost = json(&story.home, &["cost"]);
    assert_eq!(cost["subtree"]["calls"], requests.len(), "{cost}");
    // The refused attempt is in the handler's audit log.
    let audit = json(
        &story.home,
        &["audit", &agent["handler"].as_str().unwrap()[..8]],
    );
    assert!(
        audit.as_array().unwrap().iter().any(|e| e["summary"]
            .as_str()
            .is_some_and(|s| s.starts_with(&format!("egress to 127.0.0.1:{port} refused")))),
        "{audit}"
    );

    // Transcript and captured output, as the CLI shows them.
    let id = agent["id"].as_str().unwrap();
    let transcript = agent_story::transcript(&story.home, id);
    assert!(transcript.contains("released"), "{transcript}");
    assert!(!transcript.contains(key));
    let (code, logs, err) = agency(&story.home, &["logs", id]);
    assert_eq!(code, 0, "{err}");
    assert!(!logs.contains(key) && !err.contains(key));
    // Stopped, the home kept (`stop` would delete it with the story).
    let mut story = story;
    story.halt();
    let daemon_output = story.log();
    assert!(
        !daemon_output.contains(key),
        "the daemon's output holds the key"
    );
    let daemon_log = std::fs::read_to_string(story.home.join("logs/daemon.log")).unwrap();
    if key_in == KeyIn::DaemonEnv {
        // The deprecated settings were rewritten, and the user told so.
        assert!(
            daemon_log.contains("agents.builtin.base_url and api_key_env is deprecated"),
            "{daemon_log}"
        );
    }
    assert!(story.home.join("agency.db").exists());
    let (seen, hits) = files_containing(&story.home, key.as_bytes());
    assert!(hits.is_empty(), "the provider key is in {hits:?}");
    assert!(seen > 0);
    drop(story);
    model.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue11_item7_the_builtin_runtime_never_holds_the_provider_key() {
    key_is_nowhere(
        "sk-ant-PROVIDER-builtin-NOWHERE-7d1f",
        "bash",
        &format!(
            "[agents]\nruntime = \"builtin\"\nagency_program = {BIN:?}\n[agents.builtin]\nupstream = \"up\"\nmodel = \"scripted\"\nmax_turns = 20\n"
        ),
        KeyIn::Secret,
    )
    .await;
}

/// The deprecated direct settings (`base_url` + `api_key_env`) no longer
/// hand the agent the key: they become the implicit upstream
/// `[models.default]`, reached through the gateway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue11_item1_the_deprecated_direct_settings_go_through_the_gateway() {
    key_is_nowhere(
        "sk-ant-PROVIDER-legacy-NOWHERE-51ac",
        "bash",
        &format!(
            "[agents]\nruntime = \"builtin\"\nagency_program = {BIN:?}\n[agents.builtin]\napi = \"anthropic\"\nbase_url = \"MODEL_URL\"\napi_key_env = \"PROVIDER_KEY\"\nmodel = \"scripted\"\nmax_turns = 20\n"
        ),
        KeyIn::DaemonEnv,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue11_item7_claude_code_never_holds_the_provider_key() {
    let claude = std::fs::canonicalize(claude_bin()).unwrap();
    key_is_nowhere(
        "sk-ant-PROVIDER-claude-NOWHERE-3b9e",
        "Bash",
        &format!(
            "[agents]\nruntime = \"claude-code\"\n[agents.claude_code]\nprogram = {:?}\nmodel = \"scripted\"\nmax_turns = 20\nupstream = \"up\"\n[agents.claude_code.env]\nCLAUDE_CODE_MAX_RETRIES = \"1\"\n",
            claude.to_str().unwrap()
        ),
        KeyIn::Secret,
    )
    .await;
}
