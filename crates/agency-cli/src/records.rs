//! Tables and text for records about the organisation's work: agent runs,
//! a message's receipt, a KB file's access log and a handler's outcomes.
//! Pure functions from the API's data to a `String`, like `output.rs`;
//! text an agent wrote (end reasons, subjects, titles) goes through the
//! CLI's sanitiser (`safe_text::line`).

use agency_api::{KbAuditEntry, RunView};
use agency_api::{MessageView, OutcomeBrief};
use agency_core::MailTarget;

use crate::output::table;
use crate::safe_text::line;

fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn party(t: &MailTarget) -> String {
    match t {
        MailTarget::User => "user".to_owned(),
        MailTarget::Handler(h) => format!("handler {h}"),
    }
}

/// Milliseconds as a short duration: `850ms`, `12.3s`, `4m05s`, `2h03m`.
pub fn duration(ms: i64) -> String {
    let ms = ms.max(0);
    if ms < 1000 {
        return format!("{ms}ms");
    }
    if ms < 60_000 {
        return format!("{:.1}s", ms as f64 / 1000.0);
    }
    let s = ms / 1000;
    if s < 3600 {
        return format!("{}m{:02}s", s / 60, s % 60);
    }
    format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
}

/// How a run ended, in one cell.
fn ended(r: &RunView) -> String {
    if r.live {
        return "live".to_owned();
    }
    match (r.normal, &r.ended_how, &r.end_reason) {
        (Some(false), Some(how), _) => format!("abnormal: {}", line(how)),
        (_, _, Some(reason)) => line(reason),
        _ => "ended".to_owned(),
    }
}

/// Runs, newest first, as the API returns them.
pub fn runs(list: &[RunView]) -> String {
    if list.is_empty() {
        return "(no runs)\n".to_owned();
    }
    let rows = list
        .iter()
        .map(|r| {
            vec![
                r.agent.to_string(),
                r.handler.to_string(),
                crate::output::ago(r.started_at),
                duration(r.runtime_ms),
                ended(r),
                or_dash(r.exit_status),
                or_dash(r.tool_calls),
                match (r.input_tokens, r.output_tokens) {
                    (None, None) => "-".to_owned(),
                    (i, o) => format!("{}/{}", or_dash(i), or_dash(o)),
                },
            ]
        })
        .collect();
    table(
        &[
            "AGENT",
            "HANDLER",
            "STARTED",
            "RUNTIME",
            "ENDED",
            "EXIT",
            "TOOLS",
            "TOKENS IN/OUT",
        ],
        rows,
    )
}

/// One run, field by field.
pub fn run(r: &RunView) -> String {
    let mut rows = vec![
        vec!["agent".into(), r.agent.to_string()],
        vec!["handler".into(), r.handler.to_string()],
        vec!["runtime".into(), or_dash(r.runtime.as_deref().map(line))],
        vec!["started".into(), r.started_at.to_string()],
        vec!["ended".into(), or_dash(r.ended_at)],
        vec!["ran for".into(), duration(r.runtime_ms)],
        vec!["end".into(), ended(r)],
        vec![
            "end reason".into(),
            or_dash(r.end_reason.as_deref().map(line)),
        ],
        vec!["exit status".into(), or_dash(r.exit_status)],
        vec!["tool calls".into(), or_dash(r.tool_calls)],
        vec!["input tokens".into(), or_dash(r.input_tokens)],
        vec!["output tokens".into(), or_dash(r.output_tokens)],
        vec!["prompt version".into(), or_dash(r.prompt_version)],
        vec![
            "prompt hash".into(),
            or_dash(r.prompt_hash.as_deref().filter(|h| !h.is_empty())),
        ],
        vec![
            "transcript".into(),
            match &r.transcript {
                Some(_) => format!("yes (agency transcript {})", r.agent),
                None => "none".to_owned(),
            },
        ],
    ];
    // Every branch the run had the daemon push, one row each (the
    // user sees pushes in the handler's runs).
    for (i, p) in r.pushes.iter().enumerate() {
        let key = if i == 0 { "pushed" } else { "" };
        rows.push(vec![key.into(), line(p)]);
    }
    table(&[], rows)
}

/// A message's receipt: sent, delivered, acknowledged.
pub fn receipt(m: &MessageView) -> String {
    let delivered = match (m.delivered_at, m.dropped_at) {
        (Some(t), _) => t.to_string(),
        (None, Some(t)) => format!(
            "never: dropped at {t}: {}",
            line(m.dropped_reason.as_deref().unwrap_or("no reason recorded"))
        ),
        (None, None) => format!("not yet (due {})", m.deliver_at),
    };
    let acked = match (m.acked_at, m.delivered_at) {
        (Some(t), _) => t.to_string(),
        (None, Some(_)) => "not yet".to_owned(),
        (None, None) => "-".to_owned(),
    };
    let mut rows = vec![
        vec!["message".into(), m.id.to_string()],
        vec!["from".into(), crate::output::sender(m)],
        vec!["to".into(), party(&m.to)],
        vec!["subject".into(), line(&m.subject)],
        vec!["sent".into(), m.created_at.to_string()],
        vec!["delivered".into(), delivered],
        vec!["acknowledged".into(), acked],
        vec!["body".into(), format!("KB file {}", m.file)],
    ];
    if let Some(r) = m.in_reply_to {
        rows.insert(4, vec!["in reply to".into(), r.to_string()]);
    }
    table(&[], rows)
}

/// A KB file's access log, as the API returns it (newest first).
pub fn kb_audit(list: &[KbAuditEntry]) -> String {
    if list.is_empty() {
        return "(no accesses recorded)\n".to_owned();
    }
    let rows = list
        .iter()
        .map(|e| {
            vec![
                crate::output::ago(e.at),
                e.action.as_str().to_owned(),
                e.version.to_string(),
                e.handler
                    .map_or_else(|| "user/Agency".to_owned(), |h| h.to_string()),
                or_dash(e.agent),
            ]
        })
        .collect();
    table(&["AT", "ACTION", "VERSION", "HANDLER", "AGENT"], rows)
}

/// The outcomes one handler is responsible for.
pub fn handler_outcomes(list: &[OutcomeBrief]) -> String {
    if list.is_empty() {
        return "(no outcomes)\n".to_owned();
    }
    let rows = list
        .iter()
        .map(|o| {
            vec![
                o.id.to_string(),
                o.status.to_string(),
                o.priority.to_string(),
                line(&o.title),
            ]
        })
        .collect();
    table(&["OUTCOME", "STATUS", "PRIORITY", "TITLE"], rows)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use agency_core::{AgentId, HandlerId, Timestamp};

    use super::*;

    fn run_view(normal: Option<bool>, how: Option<&str>) -> RunView {
        RunView {
            agent: AgentId::new_random(),
            handler: HandlerId::new_random(),
            started_at: Timestamp(0),
            ended_at: Some(Timestamp(65_000)),
            end_reason: Some("killed\u{1b}[2J".into()),
            runtime_ms: 65_000,
            live: false,
            normal,
            ended_how: how.map(str::to_owned),
            runtime: Some("command".into()),
            prompt_version: Some(2),
            prompt_hash: Some("abc".into()),
            exit_status: None,
            tool_calls: Some(3),
            input_tokens: Some(10),
            output_tokens: Some(2),
            transcript: None,
            pushes: vec![
                "repo push: branch b of repo r (commit c) to refs/heads/agency/h/b\u{7}".into(),
            ],
        }
    }

    #[test]
    fn issue9_item12_runs_table_says_how_each_ended() {
        let t = runs(&[
            run_view(Some(false), Some("killed")),
            run_view(Some(true), None),
        ]);
        assert!(t.contains("abnormal: killed"), "{t}");
        assert!(t.contains("1m05s"), "{t}");
        assert!(t.contains("10/2"), "{t}");
        assert!(!t.contains('\u{1b}'), "{t:?}");
        let one = run(&run_view(Some(false), Some("killed")));
        assert!(one.contains("prompt version  2"), "{one}");
        assert!(one.contains("killed\\u{1b}[2J"), "{one}");
        assert!(
            one.contains("pushed          repo push: branch b of repo r (commit c) to refs/heads/agency/h/b\\u{7}"),
            "{one}"
        );
    }

    #[test]
    fn durations_read_naturally() {
        assert_eq!(duration(850), "850ms");
        assert_eq!(duration(12_345), "12.3s");
        assert_eq!(duration(245_000), "4m05s");
        assert_eq!(duration(7_380_000), "2h03m");
    }
}
