//! What the agent-script tests share (`sandbox_agents.rs`,
//! `daemon_walls.rs`): an agent is a shell script (the `command` runtime)
//! playing a prompt-injected agent, and each attempt it makes is recorded
//! in a directory the test grants with `[sandbox].read_write` (outside the
//! home): one file per attempt, `OK` or `DENIED`, its output beside it.

#![allow(dead_code)]

use std::path::Path;

use agency_testkit::sandbox::sandbox_toml;

use crate::agent_story::{Story, agency};

/// The start of every agent script: `H` is the Agency home, found the way
/// an agent would (its HOME is `$AGENCY_HOME/run/<uuid>/run/home`); `r
/// NAME CMD…` runs CMD and records `OK` or `DENIED` in `$O/NAME`.
pub fn preamble(out: &Path) -> String {
    format!(
        "O={:?}\nexport H=${{HOME%/run/*/run/home}}\nr() {{ n=$1; shift; if \"$@\" > \"$O/$n.out\" 2>&1; then echo OK > \"$O/$n\"; else echo DENIED > \"$O/$n\"; fi; }}\n",
        out.display().to_string()
    )
}

/// `[agents]` for `sh -c SCRIPT`, `agents` more keys there, then `more`
/// (other tables, ending with `[sandbox]`, see [`granting`]).
pub fn config(script: &str, agents: &str, more: &str) -> String {
    format!(
        "[agents]\nruntime = \"command\"\nkill_grace_ms = 300\nrespawn_backoff_ms = 3600000\n{agents}[agents.command]\nprogram = \"sh\"\nargs = [\"-c\", {script:?}]\n{more}"
    )
}

/// `[sandbox]` granting `out` (and python3, the fixtures), then `keys`
/// more keys of that table.
pub fn granting(out: &Path, keys: &str) -> String {
    format!("{}{keys}", sandbox_toml(&[out]))
}

pub fn result(out: &Path, name: &str) -> String {
    let verdict = std::fs::read_to_string(out.join(name)).unwrap_or_else(|_| "MISSING".into());
    let output = std::fs::read_to_string(out.join(format!("{name}.out"))).unwrap_or_default();
    format!("{}: {}", verdict.trim(), output.trim())
}

pub fn assert_denied(out: &Path, name: &str) {
    let r = result(out, name);
    assert!(r.starts_with("DENIED"), "{name} was not denied: {r}");
}

pub fn assert_ok(out: &Path, name: &str) {
    let r = result(out, name);
    assert!(r.starts_with("OK"), "control {name} failed: {r}");
}

pub fn send(story: &Story) {
    let (code, _, err) = agency(&story.home, &["send", "Please work"]);
    assert_eq!(code, 0, "{err}");
}
