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

pub fn sandbox_exec(policy: &Path, command: &[OsString]) -> Result<ExitCode> {
    let Some((program, args)) = command.split_first() else {
        anyhow::bail!("failed to run a program: none was given after `--`");
    };
    let applied = Policy::load(policy)
        .map_err(|e| match e {
            SandboxError::ReadPolicy { path, why } => {
                format!("policy {}: {why}", path.display())
            }
            other => format!("policy: {other}"),
        })
        .and_then(|p| agency_sandbox::apply(&p).map_err(|e| e.to_string()));
    if let Err(why) = applied {
        eprintln!(
            "{}",
            crate::safe_text::block(&format!("failed to apply the sandbox: {why}"))
        );
        return Ok(ExitCode::from(SANDBOX_FAILED));
    }
    // exec returns only on failure.
    let e = std::process::Command::new(program).args(args).exec();
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

/// The forwarder of an isolated agent. Its setup errors reach the agent's
/// `sandbox-exec`, which reports them; only one that could not be passed on
/// (stdin is not the agent's socket: run by hand) is returned here.
pub fn sandbox_forward(parent: u32) -> Result<ExitCode> {
    agency_sandbox::forward(parent)
        .map_err(|e| anyhow::anyhow!("failed to run the sandbox's forwarder: {e}"))?;
    Ok(ExitCode::SUCCESS)
}
