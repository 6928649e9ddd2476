//! The `bash` tool: one shell command in the workspace, in a process group
//! of its own, with a timeout that kills the whole group.
//!
//! - stdin is `/dev/null`; stdout and stderr share one pipe, so the output
//!   is interleaved as a terminal would show it; it is capped (head and
//!   tail kept, the cut said) while it is read, so memory stays bounded.
//! - When the shell exits (or times out), every process still in its group
//!   is killed before the shell is reaped: nothing the command left in the
//!   background outlives the call, and since the group's leader is still a
//!   zombie when the group is signalled, its id cannot have been reused.
//! - The waiting and reading happen on threads of their own, not the async
//!   runtime's blocking pool: a process that escaped the group can hold
//!   the pipe open forever, and the runtime must still be able to stop.
//! - If the call is abandoned (the run is stopped), the group is killed.
//! - The variables holding the run's secrets are removed from the
//!   command's environment.

use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use agency_sandbox::process_group::kill_group;
use nix::sys::signal::Signal;
use nix::sys::wait::{Id, WaitPidFlag, waitid};
use nix::unistd::Pid;
use serde_json::Value;

use super::common::{Args, Ctx, ToolError};

/// The timeout when the call gives none.
pub(crate) const DEFAULT_TIMEOUT_MS: u64 = 120_000;

/// The longest timeout a call may ask for.
pub(crate) const MAX_TIMEOUT_MS: u64 = 600_000;

/// Output bytes kept: this many from the start and as many from the end.
const KEEP_HEAD: usize = 15_000;
const KEEP_TAIL: usize = 15_000;

/// How long output is still read after the command's group is gone: only
/// a process that left the group (`setsid`) can hold the pipe longer.
const OUTPUT_GRACE: Duration = Duration::from_secs(2);

/// The tool's result: the text, and whether the command failed.
pub(crate) async fn bash(ctx: &Ctx, input: &Value) -> Result<(String, bool), ToolError> {
    let a = Args::new(input, &["command", "timeout_ms"])?;
    let command = a.str("command")?;
    if command.trim().is_empty() {
        return Err(ToolError::invalid("`command` is empty"));
    }
    let timeout_ms = a.opt_u64("timeout_ms")?.unwrap_or(DEFAULT_TIMEOUT_MS);
    if timeout_ms == 0 || timeout_ms > MAX_TIMEOUT_MS {
        return Err(ToolError::invalid(format!(
            "`timeout_ms` must be between 1 and {MAX_TIMEOUT_MS} (10 minutes)"
        )));
    }
    let shell = if std::path::Path::new("/bin/bash").exists() {
        "/bin/bash"
    } else {
        "/bin/sh"
    };
    let (mut reader, writer) =
        std::io::pipe().map_err(|e| ToolError::io("create a pipe for", "the command", &e))?;
    let writer2 = writer
        .try_clone()
        .map_err(|e| ToolError::io("create a pipe for", "the command", &e))?;
    let mut cmd = Command::new(shell);
    cmd.arg("-c")
        .arg(command)
        .current_dir(&ctx.root)
        .stdin(Stdio::null())
        .stdout(writer)
        .stderr(writer2)
        .process_group(0);
    for var in &ctx.hidden_env {
        cmd.env_remove(var);
    }
    let child = cmd.spawn().map_err(|e| ToolError::io("start", shell, &e))?;
    // The command holds the only write ends now; dropping ours lets the
    // reader see the end of the output.
    drop(cmd);
    let pgid = child.id();
    let pid = Pid::from_raw(pgid as i32);
    let group = Arc::new(Group {
        pgid,
        reaped: Mutex::new(false),
    });
    let _kill_on_drop = KillOnDrop(group.clone());

    let output = Arc::new(Mutex::new(Capped::default()));
    let (read_done, read_rx) = tokio::sync::oneshot::channel::<()>();
    {
        let output = output.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 8192];
            loop {
                match reader.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => lock(&output).push(&chunk[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = read_done.send(());
        });
    }
    let (exited, mut exit_rx) = tokio::sync::oneshot::channel::<std::io::Result<ExitStatus>>();
    {
        let group = group.clone();
        std::thread::spawn(move || {
            let mut child = child;
            // Wait for the shell to exit without reaping it, so the group
            // can be killed while its id is still certainly ours.
            while let Err(nix::errno::Errno::EINTR) =
                waitid(Id::Pid(pid), WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT)
            {}
            let status = {
                let mut reaped = lock(&group.reaped);
                kill_group(group.pgid);
                let status = child.wait();
                *reaped = true;
                status
            };
            let _ = exited.send(status);
        });
    }

    let timeout = Duration::from_millis(timeout_ms);
    let (status, timed_out) = match tokio::time::timeout(timeout, &mut exit_rx).await {
        Ok(s) => (s, false),
        Err(_) => {
            group.kill();
            (exit_rx.await, true)
        }
    };
    let status = status
        .map_err(|_| {
            ToolError::io(
                "wait for",
                "the command",
                &std::io::Error::other("the waiting thread ended"),
            )
        })?
        .map_err(|e| ToolError::io("wait for", "the command", &e))?;
    let complete = tokio::time::timeout(OUTPUT_GRACE, read_rx).await.is_ok();
    let mut text = lock(&output).render();
    if !complete {
        text.push_str(
            "\n[a process outside the command's process group still holds its output open; reading stopped]",
        );
    }
    let (end, failed) = if timed_out {
        (
            format!(
                "[timed out after {timeout_ms} ms: the command and every process in its group were killed]"
            ),
            true,
        )
    } else {
        describe(status)
    };
    if text.is_empty() {
        text.push_str("(no output)");
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&end);
    Ok((text, failed))
}

/// How the shell ended, and whether that is a failure.
fn describe(status: ExitStatus) -> (String, bool) {
    match (status.code(), status.signal()) {
        (Some(code), _) => (format!("[exit code {code}]"), code != 0),
        (None, Some(sig)) => {
            let name = Signal::try_from(sig).map_or("unknown", Signal::as_str);
            (format!("[killed by signal {sig} ({name})]"), true)
        }
        (None, None) => ("[ended without an exit code]".to_owned(), true),
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The command's process group; killed only while its leader is unreaped.
#[derive(Debug)]
struct Group {
    pgid: u32,
    reaped: Mutex<bool>,
}

impl Group {
    fn kill(&self) {
        let reaped = lock(&self.reaped);
        if !*reaped {
            kill_group(self.pgid);
        }
    }
}

/// Kills the group when the call is abandoned before it finished.
struct KillOnDrop(Arc<Group>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        self.0.kill();
    }
}

/// Output kept within bounds while it arrives: the first [`KEEP_HEAD`]
/// bytes and the last [`KEEP_TAIL`].
#[derive(Debug, Default)]
struct Capped {
    head: Vec<u8>,
    tail: std::collections::VecDeque<u8>,
    total: usize,
}

impl Capped {
    fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len();
        let room = KEEP_HEAD - self.head.len();
        if room > 0 {
            let n = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        self.tail.extend(bytes);
        let over = self.tail.len().saturating_sub(KEEP_TAIL);
        self.tail.drain(..over);
    }

    fn render(&self) -> String {
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        let cut = self.total - self.head.len() - tail.len();
        if cut == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        format!(
            "{}\n[… {cut} bytes of output cut here; {} in all. Redirect to a file and read parts of it to see more …]\n{}",
            String::from_utf8_lossy(&self.head),
            self.total,
            String::from_utf8_lossy(&tail)
        )
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn capped_keeps_head_and_tail() {
        let mut c = Capped::default();
        c.push(b"hello ");
        c.push(b"world");
        assert_eq!(c.render(), "hello world");
        let mut c = Capped::default();
        for _ in 0..10 {
            c.push(&[b'a'; 10_000]);
        }
        c.push(b"THE END");
        let r = c.render();
        assert!(r.starts_with(&"a".repeat(KEEP_HEAD)), "head kept");
        assert!(r.ends_with("THE END"), "tail kept");
        assert!(
            r.contains("[… 70007 bytes of output cut here; 100007 in all."),
            "{}",
            &r[KEEP_HEAD..KEEP_HEAD + 120]
        );
    }

    #[tokio::test]
    async fn runs_in_the_workspace_with_interleaved_output() {
        let (dir, ctx) = Ctx::temp();
        std::fs::write(dir.path().join("f"), "content").unwrap();
        let (out, failed) = bash(
            &ctx,
            &json!({"command": "cat f; echo err >&2; echo out; pwd"}),
        )
        .await
        .unwrap();
        let pwd = dir.path().canonicalize().unwrap();
        assert_eq!(
            out,
            format!("contenterr\nout\n{}\n[exit code 0]", pwd.display())
        );
        assert!(!failed);
        // stdin is empty, not the test's.
        let (out, _) = bash(&ctx, &json!({"command": "cat; echo done"}))
            .await
            .unwrap();
        assert_eq!(out, "done\n[exit code 0]");
    }

    #[tokio::test]
    async fn nonzero_exit_and_signals_are_failures() {
        let (_d, ctx) = Ctx::temp();
        let (out, failed) = bash(&ctx, &json!({"command": "exit 3"})).await.unwrap();
        assert_eq!(out, "(no output)\n[exit code 3]");
        assert!(failed);
        let (out, failed) = bash(&ctx, &json!({"command": "kill -TERM $$"}))
            .await
            .unwrap();
        assert_eq!(out, "(no output)\n[killed by signal 15 (SIGTERM)]");
        assert!(failed);
    }

    #[tokio::test]
    async fn long_output_is_capped() {
        let (_d, ctx) = Ctx::temp();
        let (out, _) = bash(&ctx, &json!({"command": "seq 1 100000; echo LAST"}))
            .await
            .unwrap();
        assert!(out.len() < KEEP_HEAD + KEEP_TAIL + 500, "{}", out.len());
        assert!(out.starts_with("1\n2\n3\n"));
        assert!(
            out.ends_with("100000\nLAST\n[exit code 0]"),
            "{}",
            &out[out.len() - 50..]
        );
        assert!(out.contains("bytes of output cut here"));
    }

    /// Whether a process is gone (or a zombie nobody reaped yet).
    fn dead(pid: i32) -> bool {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => true,
            Ok(stat) => {
                let state = stat.rsplit(')').next().unwrap_or("").trim_start();
                state.starts_with('Z') || state.starts_with('X')
            }
        }
    }

    /// Wait for a process to die: the kill is asynchronous, and the test
    /// must only fail if it never happens.
    async fn wait_dead(pid: i32) -> bool {
        for _ in 0..600 {
            if dead(pid) {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    /// The background `sleep` whose pid the command wrote to `bg.pid` in
    /// `dir` must end; `fate` says what it did otherwise.
    async fn background_dies(dir: &std::path::Path, fate: &str) {
        let bg: i32 = std::fs::read_to_string(dir.join("bg.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(wait_dead(bg).await, "the background sleep {bg} {fate}");
    }

    #[tokio::test]
    async fn a_timeout_kills_the_whole_group() {
        let (dir, ctx) = Ctx::temp();
        let (out, failed) = bash(
            &ctx,
            &json!({"command": "sleep 100 & echo $! > bg.pid; echo started; sleep 100", "timeout_ms": 300}),
        )
        .await
        .unwrap();
        assert!(failed);
        assert_eq!(
            out,
            "started\n[timed out after 300 ms: the command and every process in its group were killed]"
        );
        background_dies(dir.path(), "survived the timeout").await;
    }

    #[tokio::test]
    async fn background_processes_end_with_the_command() {
        let (dir, ctx) = Ctx::temp();
        let (out, failed) = bash(
            &ctx,
            &json!({"command": "sleep 100 & echo $! > bg.pid; echo quick"}),
        )
        .await
        .unwrap();
        assert!(!failed);
        assert_eq!(out, "quick\n[exit code 0]");
        background_dies(dir.path(), "outlived the command").await;
    }

    #[tokio::test]
    async fn an_abandoned_call_kills_its_group() {
        let (dir, ctx) = Ctx::temp();
        let input = json!({"command": "sleep 100 & echo $! > sh.pid; sleep 100"});
        let call = bash(&ctx, &input);
        // Stop the call once the shell has written its pid, as a stopped
        // run drops the call in flight.
        let pidfile = dir.path().join("sh.pid");
        let watch = async {
            loop {
                if let Ok(s) = std::fs::read_to_string(&pidfile)
                    && s.ends_with('\n')
                {
                    return s.trim().parse::<i32>().unwrap();
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        let pid = tokio::select! {
            _ = call => panic!("the call ended by itself"),
            pid = watch => pid,
        };
        assert!(
            wait_dead(pid).await,
            "the background sleep {pid} survived the abandoned call"
        );
    }

    #[tokio::test]
    async fn secrets_are_not_in_the_environment() {
        let (_d, mut ctx) = Ctx::temp();
        // HOME stands in for a secret variable: it is surely set here.
        assert!(
            std::env::var_os("HOME").is_some(),
            "the test needs HOME set"
        );
        let (out, _) = bash(&ctx, &json!({"command": "env"})).await.unwrap();
        assert!(
            out.contains("\nHOME=") || out.starts_with("HOME="),
            "control: {out}"
        );
        ctx.hidden_env = vec!["HOME".into()];
        let (out, _) = bash(&ctx, &json!({"command": "env"})).await.unwrap();
        assert!(
            !out.contains("\nHOME=") && !out.starts_with("HOME="),
            "{out}"
        );
    }

    #[tokio::test]
    async fn arguments_are_checked() {
        let (_d, ctx) = Ctx::temp();
        for (input, needle) in [
            (json!({"command": " "}), "empty"),
            (json!({"command": "true", "timeout_ms": 0}), "between 1 and"),
            (
                json!({"command": "true", "timeout_ms": MAX_TIMEOUT_MS + 1}),
                "between 1 and",
            ),
            (json!({"cmd": "true"}), "unknown argument"),
        ] {
            let e = bash(&ctx, &input).await.unwrap_err();
            assert!(e.message.contains(needle), "{input}: {e}");
        }
    }
}
