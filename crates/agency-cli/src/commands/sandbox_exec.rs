//! `agency sandbox-exec --policy FILE -- PROGRAM [ARGS…]` (plumbing, hidden
//! from help): how the daemon starts every agent and MCP server process
//! confined. It reads the JSON policy, applies it to itself
//! (`agency_sandbox::apply`: cgroups, rlimits, no_new_privs, no
//! capabilities, seccomp, Landlock), then execs PROGRAM with the same
//! environment and working directory; the program and all it starts
//! inherit the sandbox and cannot undo it.
//!
//! Fail closed: if any step fails, it prints `failed to apply the sandbox:
//! <step>: <why>` and exits 125 without running PROGRAM. If the program
//! itself cannot be executed (inside the sandbox), it exits 127 when it
//! was not found and 126 otherwise, as shells do.
//!
//! With `--await-command` instead of a program, it applies the policy and
//! then reads the program to run from stdin (`agency_sandbox::
//! ExecRequest`): the daemon's standby sandbox, set up before the agent
//! it will hold is known. Closed without a command, it exits 0.
//!
//! `agency sandbox-forward --parent PID` (plumbing too) is the forwarder
//! `sandbox-exec` starts for a policy with `isolate_network`
//! (`agency_sandbox::forward`).

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::ExitCode;

use agency_sandbox::{Policy, SandboxError};
use anyhow::Result;

/// The exit status when the sandbox could not be applied.
pub const SANDBOX_FAILED: u8 = 125;

pub fn sandbox_exec(policy: &Path, command: &[OsString], await_command: bool) -> Result<ExitCode> {
    if !await_command && command.is_empty() {
        anyhow::bail!("failed to run a program: none was given after `--`");
    }
    let applied = Policy::load(policy)
        .map_err(|e| match e {
            SandboxError::ReadPolicy { path, why } => {
                format!("policy {}: {why}", path.display())
            }
            other => format!("policy: {other}"),
        })
        .and_then(|p| agency_sandbox::apply(&p).map_err(|e| e.to_string()));
    if let Err(why) = applied {
        return Ok(failed(&why));
    }
    let (mut cmd, program) = if await_command {
        // Confined already: whatever the command is, it runs in here.
        match read_command() {
            Ok(Some(r)) => {
                let null = match std::fs::File::open("/dev/null") {
                    Ok(f) => f,
                    Err(e) => return Ok(failed(&format!("failed to open /dev/null: {e}"))),
                };
                let mut cmd = std::process::Command::new(&r.program);
                cmd.args(&r.args).env_clear().envs(r.env).stdin(null);
                if let Some(d) = &r.cwd {
                    cmd.current_dir(d);
                }
                (cmd, r.program.into_os_string())
            }
            // The daemon let this standby go unused (it is stopping, or
            // its configuration changed): nothing to run.
            Ok(None) => return Ok(ExitCode::SUCCESS),
            Err(why) => return Ok(failed(&format!("command: {why}"))),
        }
    } else {
        let (program, args) = command.split_first().expect("checked above");
        let mut cmd = std::process::Command::new(program);
        cmd.args(args);
        (cmd, program.clone())
    };
    // exec returns only on failure.
    let e = cmd.exec();
    eprintln!(
        "{}",
        crate::safe_text::block(&format!(
            "failed to run {} in the sandbox: {e}",
            program.to_string_lossy()
        ))
    );
    Ok(ExitCode::from(
        if e.kind() == std::io::ErrorKind::NotFound {
            127
        } else {
            126
        },
    ))
}

/// Say why the sandbox could not be applied; the exit status that tells
/// the daemon so.
fn failed(why: &str) -> ExitCode {
    eprintln!(
        "{}",
        crate::safe_text::block(&format!("failed to apply the sandbox: {why}"))
    );
    ExitCode::from(SANDBOX_FAILED)
}

/// The standby's command, from stdin to its end (`None`: closed without
/// one). The program's stdin is then `/dev/null`, as for an agent
/// started directly.
fn read_command() -> Result<Option<agency_sandbox::ExecRequest>, String> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(agency_sandbox::MAX_EXEC_REQUEST as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("failed to read it from stdin: {e}"))?;
    if bytes.is_empty() {
        return Ok(None);
    }
    agency_sandbox::ExecRequest::decode(&bytes)
        .map(Some)
        .map_err(|e| e.to_string())
}

/// The forwarder of an isolated agent. Its setup errors reach the agent's
/// `sandbox-exec`, which reports them; only one that could not be passed on
/// (stdin is not the agent's socket: run by hand) is returned here.
pub fn sandbox_forward(parent: u32) -> Result<ExitCode> {
    agency_sandbox::forward(parent)
        .map_err(|e| anyhow::anyhow!("failed to run the sandbox's forwarder: {e}"))?;
    Ok(ExitCode::SUCCESS)
}
