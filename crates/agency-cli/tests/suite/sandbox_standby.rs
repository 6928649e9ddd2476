//! Issue 15 item 3: the standby sandbox. After a confined spawn the daemon
//! starts the next agent's sandbox ahead of need (`agency sandbox-exec
//! --await-command`, see `supervisor/standby.rs`) and hands it the next
//! agent's command through its stdin. These tests run the real `agency
//! serve` with the `command` runtime (a shell script) and check both
//! sides of that power: the agent started through a standby is the same
//! agent a direct spawn would start, equally confined; and the agent that
//! runs while the standby waits cannot reach the standby, whose stdin
//! will carry the next agent's token.
//!
//! Results come back through a directory granted with
//! `[sandbox].read_write`, as in `sandbox_agents.rs`.

#![allow(clippy::unwrap_used)]

use crate::agent_story;
use crate::sandbox_run;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use agency_sandbox::ExecRequest;
use agency_testkit::sandbox::sandbox_toml;
use agent_story::{Story, agency};
use sandbox_run::{Sandbox, TOKEN, refused, show, text};

/// `agency sandbox-exec --await-command` under the fixture's policy, fed
/// `stdin`.
fn standby_run(sb: &Sandbox, stdin: &[u8]) -> Output {
    let file = sb.write_policy(&sb.policy(), &sb.root);
    let mut child = Command::new(env!("CARGO_BIN_EXE_agency"))
        .arg("sandbox-exec")
        .arg("--policy")
        .arg(&file)
        .arg("--await-command")
        .env_clear()
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn issue_15_a_standby_runs_the_command_it_is_sent_confined_and_as_sent() {
    let sb = Sandbox::new();
    let script = format!(
        "pwd; echo \"$1|$MARK|$HOME\"; cat; cat '{}'",
        sb.home.join("admin.token").display()
    );
    let request = ExecRequest {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into(), "sh".into(), "first arg".into()],
        env: vec![
            ("PATH".into(), "/usr/bin:/bin".into()),
            ("MARK".into(), "a=b".into()),
            ("HOME".into(), sb.ws.clone().into()),
        ],
        cwd: Some(sb.ws.clone()),
    };
    let o = standby_run(&sb, &request.encode().unwrap());
    let out = text(&o.stdout);
    // Its working directory, arguments and environment, and stdin empty
    // (`cat` printed nothing, the daemon's pipe is not the program's)...
    assert!(
        out.starts_with(&format!(
            "{}\nfirst arg|a=b|{}\n",
            sb.ws.display(),
            sb.ws.display()
        )),
        "{}",
        show(&o)
    );
    // ...and the sandbox applied before it: the home's token stays out.
    assert!(!out.contains(TOKEN), "{}", show(&o));
    assert!(
        text(&o.stderr).contains("Permission denied"),
        "{}",
        show(&o)
    );
}

#[test]
fn issue_15_a_standby_given_no_command_or_a_bad_one_runs_nothing() {
    let sb = Sandbox::new();
    // Closed without a command: the daemon let it go; nothing to say.
    let o = standby_run(&sb, b"");
    assert_eq!(o.status.code(), Some(0), "{}", show(&o));
    assert_eq!(text(&o.stderr), "");
    // Not a command: refused with the reason, as a sandbox failure.
    let marker = sb.ws.join("ran");
    for bad in [
        format!("sh\0-c\0touch {}", marker.display()).into_bytes(),
        b"agency-exec-1\0\0sh\x000".to_vec(),
    ] {
        let o = standby_run(&sb, &bad);
        refused(&o, "command:");
    }
    assert!(!marker.exists());
}

/// Two agents of the root handler in a row: the first exits (its mail is
/// left unread, so the handler still has work and gets the second after a
/// 200 ms backoff); the second, started through the standby prepared
/// after the first, stays. Each records what it runs as; the first also
/// tries to reach the standby waiting meanwhile. (`r` sets `n`: the
/// script's own variable is `w`.)
fn script(out: &Path) -> String {
    format!(
        r#"O={out:?}
export H=${{HOME%/run/*/run/home}}
r() {{ n=$1; shift; if "$@" > "$O/$n.out" 2>&1; then echo OK > "$O/$n"; else echo DENIED > "$O/$n"; fi; }}
if [ -e "$O/first/done" ]; then w=second; else w=first; fi
mkdir -p "$O/$w"
pwd > "$O/$w/cwd"
echo "$HOME" > "$O/$w/home"
echo "$AGENCY_AGENT" > "$O/$w/agent"
cat /proc/self/cgroup > "$O/$w/cgroup"
env | cut -d= -f1 | sort > "$O/$w/env"
r ${{w}}_token cat "$H/admin.token"
r ${{w}}_write_home sh -c 'echo x > "$0/evil"' "$H"
if [ $w = first ]; then
  # The standby is started just after this agent: wait for it.
  S=
  for i in $(seq 1 100); do
    for p in /proc/[0-9]*; do
      # An argument of exactly `--await-command` (this script holds the
      # words too, inside its own argument).
      if tr '\0' '\n' < $p/cmdline 2>/dev/null | grep -qx -- '--await-command'; then S=${{p#/proc/}}; fi
    done
    [ -n "$S" ] && break
    sleep 0.05
  done
  echo "$S" > "$O/standby_pid"
  r standby_fd readlink /proc/$S/fd/0
  r standby_stdin sh -c 'exec 3< /proc/$0/fd/0' $S
  r standby_write sh -c 'echo x > /proc/$0/fd/0' $S
  r standby_environ cat /proc/$S/environ
  r standby_signal kill -0 $S
  echo done > "$O/first/done"
  exit 0
fi
echo done > "$O/second/done"
exec sleep 300
"#,
        out = out.display().to_string()
    )
}

fn config(out: &Path) -> String {
    format!(
        "[agents]\nruntime = \"command\"\nkill_grace_ms = 300\nrespawn_backoff_ms = 200\nmax_backoff_ms = 200\n[agents.command]\nprogram = \"sh\"\nargs = [\"-c\", {:?}]\n{}",
        script(out),
        sandbox_toml(&[out])
    )
}

fn read(out: &Path, name: &str) -> String {
    std::fs::read_to_string(out.join(name))
        .unwrap_or_else(|_| "MISSING".into())
        .trim()
        .to_owned()
}

/// `agency serve` with `config`, and mail for the root handler: its first
/// agent starts.
async fn start_and_send(config: &str) -> Story {
    let story = Story::start(config, Duration::from_secs(60)).await;
    let (code, _, err) = agency(&story.home, &["send", "Please work"]);
    assert_eq!(code, 0, "{err}");
    story
}

fn verdict(out: &Path, name: &str) -> String {
    format!("{}: {}", read(out, name), read(out, &format!("{name}.out")))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_15_an_agent_started_through_the_standby_is_the_same_agent_equally_confined() {
    let out = tempfile::tempdir().unwrap();
    let o = out.path();
    let story = start_and_send(&config(o)).await;
    story
        .wait_file(&o.join("second/done"), Duration::from_secs(60))
        .await;

    // The first agent was spawned directly (no standby existed yet), the
    // second through the standby: its cgroup is the standby's.
    let (first_cg, second_cg) = (read(o, "first/cgroup"), read(o, "second/cgroup"));
    assert!(
        !first_cg.contains("standby-"),
        "the first agent had no standby to use: {first_cg}"
    );
    assert!(
        second_cg.contains("standby-"),
        "the second agent did not start through the standby: {second_cg}\nlog:\n{}",
        story.log()
    );
    // The same command: its whole environment (by name), its own agent,
    // its own spawn directory as workspace and HOME.
    assert_eq!(read(o, "first/env"), read(o, "second/env"));
    let (a1, a2) = (read(o, "first/agent"), read(o, "second/agent"));
    assert!(!a2.is_empty() && a1 != a2, "{a1} / {a2}");
    let cwd = read(o, "second/cwd");
    assert!(cwd.ends_with("/workspace"), "{cwd}");
    let spawn_dir = cwd.trim_end_matches("/workspace");
    assert!(
        spawn_dir
            .rsplit('/')
            .next()
            .unwrap()
            .starts_with("standby-"),
        "{spawn_dir}"
    );
    assert_eq!(read(o, "second/home"), format!("{spawn_dir}/run/home"));
    assert_ne!(read(o, "first/cwd"), cwd);
    // Equally confined: the home's secrets stay out of reach of both.
    for name in [
        "first_token",
        "second_token",
        "first_write_home",
        "second_write_home",
    ] {
        let v = verdict(o, name);
        assert!(v.starts_with("DENIED"), "{name} was not denied: {v}");
    }
    assert!(!story.home.join("evil").exists());
    story.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_15_an_agent_cannot_reach_the_standby_that_waits_for_the_next_agents_command() {
    let out = tempfile::tempdir().unwrap();
    let o = out.path();
    let story = start_and_send(&config(o)).await;
    story
        .wait_file(&o.join("first/done"), Duration::from_secs(60))
        .await;
    // The probe found the standby (its command line is public), so each
    // attempt below was made against the real process.
    let pid = read(o, "standby_pid");
    assert!(
        pid.parse::<u32>().is_ok(),
        "the agent did not see the standby: {pid:?}\nlog:\n{}",
        story.log()
    );
    // Its descriptors (stdin will carry the next agent's token: neither
    // read nor opened, for reading or writing), its environment, signals:
    // all outside this agent's sandbox. (The numbers of its descriptors
    // can be listed, as for any process of the same user.)
    for name in [
        "standby_fd",
        "standby_stdin",
        "standby_write",
        "standby_environ",
        "standby_signal",
    ] {
        let v = verdict(o, name);
        assert!(v.starts_with("DENIED"), "{name} was not denied: {v}");
    }
    // And the standby was not spoiled: the next agent starts through it.
    story
        .wait_file(&o.join("second/done"), Duration::from_secs(60))
        .await;
    assert!(read(o, "second/cgroup").contains("standby-"));
    story.stop();
}

/// Regression (found by `agency-bench` items 4 and 6): a standby taken at
/// once, while it may still be joining its cgroups and reading its policy
/// by path, must still set up and run its agent. The first agent exits at
/// once and the next starts without backoff, so the standby made after
/// the first spawn is taken milliseconds later. (Renaming the standby's
/// directory on taking it once broke exactly this: its agent failed with
/// "failed to apply the sandbox".)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn issue_15_a_standby_taken_at_once_still_starts_its_agent() {
    let out = tempfile::tempdir().unwrap();
    let o = out.path();
    let script = format!(
        r#"O={o:?}
n=$(ls "$O" | wc -l)
cat /proc/self/cgroup > "$O/run-$n"
[ "$n" -ge 3 ] && exec sleep 300
exit 0
"#,
        o = o.display().to_string()
    );
    let config = format!(
        "[agents]\nruntime = \"command\"\nkill_grace_ms = 300\nrespawn_backoff_ms = 1\nmax_backoff_ms = 1\nstall_after_exits = 100\n[agents.command]\nprogram = \"sh\"\nargs = [\"-c\", {script:?}]\n{}",
        sandbox_toml(&[o])
    );
    let story = start_and_send(&config).await;
    story
        .wait_file(&o.join("run-3"), Duration::from_secs(60))
        .await;
    let runs = agent_story::json(&story.home, &["agents"]);
    let failed: Vec<_> = runs["recent"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|a| {
            a["end_reason"]
                .as_str()
                .is_some_and(|r| r.contains("sandbox"))
        })
        .collect();
    assert!(
        failed.is_empty(),
        "agents failed in their sandbox: {failed:?}"
    );
    for n in 1..=3 {
        assert!(
            read(o, &format!("run-{n}")).contains("standby-"),
            "agent {n} did not start through a standby"
        );
    }
    story.stop();
}
