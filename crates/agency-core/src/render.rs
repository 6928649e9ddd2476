//! Markdown renderings of outcomes and handler audit logs: the text of the
//! KB files Agency writes on every change.
//!
//! Links name UUIDs only (`kb://UUID`), not titles, so that a neighbour's
//! rename never leaves a stale rendering behind.
//!
//! Every rendering is bounded: a file is rewritten as a
//! new KB version on every change, so a file that showed a whole history
//! would make storage grow quadratically with the history. The files show
//! the current state and the newest entries (the `*_SHOWN` constants), with
//! the count of the rest and the tool that pages through them; the rows in
//! the store keep everything.

use std::fmt::Write as _;

use crate::ids::{AgentId, OutcomeId};
use crate::outcome::OutcomeStatus;
use crate::time::Timestamp;

/// One line of an outcome's audit history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryLine {
    pub at: Timestamp,
    /// `user` or `handler <uuid> (agent <uuid>)`.
    pub actor: String,
    /// created, updated, delegated, completed, closed, …
    pub action: String,
    pub detail: String,
}

/// History events an outcome file shows (the newest ones).
pub const HISTORY_SHOWN: usize = 10;
/// Characters of one history event's detail an outcome file shows.
pub const DETAIL_CHARS_SHOWN: usize = 500;
/// Children not finished an outcome file lists (the oldest ones).
pub const OPEN_CHILDREN_SHOWN: usize = 50;
/// Finished children an outcome file lists (the most recently finished).
pub const FINISHED_CHILDREN_SHOWN: usize = 10;
/// Parents an outcome file lists.
pub const PARENTS_SHOWN: usize = 50;
/// Entries an audit log file shows (the newest ones)...
pub const LOG_ENTRIES_SHOWN: usize = 10;
/// ...within this many bytes of summaries (the newest entry is always shown).
pub const LOG_BYTES_SHOWN: usize = 64 * 1024;

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
    /// At most [`PARENTS_SHOWN`], of `parents_total`.
    pub parents: &'a [OutcomeId],
    pub parents_total: usize,
    /// Children not finished (at most [`OPEN_CHILDREN_SHOWN`]), of
    /// `open_total`.
    pub open_children: &'a [OutcomeId],
    pub open_total: usize,
    /// The most recently finished children (at most
    /// [`FINISHED_CHILDREN_SHOWN`]), of `finished_total`.
    pub finished_children: &'a [OutcomeId],
    pub finished_total: usize,
    /// The newest events (at most [`HISTORY_SHOWN`]), oldest first, of
    /// `history_total`.
    pub history: &'a [HistoryLine],
    pub history_total: usize,
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
    more(
        &mut s,
        d.parents_total,
        d.parents.len(),
        "parents",
        "outcome_ancestors",
    );
    let _ = writeln!(s, "\n## How (children)\n");
    let total = d.open_total + d.finished_total;
    if total == 0 {
        s.push_str("(none)\n");
    } else {
        let _ = writeln!(
            s,
            "{total} in all: {} not finished, {} finished.",
            d.open_total, d.finished_total
        );
        if d.open_total > 0 {
            let _ = writeln!(s, "\nNot finished:\n");
            links(&mut s, d.open_children);
            more(
                &mut s,
                d.open_total,
                d.open_children.len(),
                "children not finished",
                "outcome_subtree",
            );
        }
        if d.finished_total > 0 {
            let _ = writeln!(s, "\nMost recently finished:\n");
            links(&mut s, d.finished_children);
            more(
                &mut s,
                d.finished_total,
                d.finished_children.len(),
                "finished children",
                "outcome_subtree",
            );
        }
    }
    let _ = writeln!(s, "\n## History\n");
    let earlier = d.history_total.saturating_sub(d.history.len());
    if earlier > 0 {
        let _ = writeln!(
            s,
            "({earlier} earlier events; page through the whole history with outcome_history)\n"
        );
    }
    for h in d.history {
        let _ = write!(s, "- {} {} by {}", h.at, h.action, h.actor);
        if !h.detail.is_empty() {
            let detail = h.detail.replace('\n', " ");
            let clipped: String = detail.chars().take(DETAIL_CHARS_SHOWN).collect();
            let _ = write!(s, ": {clipped}");
            if clipped.len() < detail.len() {
                s.push_str("… (clipped; outcome_history has it whole)");
            }
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

/// "… and N more" with the tool that lists them, when a list was cut.
fn more(s: &mut String, total: usize, shown: usize, what: &str, tool: &str) {
    if total > shown {
        let _ = writeln!(
            s,
            "- … and {} more {what} (list them with {tool})",
            total - shown
        );
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

/// An audit log file showing every entry given (a new, short log).
pub fn render_audit_log(handler_title: &str, entries: &[LogLine]) -> String {
    render_audit_log_tail(handler_title, entries, 0)
}

/// An audit log file showing the newest `entries` (oldest first) after
/// `earlier` entries it leaves out, cut further to [`LOG_ENTRIES_SHOWN`]
/// entries and [`LOG_BYTES_SHOWN`] bytes of summaries (the newest entry is
/// always shown).
pub fn render_audit_log_tail(handler_title: &str, entries: &[LogLine], earlier: usize) -> String {
    let mut first = entries.len().saturating_sub(LOG_ENTRIES_SHOWN);
    let mut bytes = 0usize;
    for (i, e) in entries.iter().enumerate().rev() {
        bytes += e.summary.len();
        if bytes > LOG_BYTES_SHOWN && i + 1 < entries.len() {
            first = first.max(i + 1);
            break;
        }
    }
    let earlier = earlier + first;
    let mut s = format!("# Audit log: {handler_title}\n\n");
    if entries.is_empty() {
        s.push_str("(no entries yet)\n");
    }
    if earlier > 0 {
        let _ = writeln!(
            s,
            "({earlier} earlier entries; page through the whole log with audit_read)\n"
        );
    }
    for e in &entries[first..] {
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
            parents_total: 1,
            open_children: &[c],
            open_total: 1,
            finished_children: &[],
            finished_total: 0,
            history: &hist,
            history_total: 1,
        });
        assert!(md.starts_with("# Outcome: Ship v1"));
        assert!(md.contains(&format!("- kb://{p}")));
        assert!(md.contains(&format!("- kb://{c}")));
        assert!(md.contains("## Closing rationale\n\ndisproven"));
        assert!(md.contains("1970-01-01T00:00:00.000Z created by user"));
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod bounded {
    use super::*;

    fn line(i: usize, detail: &str) -> HistoryLine {
        HistoryLine {
            at: Timestamp(i as i64),
            actor: "user".into(),
            action: format!("updated{i}"),
            detail: detail.into(),
        }
    }

    #[test]
    fn outcome_file_counts_what_it_leaves_out() {
        let hist: Vec<HistoryLine> = (0..HISTORY_SHOWN)
            .map(|i| line(i, &"é".repeat(2000)))
            .collect();
        let open: Vec<OutcomeId> = (0..OPEN_CHILDREN_SHOWN)
            .map(|_| OutcomeId::new_random())
            .collect();
        let done = [OutcomeId::new_random()];
        let md = render_outcome(&OutcomeDoc {
            id: OutcomeId::new_random(),
            title: "Root",
            description: "",
            status: OutcomeStatus::Open,
            status_reason: None,
            priority: 0,
            perpetual: true,
            parents: &[],
            parents_total: 0,
            open_children: &open,
            open_total: 70,
            finished_children: &done,
            finished_total: 1000,
            history: &hist,
            history_total: 5000,
        });
        assert!(
            md.contains("1070 in all: 70 not finished, 1000 finished."),
            "{md}"
        );
        assert!(
            md.contains("… and 20 more children not finished (list them with outcome_subtree)")
        );
        assert!(md.contains("… and 999 more finished children"));
        assert!(md.contains(
            "(4990 earlier events; page through the whole history with outcome_history)"
        ));
        assert!(md.contains("(clipped; outcome_history has it whole)"));
        // Ten clipped details and 51 links: a few kilobytes, whatever the totals.
        assert!(md.len() < 20_000, "{}", md.len());
    }

    #[test]
    fn audit_log_keeps_the_newest_entries_within_its_budget() {
        let entries: Vec<LogLine> = (0..15)
            .map(|i| LogLine {
                at: Timestamp(i),
                agent: None,
                summary: format!("entry {i}"),
            })
            .collect();
        let md = render_audit_log_tail("H", &entries, 100);
        assert!(
            md.contains("(105 earlier entries; page through the whole log with audit_read)"),
            "{md}"
        );
        assert!(md.contains("entry 14") && md.contains("entry 5") && !md.contains("entry 4\n"));
        // Two huge entries: only the newest fits the byte budget.
        let big: Vec<LogLine> = (0..2)
            .map(|i| LogLine {
                at: Timestamp(i),
                agent: None,
                summary: format!("big{i} {}", "x".repeat(LOG_BYTES_SHOWN)),
            })
            .collect();
        let md = render_audit_log_tail("H", &big, 0);
        assert!(md.contains("big1") && !md.contains("big0"));
        assert!(md.contains("(1 earlier entries;"));
    }
}
