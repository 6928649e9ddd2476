//! Markdown renderings of outcomes and handler audit logs: the text of the
//! KB files Agency writes on every change.
//!
//! Links name UUIDs only (`kb://UUID`), not titles, so that a neighbour's
//! rename never leaves a stale rendering behind.

use std::fmt::Write as _;

use crate::ids::{AgentId, OutcomeId};
use crate::outcome::OutcomeStatus;
use crate::time::Timestamp;

/// One line of an outcome's audit history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryLine {
    pub at: Timestamp,
    /// "user" or "handler <uuid> (agent <uuid>)".
    pub actor: String,
    /// created, updated, delegated, completed, closed, …
    pub action: String,
    pub detail: String,
}

/// Everything an outcome's Markdown file shows.
#[derive(Debug, Clone)]
pub struct OutcomeDoc<'a> {
    pub id: OutcomeId,
    pub title: &'a str,
    pub description: &'a str,
    pub status: OutcomeStatus,
    /// Blocked reason or closing/completion rationale.
    pub status_reason: Option<&'a str>,
    pub priority: i64,
    pub perpetual: bool,
    pub parents: &'a [OutcomeId],
    pub children: &'a [OutcomeId],
    pub history: &'a [HistoryLine],
}

pub fn render_outcome(d: &OutcomeDoc<'_>) -> String {
    let mut s = String::with_capacity(512 + d.description.len());
    let _ = writeln!(s, "# Outcome: {}\n", d.title);
    let _ = writeln!(s, "- id: kb://{}", d.id);
    let _ = writeln!(s, "- status: {}", d.status);
    let _ = writeln!(s, "- priority: {}", d.priority);
    if d.perpetual {
        let _ = writeln!(s, "- perpetual: yes (never completed)");
    }
    if let Some(reason) = d.status_reason {
        let label = match d.status {
            OutcomeStatus::Blocked => "Blocked because",
            OutcomeStatus::Closed => "Closing rationale",
            OutcomeStatus::Completed => "Completion rationale",
            _ => "Note",
        };
        let _ = writeln!(s, "\n## {label}\n\n{reason}");
    }
    let _ = writeln!(
        s,
        "\n## Description\n\n{}",
        if d.description.is_empty() {
            "(none)"
        } else {
            d.description
        }
    );
    let _ = writeln!(s, "\n## Why (parents)\n");
    links(&mut s, d.parents);
    let _ = writeln!(s, "\n## How (children)\n");
    links(&mut s, d.children);
    let _ = writeln!(s, "\n## History\n");
    for h in d.history {
        let _ = write!(s, "- {} {} by {}", h.at, h.action, h.actor);
        if !h.detail.is_empty() {
            let _ = write!(s, ": {}", h.detail.replace('\n', " "));
        }
        s.push('\n');
    }
    s
}

fn links(s: &mut String, ids: &[OutcomeId]) {
    if ids.is_empty() {
        s.push_str("(none)\n");
    }
    for id in ids {
        let _ = writeln!(s, "- kb://{id}");
    }
}

/// One entry of a handler's audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    pub at: Timestamp,
    /// The agent that submitted it; `None` for entries Agency wrote itself.
    pub agent: Option<AgentId>,
    pub summary: String,
}

pub fn render_audit_log(handler_title: &str, entries: &[LogLine]) -> String {
    let mut s = format!("# Audit log: {handler_title}\n\n");
    if entries.is_empty() {
        s.push_str("(no entries yet)\n");
    }
    for e in entries {
        match e.agent {
            Some(a) => {
                let _ = writeln!(s, "## {} — agent {a}\n\n{}\n", e.at, e.summary);
            }
            None => {
                let _ = writeln!(s, "## {} — Agency\n\n{}\n", e.at, e.summary);
            }
        }
    }
    s
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn outcome_links_and_reason() {
        let p = OutcomeId::new_random();
        let c = OutcomeId::new_random();
        let hist = [HistoryLine {
            at: Timestamp(0),
            actor: "user".into(),
            action: "created".into(),
            detail: String::new(),
        }];
        let md = render_outcome(&OutcomeDoc {
            id: OutcomeId::new_random(),
            title: "Ship v1",
            description: "all of it",
            status: OutcomeStatus::Closed,
            status_reason: Some("disproven"),
            priority: 2,
            perpetual: false,
            parents: &[p],
            children: &[c],
            history: &hist,
        });
        assert!(md.starts_with("# Outcome: Ship v1"));
        assert!(md.contains(&format!("- kb://{p}")));
        assert!(md.contains(&format!("- kb://{c}")));
        assert!(md.contains("## Closing rationale\n\ndisproven"));
        assert!(md.contains("1970-01-01T00:00:00.000Z created by user"));
    }
}
