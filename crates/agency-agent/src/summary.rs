//! The run's result: counts, token usage, how it ended, and when. Written
//! as JSON to `result_path` at exit for the daemon's supervisor, which also
//! takes the process exit code from it ([`RunSummary::exit_code`]).

use std::path::Path;

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::config::Api;
use crate::error::AgentError;

/// How a run ended. Serialized as one string: `"completed"`,
/// `"turn_limit"`, `"token_limit"`, `"budget: <message>"` or
/// `"error: <message>"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Ended {
    /// The model answered without tool calls.
    Completed,
    /// `max_turns` was reached (after the save-your-state calls).
    TurnLimit,
    /// `max_total_tokens` was reached (after the save-your-state calls).
    TokenLimit,
    /// The daemon's model gateway refused a model call by a budget
    /// (reached, or its subtree paused): the run recorded why and
    /// stopped, as at the end of a turn. The message is the gateway's.
    Budget(String),
    /// The run failed: the message says what failed.
    Error(String),
}

impl Ended {
    pub fn is_error(&self) -> bool {
        matches!(self, Ended::Error(_))
    }
}

impl std::fmt::Display for Ended {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ended::Completed => f.write_str("completed"),
            Ended::TurnLimit => f.write_str("turn_limit"),
            Ended::TokenLimit => f.write_str("token_limit"),
            Ended::Budget(m) => write!(f, "budget: {m}"),
            Ended::Error(m) => write!(f, "error: {m}"),
        }
    }
}

impl From<Ended> for String {
    fn from(e: Ended) -> String {
        e.to_string()
    }
}

/// A run ending this version does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown run ending {0:?}")]
pub struct UnknownEnding(pub String);

impl TryFrom<String> for Ended {
    type Error = UnknownEnding;

    fn try_from(s: String) -> Result<Ended, UnknownEnding> {
        match s.as_str() {
            "completed" => Ok(Ended::Completed),
            "turn_limit" => Ok(Ended::TurnLimit),
            "token_limit" => Ok(Ended::TokenLimit),
            _ => match (s.strip_prefix("error:"), s.strip_prefix("budget:")) {
                (Some(m), _) => Ok(Ended::Error(m.trim_start().to_owned())),
                (None, Some(m)) => Ok(Ended::Budget(m.trim_start().to_owned())),
                (None, None) => Err(UnknownEnding(s)),
            },
        }
    }
}

/// What one run did. Token counts are as the server reported them (plus
/// estimates for answers that came without usage, see `usage_estimated`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSummary {
    /// How the run ended.
    pub ended: Ended,
    /// Model calls made (each may have taken several HTTP attempts).
    pub turns: u32,
    /// Tool calls the model asked for (including refused ones).
    pub tool_calls: u32,
    /// Tool calls whose result was an error.
    pub tool_errors: u32,
    /// HTTP attempts of model calls that were retried.
    pub retries: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// Some answer reported no usage and its tokens were estimated
    /// (about four bytes per token).
    pub usage_estimated: bool,
    pub api: Api,
    pub model: String,
    /// The text of the last model answer (at most 16 KiB).
    pub final_text: String,
    /// RFC 3339, UTC.
    pub started_at: String,
    /// RFC 3339, UTC.
    pub ended_at: String,
}

impl RunSummary {
    /// The process exit code: 0 when the run completed or ended at a
    /// limit (the agent was told to save its state) or a budget, 1 on
    /// error.
    pub fn exit_code(&self) -> i32 {
        if self.ended.is_error() { 1 } else { 0 }
    }

    /// Write as pretty JSON to `path`, atomically (temp file, fsync,
    /// rename), so the supervisor never reads half a result.
    pub fn write_to(&self, path: &Path) -> Result<(), AgentError> {
        let fail = |e: String| AgentError::Result {
            path: path.to_owned(),
            message: e,
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
        }
        let json = serde_json::to_vec_pretty(self).map_err(|e| fail(e.to_string()))?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        let write = || -> std::io::Result<()> {
            use std::io::Write;
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&json)?;
            f.write_all(b"\n")?;
            f.sync_all()?;
            std::fs::rename(&tmp, path)
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            fail(e.to_string())
        })
    }
}

/// Now, as RFC 3339 in UTC.
pub(crate) fn now_rfc3339() -> String {
    OffsetDateTime::now_utc()
        .format(&Rfc3339)
        .unwrap_or_else(|_| "1970-01-01T00:00:00Z".to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn summary(ended: Ended) -> RunSummary {
        RunSummary {
            ended,
            turns: 1,
            tool_calls: 0,
            tool_errors: 0,
            retries: 0,
            input_tokens: 1,
            output_tokens: 1,
            usage_estimated: false,
            api: Api::Openai,
            model: "m".into(),
            final_text: String::new(),
            started_at: now_rfc3339(),
            ended_at: now_rfc3339(),
        }
    }

    #[test]
    fn endings_round_trip_as_strings_and_set_the_exit_code() {
        for (e, s, code) in [
            (Ended::Completed, "completed", 0),
            (Ended::TurnLimit, "turn_limit", 0),
            (Ended::TokenLimit, "token_limit", 0),
            (Ended::Error("failed to x".into()), "error: failed to x", 1),
            (
                Ended::Budget("budget reached".into()),
                "budget: budget reached",
                0,
            ),
        ] {
            let sum = summary(e.clone());
            let v = serde_json::to_value(&sum).unwrap();
            assert_eq!(v["ended"], s);
            let back: RunSummary = serde_json::from_value(v).unwrap();
            assert_eq!(back.ended, e);
            assert_eq!(sum.exit_code(), code);
        }
        assert!(serde_json::from_str::<Ended>("\"crashed\"").is_err());
    }

    #[test]
    fn writes_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("out/result.json");
        summary(Ended::Completed).write_to(&p).unwrap();
        let back: RunSummary = serde_json::from_slice(&std::fs::read(&p).unwrap()).unwrap();
        assert_eq!(back.ended, Ended::Completed);
        assert!(!dir.path().join("out/result.json.tmp").exists());
    }
}
