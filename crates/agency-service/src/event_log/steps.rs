//! Steps of a live run that change nothing else — a tool call above all —
//! logged through the group commit of `read_audit.rs` (a call that only
//! read must not pay for a durable write of its own). A step is numbered
//! when its batch commits, a few milliseconds after it happened: its `at`
//! is when it happened, its number says when readers could first see it.

use std::sync::atomic::Ordering;

use agency_api::EventKind;
use agency_core::Principal;

use super::Record;
use crate::Result;
use crate::error::ServiceError;
use crate::service::Service;

/// A tool name longer than this is cut in the log.
const MAX_NAME: usize = 128;
/// An error message longer than this is cut in the log.
const MAX_ERROR: usize = 300;
/// A reported duration above this is refused (a day).
const MAX_DURATION_MS: u64 = 24 * 3600 * 1000;

/// One tool call of an agent, as its caller saw it end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolStep {
    /// The tool's name (`kb_read`, `Bash`, `mcp__github__search`).
    pub tool: String,
    /// A digest of the call's arguments ([`args_digest`]): equal
    /// arguments, equal digests, without keeping what they said.
    pub args_digest: String,
    /// `None`: it succeeded; else the error's kind (`denied`, `invalid`, …).
    pub error_kind: Option<String>,
    /// The error's message, cut to a few hundred characters.
    pub error: Option<String>,
    pub duration_ms: u64,
    /// The runtime's own id of the call, when it has one.
    pub call_id: Option<String>,
    /// Seen at its policy check, before it ran (a runtime's own tool —
    /// Claude Code's `Bash`, the built-in loop's `bash` — which Agency sees
    /// only there): `error_kind` then says whether it was admitted, not
    /// how it ended, and `duration_ms` is 0.
    pub at_admission: bool,
}

/// The digest of a call's arguments: BLAKE3 of their JSON with keys
/// sorted and no spaces (serde_json's maps are sorted in our build, see
/// `agency_core::policy::canonical_json`), first 16 hex digits. Hashed as
/// it is written: a large argument is not copied.
pub fn args_digest(args: &impl serde::Serialize) -> String {
    let mut h = blake3::Hasher::new();
    // Writing JSON into a hasher cannot fail but for a map with non-string
    // keys, which JSON arguments never have.
    let _ = serde_json::to_writer(&mut h, args);
    let mut hex = h.finalize().to_hex().to_string();
    hex.truncate(16);
    hex
}

impl Service {
    /// Log a tool call the calling agent made (its handler and agent come
    /// from its token). Committed in the next batch; never fails the call.
    pub fn record_tool_call(&self, who: Principal, step: ToolStep) -> Result<()> {
        let Principal::Agent { handler, agent } = who else {
            return Err(ServiceError::invalid(
                "failed to log a tool call: only an agent makes tool calls",
            ));
        };
        if self.tool_steps_off.load(Ordering::Relaxed) {
            return Ok(());
        }
        let tool = cut(&step.tool, MAX_NAME);
        let error = step.error.as_deref().map(|e| cut(e, MAX_ERROR));
        let line = match (&step.error_kind, step.at_admission) {
            (None, true) => format!("{tool} admitted"),
            (Some(k), true) => format!("{tool} not admitted: {k}"),
            (None, false) => format!("{tool} ok ({} ms)", step.duration_ms),
            (Some(k), false) => format!("{tool} failed: {k} ({} ms)", step.duration_ms),
        };
        let data = serde_json::json!({
            "tool": tool,
            "args_digest": step.args_digest,
            "ok": step.error_kind.is_none(),
            "error_kind": step.error_kind,
            "error": error,
            "duration_ms": step.duration_ms,
            "call_id": step.call_id,
            "stage": if step.at_admission { "admitted" } else { "ended" },
        });
        self.log_step(
            Record::new(EventKind::ToolCalled, Some(handler), line)
                .agent(Some(agent))
                .data(data),
        );
        Ok(())
    }

    /// Log how a runtime's own tool call ended, as the calling agent's
    /// runtime reports it (`POST /agent/tool-done`): a `tool.ended` event
    /// of its handler. It is the agent's word — an agent can only ever
    /// report on its own calls, never change what Agency recorded.
    pub fn tool_call_reported(&self, who: Principal, done: &agency_api::ToolDone) -> Result<()> {
        let Principal::Agent { handler, agent } = who else {
            return Err(ServiceError::invalid(
                "failed to log a tool call's end: only an agent makes tool calls",
            ));
        };
        let name = done.tool.trim();
        if name.is_empty() || name.chars().any(char::is_control) {
            return Err(ServiceError::invalid(
                "failed to log a tool call's end: give the tool's name (one line), as at its check",
            ));
        }
        if done.duration_ms.is_some_and(|d| d > MAX_DURATION_MS) {
            return Err(ServiceError::invalid(format!(
                "failed to log a tool call's end: duration_ms is over a day ({} ms)",
                done.duration_ms.unwrap_or_default()
            )));
        }
        let tool = cut(name, MAX_NAME);
        let error = done.error.as_deref().map(|e| cut(e, MAX_ERROR));
        let call_id = done.call_id.as_deref().map(|c| cut(c, MAX_NAME));
        let took = done
            .duration_ms
            .map_or(String::new(), |d| format!(" ({d} ms)"));
        let line = if done.ok {
            format!("{tool} ended ok{took}")
        } else {
            format!("{tool} ended with an error{took}")
        };
        let data = serde_json::json!({
            "tool": tool,
            "args_digest": args_digest(&done.args),
            "ok": done.ok,
            "error": error,
            "duration_ms": done.duration_ms,
            "call_id": call_id,
        });
        self.log_step(
            Record::new(EventKind::ToolEnded, Some(handler), line)
                .agent(Some(agent))
                .data(data),
        );
        Ok(())
    }

    /// Log a step that records no change of its own (see the module doc).
    pub(crate) fn log_step(&self, r: Record) {
        self.read_audit.step(r.into_row(self.now()));
    }
}

impl crate::System {
    /// For the benchmarks only (`agency-bench`, item 13): stop (`false`)
    /// or resume logging tool calls' steps, so that a run without them
    /// gives the baseline of what logging them costs. Nothing else may
    /// call it: a run with it off leaves no trace of its tool calls in
    /// the event log (problem detection sees no tool loops).
    #[doc(hidden)]
    pub fn bench_log_tool_steps(&self, on: bool) {
        self.tool_steps_off.store(!on, Ordering::Relaxed);
    }
}

fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        None => s.to_owned(),
        Some((i, _)) => format!("{}…", &s[..i]),
    }
}
