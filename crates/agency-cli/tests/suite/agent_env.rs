//! What an agent process is given, with the real daemon (`agency serve`):
//!
//! - Issue 9 item 5: an agent starts from an empty environment plus an
//!   allowlist. An `env`-sourced secret, an unrelated variable and
//!   `SSH_AUTH_SOCK` in the daemon's environment reach neither a `command`
//!   agent nor Claude Code (a stand-in program records what the runtime
//!   gives the CLI). Issue 11 item 1: nor does the provider key the
//!   deprecated `api_key_env` names: Claude Code gets the daemon's model
//!   gateway (the implicit upstream `[models.default]`) and its own token;
//!   a `command` agent with `upstream` gets the gateway in the OpenAI
//!   SDK's variables, its token as the key.
//! - Issue 9 item 6: the system prompt and the first message are not on
//!   Claude Code's command line (visible to every local user through `ps`):
//!   the prompt is a file, the message comes on stdin.
//! - Issue 14 item 2: after the daemon is killed with SIGKILL, the agent it
//!   had started is stopped when the next daemon starts on the home.

#![allow(clippy::unwrap_used)]

use crate::agent_story;

use std::path::Path;
use std::time::Duration;

use agent_story::{Story, agency, alive};

const SECRET: &str = "LEAK_SECRET_SOURCE";
const UNRELATED: &str = "LEAK_UNRELATED";

/// Start a daemon with `agents` (its `[agents]` section) and the marked
/// variables in its environment; the user writes to the root. Its agents
/// (confined) may write into `out`, where they leave what the test reads.
async fn story(agents: &str, secret: &str, unrelated: &str, out: &Path) -> Story {
    let cfg = format!(
        "{agents}\n[secrets]\nleak = {{ env = {SECRET:?} }}\n{}",
        agency_testkit::sandbox::sandbox_toml(&[out])
    );
    let story = Story::start_with_env(
        &cfg,
        Duration::from_secs(60),
        &[
            (SECRET, secret),
            (UNRELATED, unrelated),
            ("SSH_AUTH_SOCK", "/tmp/leak-ssh-agent.sock"),
            ("LEAK_API_KEY", "sk-test-for-claude"),
        ],
    )
    .await;
    let (code, _, err) = agency(&story.home, &["send", "Marker message for the agent"]);
    assert_eq!(code, 0, "{err}");
    story
}

fn assert_clean(env: &str, secret: &str, unrelated: &str) {
    assert!(
        !env.contains(secret),
        "the secret reached the agent:\n{env}"
    );
    assert!(!env.contains(unrelated), "{env}");
    for name in [SECRET, UNRELATED, "SSH_AUTH_SOCK", "LEAK_API_KEY"] {
        assert!(
            !env.lines().any(|l| l.starts_with(&format!("{name}="))),
            "{name} reached the agent:\n{env}"
        );
    }
    assert!(env.lines().any(|l| l.starts_with("PATH=")), "{env}");
    let home = env.lines().find_map(|l| l.strip_prefix("HOME=")).unwrap();
    assert!(home.contains("/run/"), "a HOME of its own: {home}");
    let tmp = env.lines().find_map(|l| l.strip_prefix("TMPDIR=")).unwrap();
    assert!(tmp.contains("/run/"), "a TMPDIR of its own: {tmp}");
}

fn marks() -> (String, String) {
    (
        format!("secret-{}", uuid::Uuid::new_v4().simple()),
        format!("unrelated-{}", uuid::Uuid::new_v4().simple()),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue9_item5_a_command_agent_gets_nothing_of_the_daemons_environment() {
    let out = tempfile::tempdir().unwrap();
    let env_file = out.path().join("env.txt");
    let (secret, unrelated) = marks();
    let script = format!(
        "env > {:?}.tmp; mv {0:?}.tmp {0:?}; exec sleep 300",
        env_file.display().to_string()
    );
    let story = story(
        &format!("[agents]\nruntime = \"command\"\n[agents.command]\nprogram = \"sh\"\nargs = [\"-c\", {script:?}]\nupstream = \"up\"\n[models.up]\napi = \"openai\"\nbase_url = \"https://api.openai.example/v1\"\n"),
        &secret,
        &unrelated,
        out.path(),
    )
    .await;
    let env = story.wait_file(&env_file, Duration::from_secs(30)).await;
    assert_clean(&env, &secret, &unrelated);
    for name in [
        "AGENCY_TOKEN",
        "AGENCY_MCP_URL",
        "AGENCY_PROMPT_FILE",
        "AGENCY_MESSAGE_FILE",
        "AGENCY_MCP_CONFIG",
        "AGENCY_AGENT",
        "AGENCY_HANDLER",
    ] {
        assert!(
            env.lines().any(|l| l.starts_with(&format!("{name}="))),
            "{name}:\n{env}"
        );
    }
    // The model through the gateway: its URL and the agent's own token.
    let var = |k: &str| {
        env.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("{k}:\n{env}"))
            .to_owned()
    };
    let url = var("OPENAI_BASE_URL");
    assert!(
        url.starts_with("http://127.0.0.1:") && url.ends_with("/model/up/v1"),
        "{url}"
    );
    assert_eq!(var("OPENAI_API_KEY"), var("AGENCY_TOKEN"));
    assert_eq!(var("AGENCY_MODEL_UPSTREAM"), "up");
    assert!(!env.contains("ANTHROPIC_"), "{env}");
    story.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue9_items5_and_6_claude_code_gets_a_clean_environment_and_no_prompt_in_argv() {
    let out = tempfile::tempdir().unwrap();
    let fake = out.path().join("claude");
    let o = out.path().display().to_string();
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$@\" > {o:?}/args.txt\ncat > {o:?}/stdin.txt\ntr '\\0' '\\n' < /proc/$$/cmdline > {o:?}/cmdline.txt\nenv > {o:?}/env.tmp\nmv {o:?}/env.tmp {o:?}/env.txt\nexec sleep 300\n"
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let (secret, unrelated) = marks();
    let story = story(
        &format!(
            "[agents]\nruntime = \"claude-code\"\n[agents.claude_code]\nprogram = {:?}\napi_key_env = \"LEAK_API_KEY\"\n[agents.claude_code.env]\nANTHROPIC_BASE_URL = \"http://127.0.0.1:9\"\n",
            fake.display().to_string()
        ),
        &secret,
        &unrelated,
        out.path(),
    )
    .await;
    let env = story
        .wait_file(&out.path().join("env.txt"), Duration::from_secs(30))
        .await;
    assert_clean(&env, &secret, &unrelated);
    // The deprecated direct settings are routed through the gateway: the
    // key stays in the daemon, the CLI gets the gateway and its token.
    assert!(!env.contains("sk-test-for-claude"), "{env}");
    assert!(!env.contains("ANTHROPIC_API_KEY="), "{env}");
    assert!(!env.contains("127.0.0.1:9\n"), "{env}");
    let base = env
        .lines()
        .find_map(|l| l.strip_prefix("ANTHROPIC_BASE_URL="))
        .unwrap();
    assert!(
        base.starts_with("http://127.0.0.1:") && base.ends_with("/model/default"),
        "{base}"
    );
    let token = env
        .lines()
        .find_map(|l| l.strip_prefix("ANTHROPIC_AUTH_TOKEN="))
        .unwrap();
    assert!(token.starts_with("agency"), "{token}");
    assert!(env.lines().any(|l| l == "DISABLE_TELEMETRY=1"), "{env}");
    assert!(!env.contains("AGENCY_TOKEN="), "{env}");
    // Neither the seed's prompt nor the first message is in argv (what
    // `ps` shows); the prompt is a file named there, the message is stdin.
    let args = std::fs::read_to_string(out.path().join("args.txt")).unwrap();
    let cmdline = std::fs::read_to_string(out.path().join("cmdline.txt")).unwrap();
    for argv in [&args, &cmdline] {
        assert!(!argv.contains("Help the user accomplish"), "{argv}");
        assert!(!argv.contains("Marker message"), "{argv}");
        assert!(!argv.contains("Begin:"), "{argv}");
    }
    let lines: Vec<&str> = args.lines().collect();
    let at = lines
        .iter()
        .position(|l| *l == "--append-system-prompt-file")
        .unwrap();
    let prompt = std::fs::read_to_string(lines[at + 1]).unwrap();
    assert!(prompt.contains("Help the user accomplish"), "{prompt}");
    let stdin = std::fs::read_to_string(out.path().join("stdin.txt")).unwrap();
    assert!(stdin.starts_with("Begin:"), "{stdin}");
    assert!(stdin.contains("Marker message"), "{stdin}");
    story.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue14_item2_a_restart_after_kill_9_stops_the_agent_left_running() {
    let out = tempfile::tempdir().unwrap();
    let pid_file = out.path().join("pid");
    // The agent records its pid (exec keeps it) and would sleep 300 s.
    let script = format!(
        "echo $$ > {:?}.tmp; mv {0:?}.tmp {0:?}; exec sleep 300",
        pid_file.display().to_string()
    );
    let (secret, unrelated) = marks();
    let mut story = story(
        &format!("[agents]\nruntime = \"command\"\nkill_grace_ms = 500\n[agents.command]\nprogram = \"sh\"\nargs = [\"-c\", {script:?}]\n"),
        &secret,
        &unrelated,
        out.path(),
    )
    .await;
    let pid: u32 = story
        .wait_file(&pid_file, Duration::from_secs(30))
        .await
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid));
    story.crash();
    // Nothing stops it while no daemon runs.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(alive(pid), "the agent should outlive a SIGKILLed daemon");
    let _ = std::fs::remove_file(&pid_file);
    story.restart().await;
    story
        .wait_gone(
            pid,
            "the agent left by the killed daemon",
            Duration::from_secs(20),
        )
        .await;
    let agents = agent_story::json(&story.home, &["agents"]);
    assert!(
        agents["recent"]
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a["end_reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("reaped"))),
        "{agents}"
    );
    story.stop();
}
