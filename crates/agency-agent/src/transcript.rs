//! The run's JSONL transcript (one line per event, appended as it happens,
//! so a killed run still leaves everything up to its last event) and the
//! redactor every recorded string passes through.
//!
//! Each line is a JSON object with `ts` (RFC 3339, UTC), `event`, and the
//! event's fields. Events: `run_start`, `mcp_connected`,
//! `mcp_server_connected`, `mcp_server_failed`, `workspace_tools` (the
//! workspace directory and the workspace tools offered), `model_request`,
//! `retry`, `model_reply`, `tool_call`, `tool_result`, `limit`, `error`,
//! `run_end`.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::AgentError;

/// The longest tool result kept in the transcript; the model still gets
/// all of it.
pub(crate) const MAX_RECORDED_RESULT: usize = 64 * 1024;

/// What replaces a secret in anything recorded.
const REDACTED: &str = "[redacted]";

/// Secrets shorter than this are placeholders ("x", "none") that local
/// servers accept; replacing every such substring would garble the
/// transcript without protecting anything.
const MIN_SECRET_LEN: usize = 6;

/// Removes the run's secrets (API key, MCP token) from text before it is
/// written anywhere: server error bodies or library errors might echo them.
#[derive(Clone, Default)]
pub(crate) struct Redactor {
    secrets: Vec<String>,
}

impl std::fmt::Debug for Redactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Redactor")
            .field("secrets", &self.secrets.len())
            .finish()
    }
}

impl Redactor {
    pub fn new<'a>(secrets: impl IntoIterator<Item = Option<&'a str>>) -> Redactor {
        let mut list = Vec::new();
        for s in secrets.into_iter().flatten() {
            if s.len() < MIN_SECRET_LEN {
                continue;
            }
            list.push(s.to_owned());
            // The JSON-escaped form too, for text that is already encoded.
            if let Ok(q) = serde_json::to_string(s) {
                let inner = q[1..q.len() - 1].to_owned();
                if inner != s {
                    list.push(inner);
                }
            }
        }
        // Longest first, so a secret containing another is removed whole.
        list.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Redactor { secrets: list }
    }

    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_owned();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), REDACTED);
            }
        }
        out
    }
}

/// The transcript file (or none when not configured).
#[derive(Debug)]
pub(crate) struct Transcript {
    out: Option<(PathBuf, File)>,
    redactor: Redactor,
    failure: Option<AgentError>,
}

impl Transcript {
    /// Open `path` for appending (created if absent, with its directory).
    pub fn open(path: Option<&Path>, redactor: Redactor) -> Result<Transcript, AgentError> {
        let out = match path {
            None => None,
            Some(p) => {
                let fail = |e: std::io::Error| AgentError::Transcript {
                    path: p.to_owned(),
                    message: e.to_string(),
                };
                if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir).map_err(fail)?;
                }
                let f = File::options()
                    .create(true)
                    .append(true)
                    .open(p)
                    .map_err(fail)?;
                Some((p.to_owned(), f))
            }
        };
        Ok(Transcript {
            out,
            redactor,
            failure: None,
        })
    }

    /// Append one event. `fields` must be a JSON object. A write failure is
    /// kept (see [`Transcript::take_failure`]) and later events are dropped.
    pub fn event(&mut self, event: &str, fields: Value) {
        let Some((path, file)) = &mut self.out else {
            return;
        };
        if self.failure.is_some() {
            return;
        }
        let mut line = Map::new();
        line.insert("ts".into(), Value::String(crate::summary::now_rfc3339()));
        line.insert("event".into(), Value::String(event.to_owned()));
        if let Value::Object(m) = fields {
            line.extend(m);
        }
        let mut text = self.redactor.redact(&Value::Object(line).to_string());
        text.push('\n');
        // One write per line, so concurrent readers (`tail -f`) never see
        // half an event.
        if let Err(e) = file.write_all(text.as_bytes()) {
            self.failure = Some(AgentError::Transcript {
                path: path.clone(),
                message: e.to_string(),
            });
        }
    }

    /// `text` with the run's secrets removed.
    pub fn redact(&self, text: &str) -> String {
        self.redactor.redact(text)
    }

    /// The first write failure, if any.
    pub fn take_failure(&mut self) -> Option<AgentError> {
        self.failure.take()
    }

    /// Make the transcript durable (end of run).
    pub fn sync(&mut self) {
        if let Some((path, file)) = &mut self.out
            && let Err(e) = file.sync_data()
            && self.failure.is_none()
        {
            self.failure = Some(AgentError::Transcript {
                path: path.clone(),
                message: e.to_string(),
            });
        }
    }
}

/// `text` cut to at most `max` bytes on a character boundary, and whether
/// it was cut.
pub(crate) fn truncate(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn redacts_raw_and_escaped_secrets() {
        let r = Redactor::new([Some("sk-secret-1"), Some("tok\"en/xyz"), Some("x"), None]);
        assert_eq!(r.redact("key sk-secret-1!"), "key [redacted]!");
        let escaped = json!({"t": "tok\"en/xyz"}).to_string();
        assert!(
            !r.redact(&escaped).contains("en/xyz"),
            "{}",
            r.redact(&escaped)
        );
        // Placeholders are left alone.
        assert_eq!(r.redact("x marks"), "x marks");
    }

    #[test]
    fn truncates_on_char_boundaries() {
        assert_eq!(truncate("abc", 3), ("abc", false));
        assert_eq!(truncate("abcd", 3), ("abc", true));
        assert_eq!(truncate("aé", 2), ("a", true));
    }

    #[test]
    fn appends_redacted_lines() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("sub/t.jsonl");
        let mut t = Transcript::open(Some(&p), Redactor::new([Some("hunter2hunter2")])).unwrap();
        t.event("error", json!({"message": "bad key hunter2hunter2"}));
        t.event("run_end", json!({}));
        t.sync();
        assert!(t.take_failure().is_none());
        let text = std::fs::read_to_string(&p).unwrap();
        let lines: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["event"], "error");
        assert_eq!(lines[0]["message"], "bad key [redacted]");
        assert!(lines[1]["ts"].as_str().unwrap().ends_with('Z'));
    }
}
