//! Asking the daemon before a workspace tool runs: every
//! call of `bash`, `read_file`, `write_file`, `edit_file`, `glob` and
//! `grep` is sent to `POST /agent/tool-check` on the daemon's agents'
//! listener with the agent's token, and runs only if the answer is
//! "allow". "pending" and "deny" come back to the model as the tool's
//! result (the daemon's message says what to do). It fails closed: if the
//! daemon cannot be asked, or answers anything else, the tool does not run.

use std::time::Duration;

use serde_json::{Value, json};

/// Why a workspace tool call does not run; its text is what the model
/// gets instead of the tool's result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum Refused {
    /// The daemon could not be asked, or answered something unknown.
    #[error(
        "[tool_check] failed to run tool {tool}: the daemon could not be asked whether it may run ({why}); the tool did not run, try again later"
    )]
    Unasked { tool: String, why: String },
    /// It waits for a person's approval (the daemon's message).
    #[error("[pending_approval] {0}")]
    Pending(String),
    /// It was denied (the daemon's message).
    #[error("[denied] {0}")]
    Denied(String),
}

/// How long to wait for the daemon's answer.
const TIMEOUT: Duration = Duration::from_secs(30);
/// How long a report of a call's end may hold up the next turn.
const REPORT_TIMEOUT: Duration = Duration::from_secs(2);

/// The client of `/agent/tool-check` (and `/agent/tool-done`) for one run.
#[derive(Clone)]
pub(crate) struct ToolCheck {
    url: String,
    done_url: String,
    token: String,
    http: reqwest::Client,
}

impl std::fmt::Debug for ToolCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolCheck")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

/// The check's URL on the listener that serves `mcp_url` (`…/mcp`).
pub(crate) fn check_url(mcp_url: &str) -> String {
    let root = mcp_url.trim_end_matches('/');
    let root = root.strip_suffix("/mcp").unwrap_or(root);
    format!("{root}/agent/tool-check")
}

impl ToolCheck {
    pub fn new(mcp_url: &str, token: &str) -> ToolCheck {
        let url = check_url(mcp_url);
        ToolCheck {
            done_url: format!("{}-done", url.trim_end_matches("-check")),
            url,
            token: token.to_owned(),
            // No proxy: the daemon is on loopback, and the sandbox's proxy
            // variables must not route the check through the egress proxy.
            http: reqwest::Client::builder()
                .no_proxy()
                .timeout(TIMEOUT)
                .build()
                .unwrap_or_default(),
        }
    }

    /// Tell the daemon how an admitted call ended, for its event log. Best
    /// effort: the tool's result goes to the model whatever happens here.
    pub async fn report(
        &self,
        tool: &str,
        args: &Value,
        is_error: bool,
        content: &str,
        took: Duration,
    ) {
        let error = is_error.then(|| content.chars().take(300).collect::<String>());
        let body = json!({
            "tool": tool,
            "args": args,
            "ok": !is_error,
            "error": error,
            "duration_ms": u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
        });
        let sent = self
            .http
            .post(&self.done_url)
            .bearer_auth(&self.token)
            .timeout(REPORT_TIMEOUT)
            .json(&body)
            .send()
            .await;
        if let Err(e) = sent {
            tracing::debug!(error = %e.without_url(), "failed to report a tool call's end");
        }
    }

    /// `Ok(())` if the daemon allows the call; else why not.
    pub async fn admit(&self, tool: &str, args: &Value) -> Result<(), Refused> {
        let fail = |why: String| Refused::Unasked {
            tool: tool.to_owned(),
            why,
        };
        let resp = self
            .http
            .post(&self.url)
            .bearer_auth(&self.token)
            .json(&json!({ "tool": tool, "args": args }))
            .send()
            .await
            .map_err(|e| fail(e.without_url().to_string()))?;
        let status = resp.status();
        let body: Value = resp
            .json()
            .await
            .map_err(|e| fail(format!("unreadable answer: {}", e.without_url())))?;
        if !status.is_success() {
            let msg = body
                .pointer("/error/message")
                .and_then(Value::as_str)
                .unwrap_or("no message");
            return Err(fail(format!("HTTP {status}: {msg}")));
        }
        let message = body
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or_default();
        match body.get("decision").and_then(Value::as_str) {
            Some("allow") => Ok(()),
            Some("pending") => Err(Refused::Pending(message.to_owned())),
            Some("deny") => Err(Refused::Denied(message.to_owned())),
            other => Err(fail(format!("unknown decision {other:?}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_from_mcp_url() {
        assert_eq!(
            check_url("http://127.0.0.1:7/mcp"),
            "http://127.0.0.1:7/agent/tool-check"
        );
        assert_eq!(
            check_url("http://127.0.0.1:7/mcp/"),
            "http://127.0.0.1:7/agent/tool-check"
        );
    }

    #[tokio::test]
    async fn fails_closed_when_the_daemon_is_unreachable() {
        // A port nothing listens on (bound, then closed).
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let c = ToolCheck::new(&format!("http://127.0.0.1:{port}/mcp"), "t");
        let e = c
            .admit("bash", &json!({"command": "ls"}))
            .await
            .unwrap_err();
        assert!(matches!(e, Refused::Unasked { .. }), "{e:?}");
        assert!(e.to_string().contains("did not run"), "{e}");
    }
}
