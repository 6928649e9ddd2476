//! How a paused budget shows: the STATUS cell of a handler it
//! holds, the note that says how a paused subtree continues, and the
//! lines `agency status` prints for each paused budget.

use agency_api::HandlerView;
use agency_api::PausedView;

/// How a paused subtree continues (said under tables that show one).
pub const PAUSED_NOTE: &str = "\npaused: a reached budget, or `agency pause`, holds the handler's subtree; no agent starts for it.\nSee `agency budget show`; continue with `agency resume <handler>` (or raise a reached limit with `agency budget set <handler> …`).\n";

/// A handler's STATUS cell: an active handler held by a paused budget
/// shows `paused (budget)` (no agent starts for it, whatever else holds
/// it), a stalled one `stalled`.
pub fn handler_state(h: &HandlerView) -> String {
    match (&h.paused, &h.stalled, h.status.as_str()) {
        (Some(p), _, "active") => paused_label(p).to_owned(),
        (None, Some(_), "active") => "stalled".to_owned(),
        (_, _, s) => s.to_owned(),
    }
}

/// The STATUS cell of an active handler `p` holds.
pub fn paused_label(p: &PausedView) -> &'static str {
    if p.by_hand() {
        "paused (by you)"
    } else {
        "paused (budget)"
    }
}

/// One line per paused budget and the note, or nothing when none is.
pub fn paused_lines(paused: &[PausedView]) -> String {
    if paused.is_empty() {
        return String::new();
    }
    let mut out = String::from("\n");
    for p in paused {
        let by = if p.by_hand() {
            "by you"
        } else {
            "by its budget"
        };
        out.push_str(&format!(
            "PAUSED: the subtree of handler {} {by} ({})\n",
            p.by,
            crate::safe_text::line(&p.reason)
        ));
    }
    out.push_str(PAUSED_NOTE);
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use agency_core::{FileId, HandlerId, Timestamp};

    fn handler(stalled: bool, paused: bool) -> HandlerView {
        HandlerView {
            id: HandlerId(uuid::Uuid::from_u128(1)),
            boss: None,
            status: agency_core::status::HandlerStatus::Active,
            title: "root".into(),
            state_doc: FileId(uuid::Uuid::from_u128(2)),
            audit_log: FileId(uuid::Uuid::from_u128(3)),
            inbox_depth: 0,
            live_agent: None,
            has_work: true,
            stalled: stalled.then(|| "no progress".to_owned()),
            paused: paused.then(|| PausedView {
                by: HandlerId(uuid::Uuid::from_u128(1)),
                reason: "tool calls limit 0, spent 0".into(),
                since: Timestamp(0),
            }),
        }
    }

    #[test]
    fn a_paused_handler_says_so_before_anything_else() {
        assert_eq!(handler_state(&handler(false, false)), "active");
        assert_eq!(handler_state(&handler(true, false)), "stalled");
        assert_eq!(handler_state(&handler(true, true)), "paused (budget)");
        assert_eq!(paused_lines(&[]), "");
        let p = handler(false, true).paused.unwrap();
        let lines = paused_lines(&[PausedView {
            reason: "calls\u{1b}[2J".into(),
            ..p
        }]);
        assert!(lines.contains("by its budget (calls\\u{1b}[2J)"), "{lines}");
        assert!(lines.ends_with(PAUSED_NOTE));
    }
}
