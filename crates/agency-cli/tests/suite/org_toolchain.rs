//! Issue 28: a command tool whose `python3` was a pyenv shim failed every
//! call with "Permission denied" (the sandbox grants the shim, not the
//! pyenv it runs), and nothing named `[sandbox] toolchains`. Now `agency
//! up` reports such a tool with the folder to add, a failed call says the
//! same, and with that folder in `toolchains` the call works.
//!
//! The version manager is a stand-in made by the test (so that the test
//! does not depend on how this machine's Python is installed): `fakeenv/
//! shims/fakejson`, a script that runs `fakeenv/libexec/fakejson-real`, as
//! pyenv's shims run `pyenv exec`.

#![allow(clippy::unwrap_used)]

use crate::agent_story;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use agency_testkit::sandbox::{fixtures_dir, sandbox_toml};
use agent_story::{Story, agency, json};

/// An idle `command` runtime with the sandbox on, `toolchains` added.
fn cfg(extra_toolchain: Option<&Path>) -> String {
    let sandbox = sandbox_toml(&[]);
    let sandbox = match extra_toolchain {
        Some(t) => sandbox.replacen(
            "toolchains = [",
            &format!("toolchains = [{:?}, ", t.display().to_string()),
            1,
        ),
        None => sandbox,
    };
    format!(
        "[agents]\nruntime = \"command\"\nrespawn_backoff_ms = 3600000\n[agents.command]\nprogram = \"sh\"\nargs = [\"-c\", \"exec sleep 300\"]\n{sandbox}"
    )
}

/// The stand-in version manager in `root`: a shim and the program it runs.
fn fakeenv(root: &Path) {
    let exe = |p: &Path, text: &str| {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    let real = root.join("libexec/fakejson-real");
    exe(&real, "#!/bin/sh\nexec cat\n");
    exe(
        &root.join("shims/fakejson"),
        &format!("#!/bin/sh\nexec {:?} \"$@\"\n", real.display().to_string()),
    );
}

/// The organisation: Echoes, whose agent holds `Echo`, run by the shim.
fn sources(src: &Path, shim: &Path) {
    std::fs::create_dir_all(src).unwrap();
    std::fs::write(
        src.join("Echoes.agency"),
        "# Agency Name: Echoes\nEchoes.\n\n## Executive Agent\nThe executive agent is Echoer.\n",
    )
    .unwrap();
    std::fs::write(
        src.join("Echoer.agent"),
        "# Agent Name: Echoer\n\n## Tools\n- Echo\n",
    )
    .unwrap();
    std::fs::write(
        src.join("Echo.tool"),
        format!(
            "# Tool Name: Echo\nEchoes its input.\n- Command: {}\n- Accepts JSON with fields: {{ \"word\": string }}\n- Returns JSON with fields: {{ \"word\": string }}\n",
            shim.display()
        ),
    )
    .unwrap();
}

/// Call `Echo` as an agent of `handler` (the fixtures' MCP client): exit
/// code and text.
fn call(story: &Story, handler: &str) -> (i32, String) {
    let token = agency(&story.home, &["token", "mint", "--handler", handler]).1;
    let addr = json(&story.home, &["status"])["addr"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = Command::new("python3")
        .arg(fixtures_dir().join("mcp_call.py"))
        .args(["Echo", "{\"word\": \"hello\"}"])
        .env("AGENCY_MCP_URL", format!("http://{addr}/mcp"))
        .env("AGENCY_TOKEN", token.trim())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue28_up_reports_a_tool_interpreter_outside_the_sandbox_with_the_toolchains_fix() {
    let tools = tempfile::tempdir().unwrap();
    let root = tools.path().canonicalize().unwrap().join("fakeenv");
    fakeenv(&root);
    let shim = root.join("shims/fakejson");
    let story = Story::start(&cfg(None), Duration::from_secs(60)).await;
    let src = story.tmp.path().canonicalize().unwrap().join("echoes");
    sources(&src, &shim);
    let path = src.to_str().unwrap();
    let toolchain = format!("add \"{}\" to [sandbox] toolchains", root.display());

    // `up` (and its plan) says what will fail and the fix.
    for args in [vec!["up", path, "--plan"], vec!["up", path]] {
        let (code, out, err) = agency(&story.home, &args);
        assert_eq!(code, 0, "{args:?}: {out}{err}");
        assert!(
            out.contains("warning: tool Echo will fail in the sandbox")
                && out.contains(&shim.display().to_string())
                && out.contains(&toolchain),
            "{args:?}: {out}"
        );
    }
    let handler = json(&story.home, &["orgs"])[0]["executive"]
        .as_str()
        .unwrap()
        .to_owned();

    // The call fails, and its error names the fix.
    let (code, text) = call(&story, &handler);
    assert_eq!(code, 1, "{text}\nlog:\n{}", story.log());
    assert!(
        text.contains("failed to run tool Echo") && text.contains(&toolchain),
        "{text}"
    );
    story.stop();

    // With the folder in `toolchains` (a fresh daemon: configuration is
    // read at start), nothing is reported and the call works.
    let story = Story::start(&cfg(Some(&root)), Duration::from_secs(60)).await;
    let src = story.tmp.path().canonicalize().unwrap().join("echoes");
    sources(&src, &shim);
    let (code, out, err) = agency(&story.home, &["up", src.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(!out.contains("warning:"), "{out}");
    let handler = json(&story.home, &["orgs"])[0]["executive"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, text) = call(&story, &handler);
    assert_eq!(code, 0, "{text}\nlog:\n{}", story.log());
    assert!(text.contains("hello"), "{text}");
    story.stop();
}
