//! A warm run's wait for mail: once the model has ended
//! its turn with no tool call, the loop itself calls Agency's `mail_wait`
//! (no model call, nothing spent but time) until `keep_warm_ms` has passed
//! with nothing new. New mail wakes it with a user message that says what
//! came; `released` (the daemon needs the slot), the end of the keep-warm
//! time or a failed wait (a revoked token) end the run normally.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::error::AgentError;
use crate::mcp::{Mcp, Sessions};

/// The longest single `mail_wait` (the tool's own cap).
const MAX_WAIT_MS: u64 = 120_000;

/// Wait up to `keep_warm_ms` for mail not in `known`. Returns the user
/// message that continues the conversation, or `None` when the run ends.
/// The ids announced are added to `known`, so mail the model leaves
/// unacknowledged does not wake it again and again. `t` records what
/// happens (`warm_wait`, `warm_wake`, `warm_end`).
pub(crate) async fn park(
    mcp: &Sessions,
    keep_warm_ms: u64,
    known: &mut Vec<String>,
    t: &mut dyn FnMut(&str, Value),
) -> Option<String> {
    let deadline = Instant::now() + Duration::from_millis(keep_warm_ms);
    t("warm_wait", json!({ "keep_warm_ms": keep_warm_ms }));
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            t("warm_end", json!({ "why": "keep_warm elapsed" }));
            return None;
        }
        let ms = u64::try_from(left.as_millis())
            .unwrap_or(u64::MAX)
            .clamp(1, MAX_WAIT_MS);
        let out = mcp
            .call("mail_wait", &json!({ "timeout_ms": ms, "ignore": known }))
            .await;
        if out.is_error {
            t(
                "warm_end",
                json!({ "why": "mail_wait failed", "error": out.content }),
            );
            return None;
        }
        let v: Value = serde_json::from_str(&out.content).unwrap_or(Value::Null);
        match v["status"].as_str() {
            Some("timeout") => continue,
            Some("mail") => {
                let messages = v["messages"].as_array().cloned().unwrap_or_default();
                let mut lines = Vec::with_capacity(messages.len());
                for m in &messages {
                    if let Some(id) = m["id"].as_str() {
                        known.push(id.to_owned());
                    }
                    lines.push(format!(
                        "- {} (from {})",
                        m["subject"].as_str().unwrap_or_default(),
                        from(&m["from"])
                    ));
                }
                t("warm_wake", json!({ "messages": messages.len() }));
                return Some(format!(
                    "New mail: your inbox has {} new message(s):\n{}\nRead them with mail_inbox, process them as before, then end your turn.",
                    messages.len(),
                    lines.join("\n")
                ));
            }
            Some("released") => {
                t("warm_end", json!({ "why": "released" }));
                return None;
            }
            _ => {
                t(
                    "warm_end",
                    json!({ "why": "unexpected answer", "answer": out.content }),
                );
                return None;
            }
        }
    }
}

/// A warm wait for a program that is not the built-in loop (`agency
/// claude-warm`, which keeps Claude Code warm): its own MCP session to
/// Agency, with the agent's token, used only for `mail_wait`.
#[derive(Debug)]
pub struct MailWaiter {
    mcp: Sessions,
    known: Vec<String>,
}

impl MailWaiter {
    /// Connect to Agency's MCP endpoint as the agent.
    pub async fn connect(mcp_url: &str, token: &str) -> Result<MailWaiter, AgentError> {
        let (mcp, _) =
            Mcp::connect(mcp_url, token, Duration::from_secs(MAX_WAIT_MS / 1000 + 60)).await?;
        Ok(MailWaiter {
            mcp: Sessions::new(mcp),
            known: Vec::new(),
        })
    }

    /// As the built-in loop waits: the next user message, or `None` when
    /// the agent should end (keep-warm time over, released, a failed wait).
    pub async fn wait(
        &mut self,
        keep_warm_ms: u64,
        events: &mut dyn FnMut(&str, Value),
    ) -> Option<String> {
        park(&self.mcp, keep_warm_ms, &mut self.known, events).await
    }

    /// End the MCP session.
    pub async fn close(self) {
        self.mcp.close().await;
    }
}

/// A mail party as JSON (`{"kind":"user"}`, `{"kind":"handler","id":…}`)
/// in words.
fn from(v: &Value) -> String {
    match (v["kind"].as_str(), v["id"].as_str()) {
        (Some("user"), _) => "the user".to_owned(),
        (Some("handler"), Some(id)) => format!("handler {id}"),
        _ => v.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn senders_are_named_in_words() {
        assert_eq!(from(&json!({"kind": "user"})), "the user");
        assert_eq!(
            from(&json!({"kind": "handler", "id": "abc"})),
            "handler abc"
        );
    }
}
