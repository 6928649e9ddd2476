//! Issue 27, at the daemon's level: where the unconfined daemon meets
//! something a confined agent controls. A `command` agent (a shell script
//! playing a prompt-injected agent, with git, Python and `/proc`) attacks
//! the daemon-side work done for it: the policy its later processes run
//! under, the git configuration of `repo_push`'s upload-pack, the
//! destination of `repo_clone`, and the transcript the daemon reads after
//! it exits. Each test is the attack as it was made, and fails without
//! its fix.

#![allow(clippy::unwrap_used)]

use crate::agent_story;
use crate::git_repo;
use crate::probe;

use std::path::Path;
use std::time::{Duration, Instant};

use agency_testkit::sandbox::fixtures_dir;
use agent_story::{Story, agency, json};
use probe::{assert_denied, assert_ok, config, granting, preamble, result, send};

/// `python3 <fixtures>/mcp_call.py`: the agent's own MCP client.
fn mcp_call() -> String {
    format!(
        "python3 {:?}",
        fixtures_dir()
            .canonicalize()
            .unwrap()
            .join("mcp_call.py")
            .display()
            .to_string()
    )
}

/// A local origin with one commit on main, for `[repos] demo`, in `dir`
/// (not one the agent is granted: it must reach the origin only through
/// the daemon).
fn origin(dir: &Path) -> String {
    git_repo::bare_origin(dir, &[("README", "one\n")], "one")
        .display()
        .to_string()
}

fn root(story: &Story) -> String {
    json(&story.home, &["handlers"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn grant(story: &Story, resource: &str, level: &str) {
    let (code, _, err) = agency(&story.home, &["grant", &root(story), resource, level]);
    assert_eq!(code, 0, "{err}");
}

/// Issue 27: `repo_push` ran the upload-pack under `<run>/sandbox.json`
/// with `HOME=<run>/home`, both writable by the agent: it rewrote its own
/// policy and set `uploadpack.packObjectsHook` in its `.gitconfig`, and
/// the hook ran as root outside every sandbox. Now the policy lies where
/// the agent cannot write, and nothing of the agent's configures the
/// daemon's git: the push works and the hook never runs, not even
/// confined.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue27_repo_push_runs_nothing_the_agent_configured() {
    let out = tempfile::tempdir().unwrap();
    let repos = tempfile::tempdir().unwrap();
    let src = origin(repos.path());
    let o = out.path().display().to_string();
    let script = format!(
        r#"{pre}
S=$(dirname "$PWD")
r read_policy cat "$S/sandbox.json"
r rewrite_policy sh -c 'echo "{{\"read_write\":[\"/\"],\"read_only\":[],\"connect_ports\":[]}}" > "$0/sandbox.json"' "$S"
r move_policy mv "$S/sandbox.json" "$S/moved.json"
r move_run mv "$S/run" "$S/run2"
r write_run sh -c 'echo x > "$0/run/planted.json"' "$S"
printf '#!/bin/sh\ntouch {o}/hook_ran\necho pwned > "$H/pwned" 2>/dev/null\nexec "$@"\n' > "$PWD/hook.sh"
chmod +x "$PWD/hook.sh"
r gitconfig git config --global uploadpack.packObjectsHook "$PWD/hook.sh"
r clone {call} repo_clone '{{"name":"demo","dest":"repo"}}'
cd repo && git switch -q -c work && git -c user.name=a -c user.email=a@a commit -q --allow-empty -m mine && cd ..
r push {call} repo_push '{{"repo":"demo","path":"repo","branch":"work"}}'
echo done > "$O/done"
exec sleep 300
"#,
        pre = preamble(out.path()),
        call = mcp_call(),
    );
    let story = Story::start(
        &config(
            &script,
            "",
            &format!("[repos]\ndemo = {src:?}\n{}", granting(out.path(), "")),
        ),
        Duration::from_secs(60),
    )
    .await;
    grant(&story, "repo:demo", "write");
    send(&story);
    story
        .wait_file(&out.path().join("done"), Duration::from_secs(90))
        .await;
    // The policy cannot be read, changed or moved, nor can the
    // directories beside it.
    for name in ["read_policy", "rewrite_policy", "move_policy", "move_run"] {
        assert_denied(out.path(), name);
    }
    assert_ok(out.path(), "write_run");
    assert_ok(out.path(), "gitconfig");
    assert_ok(out.path(), "clone");
    // The push went through, and the agent's git configuration did not.
    assert_ok(out.path(), "push");
    let pushed = result(out.path(), "push");
    assert!(pushed.contains("refs/heads/agency/"), "{pushed}");
    assert!(
        !out.path().join("hook_ran").exists(),
        "the upload-pack ran the agent's packObjectsHook"
    );
    assert!(!story.home.join("pwned").exists());
    story.stop();
}

/// Issue 27: `repo_clone` checked its destination and then let the
/// daemon's unconfined `git clone` write there; swapping a parent
/// directory for a symlink in between made it write outside the sandbox
/// in 23-26 of 40 tries. The agent swaps `src` between a directory and a
/// symlink to a directory it cannot write while it clones 40 times into
/// `src/cN`: no clone lands outside.
///
/// The swapper stops at the end of a round (`src` a directory again), not
/// by `kill`: a killed shell leaves its last `mv src hold` to run late, and
/// on a loaded CI machine (stop 38) it moved `src` away after the cleanup,
/// so the control clone below found no parent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue27_repo_clone_does_not_follow_a_swapped_parent() {
    let out = tempfile::tempdir().unwrap();
    let target = tempfile::tempdir().unwrap();
    let repos = tempfile::tempdir().unwrap();
    let src = origin(repos.path());
    let script = format!(
        r#"{pre}
mkdir src
( while [ ! -e stop ]; do mv src hold; ln -s {target:?} src; rm src; mv hold src; done ) 2>/dev/null &
SWAP=$!
i=0
while [ $i -lt 40 ]; do
  {call} repo_clone "{{\"name\":\"demo\",\"dest\":\"src/c$i\"}}" >> "$O/clones.out" 2>&1
  i=$((i+1))
done
touch stop; wait $SWAP
{call} repo_clone '{{"name":"demo","dest":"src/settled"}}' > "$O/settled.out" 2>&1
echo done > "$O/done"
exec sleep 300
"#,
        pre = preamble(out.path()),
        call = mcp_call(),
        target = target.path().display().to_string(),
    );
    let story = Story::start(
        &config(
            &script,
            "",
            &format!(
                "[repos]\ndemo = {src:?}\n[repos_cache]\nrefresh_interval_secs = 3600\n{}",
                granting(out.path(), "")
            ),
        ),
        Duration::from_secs(60),
    )
    .await;
    grant(&story, "repo:demo", "read");
    send(&story);
    story
        .wait_file(&out.path().join("done"), Duration::from_secs(240))
        .await;
    let escaped: Vec<String> = std::fs::read_dir(target.path())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let clones = std::fs::read_to_string(out.path().join("clones.out")).unwrap();
    assert!(
        escaped.is_empty(),
        "clones written outside the workspace: {escaped:?}"
    );
    // The control: once the swapping stops, the same clone lands (how
    // many landed during the race depends on the machine's timing).
    let settled = std::fs::read_to_string(out.path().join("settled.out")).unwrap_or_default();
    assert!(
        settled.contains("\"repo\""),
        "the clone into a plain directory failed: {settled}; during the race: {clones}"
    );
    story.stop();
}

/// The run's transcript as the daemon kept it, in bytes.
fn kept_transcript(story: &Story, agent: &str) -> usize {
    let (code, out, err) = agency(&story.home, &["transcript", agent, "--json"]);
    assert_eq!(code, 0, "{err}");
    out.len()
}

/// One agent run that leaves `transcript.jsonl` as `make` says, then
/// exits; returns the story once the run has ended, and the agent's id.
async fn transcript_attack(make: &str) -> (Story, String) {
    let out = tempfile::tempdir().unwrap();
    let script = format!(
        "{pre}T=\"$HOME/../transcript.jsonl\"\n{make}\necho done > \"$O/done\"\nexit 0\n",
        pre = preamble(out.path()),
    );
    let story = Story::start(
        &config(&script, "", &granting(out.path(), "")),
        Duration::from_secs(60),
    )
    .await;
    send(&story);
    let deadline = Instant::now() + Duration::from_secs(90);
    let agent = loop {
        let runs = json(&story.home, &["runs"]);
        if let Some(r) = runs.as_array().and_then(|a| a.first())
            && !r["ended_at"].is_null()
        {
            break r["agent"].as_str().unwrap().to_owned();
        }
        assert!(
            Instant::now() < deadline,
            "the run was never collected: {runs}; log:\n{}",
            story.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // Kept alive until here: the script wrote into it.
    drop(out);
    (story, agent)
}

/// Issue 27: a transcript symlinked to `/dev/zero` was read whole until
/// the daemon was OOM-killed. It is refused unread; the daemon goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue27_a_transcript_symlinked_to_dev_zero_is_not_read() {
    let (story, _agent) = transcript_attack("ln -s /dev/zero \"$T\"").await;
    let (code, _, err) = agency(&story.home, &["status"]);
    assert_eq!(code, 0, "the daemon did not survive: {err}");
    let log = std::fs::read_to_string(story.home.join("logs/daemon.log")).unwrap_or_default();
    assert!(
        log.contains("failed to read an agent's transcript") && log.contains("symbolic link"),
        "the refusal is logged: {log}"
    );
    story.stop();
}

/// Issue 27: a FIFO in the transcript's place hung the run's collection:
/// its slot was never freed and a graceful shutdown hung. The run is
/// collected and the daemon shuts down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue27_a_transcript_fifo_does_not_hang_the_run_or_shutdown() {
    let (story, _agent) = transcript_attack("mkfifo \"$T\"").await;
    let json_agents = json(&story.home, &["agents"]);
    assert_eq!(
        json_agents["live"].as_array().map(Vec::len),
        Some(0),
        "the slot was freed: {json_agents}"
    );
    let began = Instant::now();
    let (code, _, err) = agency(&story.home, &["shutdown"]);
    assert_eq!(code, 0, "{err}");
    assert!(began.elapsed() < Duration::from_secs(60));
    story.stop();
}

/// Issue 27: 300 MiB of transcript was read whole and kept as a blob for
/// good. A 40 MiB one keeps its head and tail, bounded like run logs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue27_a_huge_transcript_is_kept_bounded() {
    let (story, agent) = transcript_attack(
        "yes '{\"type\":\"pad\",\"x\":\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}' | head -c 41943040 > \"$T\"",
    )
    .await;
    let kept = kept_transcript(&story, &agent);
    assert!(
        kept > 1 << 20,
        "the transcript's head and tail were kept: {kept}"
    );
    assert!(
        kept < 20 << 20,
        "40 MiB kept whole or near it: {kept} bytes"
    );
    story.stop();
}

/// The agent's MCP client for an extra server: runs the entry of the
/// agent's MCP configuration as Claude Code would (its command, its env
/// added), lists and calls `reveal`, writes the result to `reveal.json`,
/// and keeps the session open until `stop` appears.
const CLIENT_PY: &str = r#"import json, os, subprocess, sys, time
out = sys.argv[1]
entry = json.load(open(os.environ["AGENCY_MCP_CONFIG"]))["mcpServers"]["echo"]
env = dict(os.environ)
env.update(entry.get("env", {}))
p = subprocess.Popen([entry["command"]] + entry["args"], env=env,
                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
def ask(i, method, params):
    p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": method, "params": params}) + "\n").encode())
    p.stdin.flush()
    while True:
        m = json.loads(p.stdout.readline())
        if m.get("id") == i:
            return m
ask(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}})
p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'); p.stdin.flush()
ask(2, "tools/list", {})
r = ask(3, "tools/call", {"name": "reveal", "arguments": {}})
open(out + "/reveal.json", "w").write(r["result"]["content"][0]["text"])
while not os.path.exists(out + "/stop"):
    time.sleep(0.1)
p.stdin.close()
p.wait(timeout=30)
"#;

/// The attacks on a running server from the agent's side: `environ` reads
/// every `echo_mcp.py` process's environment, `stdin` writes a
/// `tools/call` into its standard input. Exit 0 when it got through.
/// `self` is the control: the agent's own environment is readable.
const PROCS_PY: &str = r#"import os, sys
mode, secret = sys.argv[1], sys.argv[2]
if mode == "self":
    sys.exit(0 if b"AGENCY_TOKEN=" in open("/proc/self/environ", "rb").read() else 1)
found, got = [], False
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        cmd = open("/proc/%s/cmdline" % pid, "rb").read()
    except OSError:
        continue
    if b"echo_mcp.py" not in cmd or int(pid) == os.getpid():
        continue
    found.append(pid)
    try:
        if mode == "environ":
            got |= secret.encode() in open("/proc/%s/environ" % pid, "rb").read()
        else:
            with open("/proc/%s/fd/0" % pid, "w") as f:
                f.write('{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"reveal","arguments":{}}}\n')
            got = True
    except OSError as e:
        print("pid %s: %s" % (pid, e))
print("found", found)
sys.exit(0 if got else 1)
"#;

/// Issue 27 item 2: an extra stdio MCP server ran inside its agent's
/// sandbox, as the agent's user, as a child of the agent's launcher. The
/// agent read the server's secret from `/proc/<server>/environ` (from
/// Python), wrote `tools/call` into `/proc/<server>/fd/0` past the guard,
/// the server read the agent's token from its launcher's environment, and
/// a `command` agent presented its own launch nonce to `POST /launch/NAME`
/// and got the secrets. Now the daemon runs the server in a confinement
/// of its own: the server works (it reports its secret reversed), and
/// every one of those reaches nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue27_an_extra_mcp_server_and_its_agent_cannot_reach_each_other() {
    let out = tempfile::tempdir().unwrap();
    let keep = tempfile::tempdir().unwrap();
    let secret = format!("s3cret-{}", uuid::Uuid::new_v4().simple());
    std::fs::write(keep.path().join("secret"), &secret).unwrap();
    std::fs::write(out.path().join("client.py"), CLIENT_PY).unwrap();
    std::fs::write(out.path().join("procs.py"), PROCS_PY).unwrap();
    let launch_self = r#"import json, os, urllib.request
entry = json.load(open(os.environ["AGENCY_MCP_CONFIG"]))["mcpServers"]["echo2"]
url = os.environ["AGENCY_MCP_URL"].rsplit("/mcp", 1)[0] + "/launch/echo2"
req = urllib.request.Request(url, data=b"", method="POST", headers={
    "Authorization": "Bearer " + os.environ["AGENCY_TOKEN"],
    "x-agency-launch-nonce": entry["env"]["AGENCY_LAUNCH_NONCE"]})
print(urllib.request.urlopen(req, timeout=30).read().decode())
"#;
    std::fs::write(out.path().join("launch_self.py"), launch_self).unwrap();
    let fixture = fixtures_dir()
        .canonicalize()
        .unwrap()
        .join("echo_mcp.py")
        .display()
        .to_string();
    let script = format!(
        r#"{pre}
r launch_self python3 "$O/launch_self.py"
python3 "$O/client.py" "$O" > "$O/client.out" 2>&1 &
i=0; while [ ! -s "$O/reveal.json" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
r control python3 "$O/procs.py" self x
r environ python3 "$O/procs.py" environ {secret:?}
r stdin python3 "$O/procs.py" stdin x
touch "$O/stop"
echo done > "$O/done"
exec sleep 300
"#,
        pre = preamble(out.path()),
    );
    let servers = format!(
        "[secrets]\ns = {{ file = {:?} }}\n[mcp_servers.echo]\ncommand = \"python3\"\nargs = [{fixture:?}]\nenv = {{ ECHO_SECRET = \"${{secret:s}}\" }}\n[mcp_servers.echo2]\ncommand = \"python3\"\nargs = [{fixture:?}]\nenv = {{ ECHO_SECRET = \"${{secret:s}}\" }}\n",
        keep.path().join("secret").display().to_string()
    );
    let story = Story::start(
        &config(
            &script,
            &format!("agency_program = {:?}\n", agent_story::BIN),
            &format!("{servers}{}", granting(out.path(), "")),
        ),
        Duration::from_secs(60),
    )
    .await;
    grant(&story, "mcp_server:echo", "read");
    grant(&story, "mcp_server:echo2", "read");
    send(&story);
    story
        .wait_file(&out.path().join("done"), Duration::from_secs(120))
        .await;
    let client = std::fs::read_to_string(out.path().join("client.out")).unwrap_or_default();
    let reveal: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(out.path().join("reveal.json")).unwrap_or_default(),
    )
    .unwrap_or_else(|e| panic!("no reveal: {e}; client: {client}; log:\n{}", story.log()));
    // The server works, with its secret, and sees no token of the agent's,
    // neither in its environment nor in its parent's.
    let reversed: String = secret.chars().rev().collect();
    assert_eq!(reveal["reversed_secret"], reversed.as_str(), "{reveal}");
    assert_eq!(reveal["agency_token_visible"], false, "{reveal}");
    assert_eq!(reveal["parent_token_visible"], false, "{reveal}");
    // The agent's own nonce buys the daemon's proxy, not the secret.
    assert_ok(out.path(), "launch_self");
    let launched = result(out.path(), "launch_self");
    assert!(launched.contains("/mcp-proxy/echo2"), "{launched}");
    assert!(!launched.contains(&secret), "{launched}");
    // /proc: the agent reads its own environment, not the server's, and
    // cannot write into the server's standard input.
    assert_ok(out.path(), "control");
    assert_denied(out.path(), "environ");
    assert_denied(out.path(), "stdin");
    for f in ["environ.out", "stdin.out", "client.out", "launch_self.out"] {
        let text = std::fs::read_to_string(out.path().join(f)).unwrap_or_default();
        assert!(!text.contains(&secret), "{f} holds the secret: {text}");
    }
    story.stop();
}
