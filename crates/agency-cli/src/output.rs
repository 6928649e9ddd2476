//! Tables, trees and text for the terminal: pure functions from the API's
//! data to a `String`, so every layout is unit-testable and the CLI's
//! output is stable enough to snapshot. Rows are sorted here wherever the
//! API's order is not meaningful to a reader.

use std::collections::BTreeMap;
use std::fmt::Display;

use agency_api::{AuditEntry, FsckProblem, FsckReport, OutcomeView, VersionInfo};
use agency_api::{FileInfo, HandlerView, MessageView, OutcomeBrief, StopReport, Subtree};
use agency_core::{MailTarget, OutcomeAccess, Timestamp};

use agency_api::Agent;
pub use agency_api::{AgentsView, LimitView, StatusView};

mod hints;
pub mod layout;
pub(crate) mod paused;
mod table;
pub use hints::{no_runtime_hint, sandbox_warning, tools};
pub use layout::ago;
pub use paused::{PAUSED_NOTE, handler_state, paused_lines};
pub use table::{table, table_within, tree};

/// The width of a table printed indented by two (by [`indent`]).
fn nested_width() -> usize {
    layout::get().width.saturating_sub(2)
}

fn or_dash<T: Display>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

fn yes_no(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

fn target(t: &MailTarget) -> String {
    match t {
        MailTarget::User => "user".to_owned(),
        MailTarget::Handler(h) => format!("handler {h}"),
    }
}

/// Who did something: a handler (and agent), or the user / Agency itself.
fn by(handler: Option<impl Display>, agent: Option<impl Display>) -> String {
    match (handler, agent) {
        (Some(h), Some(a)) => format!("handler {h} (agent {a})"),
        (Some(h), None) => format!("handler {h}"),
        (None, Some(a)) => format!("agent {a}"),
        (None, None) => "user/Agency".to_owned(),
    }
}

fn access(a: OutcomeAccess) -> &'static str {
    match a {
        OutcomeAccess::Invisible => "none",
        OutcomeAccess::Read => "read",
        OutcomeAccess::Write => "write",
    }
}

pub fn status(s: &StatusView) -> String {
    let rows = vec![
        vec!["daemon".into(), "running".into()],
        vec!["address".into(), format!("http://{}", s.addr)],
        vec!["pid".into(), s.pid.to_string()],
        vec!["home".into(), s.home.clone()],
        vec!["version".into(), s.version.clone()],
        vec![
            "agent runtime".into(),
            match s.runtime.as_str() {
                "none" => "none (no agent will answer mail)".to_owned(),
                r => r.to_owned(),
            },
        ],
        vec![
            "agent sandbox".into(),
            match s.sandbox.as_str() {
                "" => "-".to_owned(),
                "off" => "OFF (agents run unconfined)".to_owned(),
                // Which limits are kept, and by what: a limit
                // the machine cannot keep is refused at start, never
                // listed here.
                "on" if !s.limits.is_empty() => format!(
                    "on; limits: {}",
                    s.limits
                        .iter()
                        .map(LimitView::describe)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                other => other.to_owned(),
            },
        ],
        vec!["root handler".into(), or_dash(s.root_handler)],
        vec![
            "active handlers".into(),
            s.counts.handlers_active.to_string(),
        ],
        vec![
            "stalled handlers".into(),
            s.counts.handlers_stalled.to_string(),
        ],
        vec!["paused budgets".into(), s.paused.len().to_string()],
        vec!["live agents".into(), s.counts.agents_live.to_string()],
        vec!["open outcomes".into(), s.counts.outcomes_open.to_string()],
        vec!["KB files".into(), s.counts.files.to_string()],
    ];
    let mut out = table(&[], rows);
    if let Some(warning) = sandbox_warning(s) {
        out.push('\n');
        out.push_str(&layout::prose(&warning));
    }
    if let Some(hint) = no_runtime_hint(s) {
        out.push('\n');
        out.push_str(&layout::prose(&hint));
    }
    if s.counts.handlers_stalled > 0 {
        out.push_str(STALLED_NOTE);
    }
    out.push_str(&paused_lines(&s.paused));
    out.push_str(&daemon_lines(s));
    out
}

/// On a shared store: which daemons hold handlers' work now.
fn daemon_lines(s: &StatusView) -> String {
    let Some(me) = &s.lease_owner else {
        return String::new();
    };
    let mut out = format!(
        "
Shared store: this daemon is {me}.
"
    );
    if s.daemons.is_empty() {
        out.push_str(
            "No daemon holds a handler's lease now.
",
        );
        return out;
    }
    let rows = s
        .daemons
        .iter()
        .map(|d| {
            vec![
                if &d.owner == me {
                    format!("{} (this one)", d.owner)
                } else {
                    d.owner.clone()
                },
                d.handlers.to_string(),
            ]
        })
        .collect();
    out.push_str(&table(&["DAEMON", "HANDLERS LEASED"], rows));
    out
}

/// How a handler leaves the stalled state (said under tables that show one).
const STALLED_NOTE: &str = "\nA stalled handler gets no agent until it has new mail: write to it with guidance\n(`agency tell <handler> …`), or stop it (`agency stop <handler>`); see `agency audit <handler>`.\n";

pub fn not_running(home: &str) -> String {
    format!(
        "daemon  not running\nhome    {home}\n\nStart one with `agency serve` (or `agency --home {home} serve`).\n"
    )
}

/// The handler tree: each handler under its boss, children by id.
pub fn handlers(list: &[HandlerView]) -> String {
    if list.is_empty() {
        return "(no handlers)\n".to_owned();
    }
    let by_id: BTreeMap<_, _> = list.iter().map(|h| (h.id, h)).collect();
    let mut children: BTreeMap<_, Vec<_>> = BTreeMap::new();
    let mut roots = Vec::new();
    for h in by_id.values() {
        match h.boss.filter(|b| by_id.contains_key(b)) {
            Some(b) => children.entry(b).or_default().push(h.id),
            None => roots.push(h.id),
        }
    }
    let all: Vec<_> = by_id.keys().copied().collect();
    let rows = tree(&roots, &children, &all)
        .into_iter()
        .filter_map(|line| {
            let h = by_id.get(&line.id)?;
            Some(vec![
                format!("{}{}", line.prefix, h.id),
                handler_state(h),
                or_dash(h.live_agent),
                h.inbox_depth.to_string(),
                yes_no(h.has_work).to_owned(),
                h.title.clone(),
            ])
        })
        .collect();
    let mut out = table(
        &["HANDLER", "STATUS", "AGENT", "UNACKED", "WORK", "TITLE"],
        rows,
    );
    // Unacknowledged mail keeps restarting a handler's agents (each new
    // one sees the same messages): say so where the count is shown.
    if list.iter().any(|h| h.inbox_depth > 0) {
        out.push_str(UNACKED_NOTE);
    }
    if list.iter().any(|h| h.stalled.is_some()) {
        out.push_str(STALLED_NOTE);
    }
    if list.iter().any(|h| h.paused.is_some()) {
        out.push_str(PAUSED_NOTE);
    }
    out
}

/// Printed under the handler tree when some handler has unacknowledged mail.
pub const UNACKED_NOTE: &str = "\nUNACKED: delivered messages not yet acknowledged. While a handler has any, Agency\nstarts a new agent for it whenever none is running, and each new agent reads them\nagain; an agent acknowledges a message with mail_ack once it has processed it.\n";

/// Children first by priority (highest first), then title, then id.
fn sort_briefs(v: &mut [&OutcomeBrief]) {
    v.sort_by(|a, b| {
        b.priority
            .cmp(&a.priority)
            .then_with(|| a.title.cmp(&b.title))
            .then_with(|| a.id.cmp(&b.id))
    });
}

/// The outcome DAG below `s.root` as a tree.
pub fn outcomes(s: &Subtree) -> String {
    let by_id: BTreeMap<_, _> = s.outcomes.iter().map(|o| (o.id, o)).collect();
    let mut kids: BTreeMap<_, Vec<&OutcomeBrief>> = BTreeMap::new();
    for (p, c) in &s.edges {
        if let Some(o) = by_id.get(c) {
            kids.entry(*p).or_default().push(o);
        }
    }
    let children: BTreeMap<_, Vec<_>> = kids
        .into_iter()
        .map(|(p, mut v)| {
            sort_briefs(&mut v);
            v.dedup_by_key(|o| o.id);
            (p, v.iter().map(|o| o.id).collect())
        })
        .collect();
    let mut all: Vec<&OutcomeBrief> = s.outcomes.iter().collect();
    sort_briefs(&mut all);
    let all: Vec<_> = all.iter().map(|o| o.id).collect();
    let roots: Vec<_> = by_id
        .contains_key(&s.root)
        .then_some(s.root)
        .into_iter()
        .collect();
    let rows = tree(&roots, &children, &all)
        .into_iter()
        .filter_map(|line| {
            let o = by_id.get(&line.id)?;
            let mut title = o.title.clone();
            if line.repeat && children.get(&o.id).is_some_and(|c| !c.is_empty()) {
                title.push_str("  (repeat: subtree shown above)");
            } else if line.repeat {
                title.push_str("  (repeat)");
            }
            Some(vec![
                format!("{}{}", line.prefix, o.id),
                o.status.to_string(),
                o.priority.to_string(),
                o.responsible.to_string(),
                title,
            ])
        })
        .collect();
    let mut out = table(
        &["OUTCOME", "STATUS", "PRIORITY", "RESPONSIBLE", "TITLE"],
        rows,
    );
    if s.truncated {
        out.push_str("(truncated: more outcomes exist; raise --limit)\n");
    }
    out
}

fn brief_rows(v: &[OutcomeBrief]) -> Vec<Vec<String>> {
    let mut v: Vec<&OutcomeBrief> = v.iter().collect();
    sort_briefs(&mut v);
    v.iter()
        .map(|o| {
            vec![
                o.id.to_string(),
                o.status.to_string(),
                o.priority.to_string(),
                o.title.clone(),
            ]
        })
        .collect()
}

/// Multi-line text (a body, a description) indented by two spaces, its
/// control characters made visible: every line starts indented, so a body
/// cannot forge a line of the CLI's own output (split on `\n` only; a `\r`
/// is shown as `\u{d}`).
/// Unless `--wide`, a line wider than the terminal is broken at spaces
/// (its continuation keeps the line's own indentation); nothing is cut.
pub(crate) fn indent(text: &str) -> String {
    let l = layout::get();
    crate::safe_text::block(text)
        .lines()
        .map(|line| {
            if line.is_empty() {
                "\n".to_owned()
            } else if l.wide {
                format!("  {line}\n")
            } else {
                layout::break_at_spaces(line, l.width.saturating_sub(2))
                    .into_iter()
                    .map(|part| format!("  {part}\n"))
                    .collect()
            }
        })
        .collect()
}

pub fn outcome(v: &OutcomeView) -> String {
    let o = &v.outcome;
    let status = match &o.status_reason {
        Some(r) => format!("{} ({r})", o.status),
        None => o.status.to_string(),
    };
    let kind = match (o.perpetual, o.process_inbox) {
        (true, _) => "perpetual root",
        (_, true) => "process inbox",
        _ => "work",
    };
    let mut out = table(
        &[],
        vec![
            vec!["outcome".into(), o.id.to_string()],
            vec!["title".into(), o.title.clone()],
            vec!["status".into(), status],
            vec!["priority".into(), o.priority.to_string()],
            vec!["kind".into(), kind.into()],
            vec!["responsible".into(), format!("handler {}", o.responsible)],
            vec![
                "root of".into(),
                v.handler
                    .map_or_else(|| "-".to_owned(), |h| format!("handler {h}")),
            ],
            vec!["your access".into(), access(v.access).into()],
            vec!["created".into(), o.created_at.to_string()],
            vec!["updated".into(), o.updated_at.to_string()],
        ],
    );
    out.push_str("\nDescription:\n");
    out.push_str(&if o.description.trim().is_empty() {
        "  (none)\n".to_owned()
    } else {
        indent(&o.description)
    });
    for (name, list) in [("Parents", &v.parents), ("Children", &v.children)] {
        out.push_str(&format!("\n{name}:\n"));
        if list.is_empty() {
            out.push_str("  (none)\n");
        } else {
            out.push_str(&indent(&table_within(
                nested_width(),
                &["OUTCOME", "STATUS", "PRIORITY", "TITLE"],
                brief_rows(list),
            )));
        }
    }
    out.push_str("\nHistory:\n");
    let mut history: Vec<_> = v.history.iter().collect();
    history.sort_by_key(|e| e.at);
    let rows = history
        .iter()
        .map(|e| {
            vec![
                ago(e.at),
                by(e.handler, e.agent),
                e.action.as_str().to_owned(),
                e.detail.clone(),
            ]
        })
        .collect();
    out.push_str(&indent(&table_within(
        nested_width(),
        &["TIME", "BY", "ACTION", "DETAIL"],
        rows,
    )));
    out
}

/// Live agents and recent ones, each once, newest first.
pub fn agents(v: &AgentsView) -> String {
    let mut all: BTreeMap<_, &Agent> = BTreeMap::new();
    for a in v.live.iter().chain(&v.recent) {
        all.entry(a.id).or_insert(a);
    }
    if all.is_empty() {
        return "(no agents)\n".to_owned();
    }
    let mut list: Vec<&Agent> = all.into_values().collect();
    list.sort_by(|a, b| {
        b.started_at
            .cmp(&a.started_at)
            .then_with(|| a.id.cmp(&b.id))
    });
    let rows = list
        .iter()
        .map(|a| {
            let state = match (&a.ended_at, &a.end_reason) {
                (None, _) => "live".to_owned(),
                // Cut to fit by `table` (`--wide`, `--json`: whole).
                (Some(_), Some(r)) => format!("ended ({r})"),
                (Some(_), None) => "ended".to_owned(),
            };
            vec![
                a.id.to_string(),
                a.handler.to_string(),
                state,
                ago(a.started_at),
                or_dash(a.ended_at.map(ago)),
            ]
        })
        .collect();
    table(&["AGENT", "HANDLER", "STATE", "STARTED", "ENDED"], rows)
}

/// KB files grouped by kind, then by description (ids are random, so the
/// API's id order means nothing to a reader).
pub fn kb_files(list: &[FileInfo]) -> String {
    if list.is_empty() {
        return "(no files)\n".to_owned();
    }
    let mut list: Vec<&FileInfo> = list.iter().collect();
    list.sort_by(|a, b| {
        a.kind
            .as_str()
            .cmp(b.kind.as_str())
            .then_with(|| a.description.cmp(&b.description))
            .then_with(|| a.id.cmp(&b.id))
    });
    let rows = list
        .iter()
        .map(|f| {
            vec![
                f.id.to_string(),
                f.kind.as_str().to_owned(),
                f.level.to_string(),
                f.latest_version.to_string(),
                f.description.clone(),
            ]
        })
        .collect();
    table(&["FILE", "KIND", "ACCESS", "VERSION", "DESCRIPTION"], rows)
}

/// A file's versions, newest first (like `git log`).
pub fn kb_log(list: &[VersionInfo]) -> String {
    let mut list: Vec<&VersionInfo> = list.iter().collect();
    list.sort_by_key(|v| std::cmp::Reverse(v.version));
    let rows = list
        .iter()
        .map(|v| {
            vec![
                v.version.to_string(),
                ago(v.created_at),
                v.size.to_string(),
                by(v.handler, v.agent),
                v.hash.to_string(),
            ]
        })
        .collect();
    table(&["VERSION", "CREATED", "SIZE", "BY", "HASH"], rows)
}

pub fn fsck(r: &FsckReport) -> String {
    let mut out = format!(
        "checked {} versions ({} distinct blobs): {}\n",
        r.versions_checked,
        r.blobs_checked,
        match r.problems.len() {
            0 => "no problems".to_owned(),
            1 => "1 problem".to_owned(),
            n => format!("{n} problems"),
        }
    );
    for p in &r.problems {
        out.push_str(&match p {
            FsckProblem::MissingBlob { file, version, blob } => {
                format!("  missing blob {blob} for KB file {file} version {version}\n")
            }
            FsckProblem::CorruptBlob { file, version, blob, actual } => {
                format!("  corrupt blob {blob} for KB file {file} version {version} (its content hashes to {actual})\n")
            }
        });
    }
    if !r.unreferenced_blobs.is_empty() {
        out.push_str(&format!(
            "{} unreferenced blobs (harmless: left by failed or refused writes):\n",
            r.unreferenced_blobs.len()
        ));
        let mut blobs: Vec<String> = r
            .unreferenced_blobs
            .iter()
            .map(ToString::to_string)
            .collect();
        blobs.sort();
        for b in blobs {
            out.push_str(&format!("  {b}\n"));
        }
    }
    out
}

pub fn capabilities(list: &[agency_api::Capability]) -> String {
    if list.is_empty() {
        return "(no capabilities)\n".to_owned();
    }
    let rows = list
        .iter()
        .map(|c| {
            vec![
                c.id.to_string(),
                c.resource.to_string(),
                c.level.to_string(),
                yes_no(c.delegatable).to_owned(),
                or_dash(c.scope),
            ]
        })
        .collect();
    table(&["ID", "RESOURCE", "LEVEL", "DELEGATABLE", "SCOPE"], rows)
}

pub fn audit(list: &[AuditEntry]) -> String {
    if list.is_empty() {
        return "(no entries)\n".to_owned();
    }
    let mut list: Vec<&AuditEntry> = list.iter().collect();
    list.sort_by_key(|e| e.at);
    let rows = list
        .iter()
        .map(|e| vec![ago(e.at), or_dash(e.agent), e.summary.clone()])
        .collect();
    table(&["TIME", "AGENT", "SUMMARY"], rows)
}

pub fn stop(r: &StopReport) -> String {
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_owned()
        } else {
            v.join(", ")
        }
    };
    let handlers: Vec<String> = r.handlers.iter().map(ToString::to_string).collect();
    let agents: Vec<String> = r.agents_to_kill.iter().map(ToString::to_string).collect();
    table(
        &[],
        vec![
            vec!["stopped handlers".into(), list(&handlers)],
            vec!["agents ended".into(), list(&agents)],
            vec![
                "outcomes reclaimed".into(),
                format!(
                    "{} (now owned by handler {})",
                    r.outcomes_reclaimed, r.new_owner
                ),
            ],
            vec!["capabilities revoked".into(), r.revoked.len().to_string()],
        ],
    )
}

/// Messages as mail: headers, then the body indented.
pub fn inbox(list: &[MessageView]) -> String {
    if list.is_empty() {
        return "(no messages)\n".to_owned();
    }
    let mut list: Vec<&MessageView> = list.iter().collect();
    list.sort_by(|a, b| sent_at(a).cmp(&sent_at(b)).then_with(|| a.id.cmp(&b.id)));
    let mut out = String::new();
    for (i, m) in list.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let mut rows = vec![
            vec!["message".into(), m.id.to_string()],
            vec!["from".into(), sender(m)],
            vec!["date".into(), sent_at(m).to_string()],
            vec!["subject".into(), m.subject.clone()],
        ];
        if let Some(r) = m.in_reply_to {
            rows.push(vec!["in reply to".into(), r.to_string()]);
        }
        // `inbox --all` shows acknowledged mail too.
        if let Some(t) = m.acked_at {
            rows.push(vec!["acknowledged".into(), t.to_string()]);
        }
        out.push_str(&table(&[], rows));
        match &m.body {
            Some(b) => out.push_str(&format!("\n{}", indent(b))),
            None => out.push_str(&format!("\n  (body unreadable: see KB file {})\n", m.file)),
        }
    }
    out
}

/// Who a message is from: `agency` for Agency's own notices.
pub fn sender(m: &MessageView) -> String {
    if m.from_agency {
        "agency".to_owned()
    } else {
        target(&m.from)
    }
}

fn sent_at(m: &MessageView) -> Timestamp {
    m.delivered_at.unwrap_or(m.deliver_at)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A UUID whose every hex digit is `n`'s (ids shown by 8 digits).
    fn uuid(n: u128) -> uuid::Uuid {
        uuid::Uuid::from_u128(n * 0x1111_1111_1111_1111_1111_1111_1111_1111)
    }

    fn brief(id: u128, title: &str, priority: i64) -> OutcomeBrief {
        OutcomeBrief {
            id: agency_core::OutcomeId(uuid(id)),
            title: title.into(),
            status: agency_core::OutcomeStatus::Open,
            priority,
            responsible: agency_core::HandlerId(uuid(0xa)),
            perpetual: false,
            process_inbox: false,
        }
    }

    #[test]
    fn outcome_tree_sorts_children_and_marks_repeats() {
        let (root, a, b, shared) = (
            brief(1, "Root", 0),
            brief(2, "A", 0),
            brief(3, "B", 5),
            brief(4, "Shared", 0),
        );
        let s = Subtree {
            root: root.id,
            edges: vec![
                (root.id, a.id),
                (root.id, b.id),
                (a.id, shared.id),
                (b.id, shared.id),
            ],
            outcomes: vec![root, a, shared, b],
            truncated: true,
        };
        // B has the higher priority, so it comes first and draws Shared;
        // under A, Shared is a marked repeat.
        assert_eq!(outcomes(&s), OUTCOME_TREE);
    }

    #[test]
    fn issue14_item12_handler_tree_shows_unacknowledged_mail() {
        let h = |id: u128, boss: Option<u128>, title: &str| HandlerView {
            id: agency_core::HandlerId(uuid(id)),
            boss: boss.map(|b| agency_core::HandlerId(uuid(b))),
            status: agency_core::status::HandlerStatus::Active,
            title: title.into(),
            state_doc: agency_core::FileId(uuid::Uuid::from_u128(100 + id)),
            audit_log: agency_core::FileId(uuid::Uuid::from_u128(200 + id)),
            inbox_depth: 0,
            live_agent: None,
            has_work: false,
            stalled: None,
            paused: None,
        };
        let text = handlers(&[
            h(3, Some(1), "child b"),
            h(1, None, "root"),
            h(2, Some(1), "child a"),
            h(4, Some(2), "grandchild"),
        ]);
        assert_eq!(text, HANDLER_TREE);
        assert!(!text.contains("UNACKED:"));
        // Unacknowledged mail is shown, with what it does.
        let text = handlers(&[HandlerView {
            inbox_depth: 3,
            ..h(1, None, "root")
        }]);
        assert!(text.contains("  3        no"), "{text}");
        assert!(text.ends_with(UNACKED_NOTE), "{text}");
    }

    #[test]
    fn fsck_lists_problems_and_unreferenced_blobs() {
        let r = FsckReport {
            versions_checked: 3,
            blobs_checked: 2,
            problems: vec![],
            unreferenced_blobs: vec![],
        };
        assert_eq!(
            fsck(&r),
            "checked 3 versions (2 distinct blobs): no problems\n"
        );
    }

    const OUTCOME_TREE: &str = "\
OUTCOME           STATUS  PRIORITY  RESPONSIBLE  TITLE
11111111          open    0         aaaaaaaa     Root
├── 33333333      open    5         aaaaaaaa     B
│   └── 44444444  open    0         aaaaaaaa     Shared
└── 22222222      open    0         aaaaaaaa     A
    └── 44444444  open    0         aaaaaaaa     Shared  (repeat)
(truncated: more outcomes exist; raise --limit)
";

    const HANDLER_TREE: &str = "\
HANDLER           STATUS  AGENT  UNACKED  WORK  TITLE
11111111          active  -      0        no    root
├── 22222222      active  -      0        no    child a
│   └── 44444444  active  -      0        no    grandchild
└── 33333333      active  -      0        no    child b
";
}
