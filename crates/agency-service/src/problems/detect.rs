//! What the log's recent events say, kept between ticks: the tool calls
//! each agent made in a row and the mail refused for lack of a connection.
//! Pure bookkeeping over events; `mod.rs` reads the store and decides.

use std::collections::HashMap;

use agency_api::{EventKind, ProblemKind};
use agency_core::{AgentId, HandlerId, Timestamp};
use agency_store::EventRow;

/// The same tool with the same arguments this many times in a row by one
/// agent is a loop.
pub(crate) const LOOP_CALLS: u32 = 3;

/// A condition that holds now: a problem while it keeps holding.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Signal {
    pub kind: ProblemKind,
    /// One episode per key (`kind:subject`).
    pub key: String,
    pub handler: Option<HandlerId>,
    pub agent: Option<AgentId>,
    pub summary: String,
    pub detail: serde_json::Value,
}

/// One agent's latest run of identical calls.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Run {
    handler: Option<HandlerId>,
    tool: String,
    digest: String,
    count: u32,
}

/// What the detector remembers between ticks.
#[derive(Debug, Default)]
pub(crate) struct Tracker {
    /// The last event read; `None` before the first tick.
    pub cursor: Option<i64>,
    runs: HashMap<AgentId, Run>,
    /// Refusals by key, with when the latest happened.
    refused: HashMap<String, (Signal, Timestamp)>,
}

impl Tracker {
    /// Take in events read after the cursor, in order.
    pub fn observe(&mut self, events: &[EventRow]) {
        for r in events {
            let e = &r.event;
            match EventKind::from(e.kind.as_str()) {
                EventKind::ToolCalled => {
                    let Some(agent) = e.agent else { continue };
                    let data: serde_json::Value = serde_json::from_str(&e.data).unwrap_or_default();
                    let tool = data["tool"].as_str().unwrap_or_default().to_owned();
                    let digest = data["args_digest"].as_str().unwrap_or_default().to_owned();
                    let run = self.runs.entry(agent).or_insert_with(|| Run {
                        handler: e.handler,
                        tool: String::new(),
                        digest: String::new(),
                        count: 0,
                    });
                    if run.tool == tool && run.digest == digest {
                        run.count += 1;
                    } else {
                        *run = Run {
                            handler: e.handler,
                            tool,
                            digest,
                            count: 1,
                        };
                    }
                }
                EventKind::AgentEnded => {
                    if let Some(a) = e.agent {
                        self.runs.remove(&a);
                    }
                }
                EventKind::MailRefused => {
                    let data: serde_json::Value = serde_json::from_str(&e.data).unwrap_or_default();
                    let to = data["to"].to_string();
                    let from = e.handler.map(|h| h.to_string()).unwrap_or_default();
                    let key = format!("mail_refused:{from}:{to}");
                    let signal = Signal {
                        kind: ProblemKind::MailRefused,
                        key: key.clone(),
                        handler: e.handler,
                        agent: e.agent,
                        summary: format!(
                            "{} — grant a connection (capability mail:…) if it should reach them, or tell it whom to write to",
                            e.summary
                        ),
                        detail: data,
                    };
                    self.refused.insert(key, (signal, e.at));
                }
                _ => {}
            }
        }
    }

    /// Agents whose latest calls are one call repeated at least
    /// [`LOOP_CALLS`] times.
    pub fn loops(&self) -> Vec<Signal> {
        let mut out: Vec<Signal> = self
            .runs
            .iter()
            .filter(|(_, r)| r.count >= LOOP_CALLS)
            .map(|(agent, r)| Signal {
                kind: ProblemKind::ToolLoop,
                key: format!("tool_loop:{agent}:{}:{}", r.tool, r.digest),
                handler: r.handler,
                agent: Some(*agent),
                summary: format!(
                    "agent {} called {} with the same arguments {} times in a row — look at its transcript; send guidance or stop it",
                    short(agent),
                    r.tool,
                    r.count
                ),
                detail: serde_json::json!({
                    "tool": r.tool, "args_digest": r.digest, "calls": r.count,
                }),
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }

    /// Refusals that happened within `window` before `now` (older ones
    /// are forgotten: their episode ends).
    pub fn refusals(&mut self, now: Timestamp, window: i64) -> Vec<Signal> {
        self.refused
            .retain(|_, (_, at)| now.0.saturating_sub(at.0) <= window);
        let mut out: Vec<Signal> = self.refused.values().map(|(s, _)| s.clone()).collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }
}

pub(crate) fn short(id: &impl std::fmt::Display) -> String {
    id.to_string().chars().take(8).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use agency_store::NewEventRow;

    use super::*;

    fn tool(seq: i64, agent: u128, name: &str, digest: &str) -> EventRow {
        EventRow {
            seq,
            event: NewEventRow {
                at: Timestamp(seq),
                kind: "tool.called".into(),
                handler: None,
                agent: Some(AgentId(uuid::Uuid::from_u128(agent))),
                outcome: None,
                summary: String::new(),
                data: serde_json::json!({"tool": name, "args_digest": digest}).to_string(),
            },
            handler_title: None,
        }
    }

    #[test]
    fn three_identical_calls_in_a_row_are_a_loop_and_anything_else_breaks_it() {
        let cases: &[(&[(&str, &str)], bool)] = &[
            (&[("a", "1"), ("a", "1"), ("a", "1")], true),
            (&[("a", "1"), ("a", "1")], false),
            (&[("a", "1"), ("a", "2"), ("a", "1")], false),
            (&[("a", "1"), ("b", "1"), ("a", "1"), ("a", "1")], false),
            (&[("b", "1"), ("a", "1"), ("a", "1"), ("a", "1")], true),
            (&[("a", "1"), ("a", "1"), ("a", "1"), ("a", "2")], false),
        ];
        for (calls, looping) in cases {
            let mut t = Tracker::default();
            let events: Vec<EventRow> = calls
                .iter()
                .enumerate()
                .map(|(i, (n, d))| tool(i as i64, 1, n, d))
                .collect();
            t.observe(&events);
            assert_eq!(!t.loops().is_empty(), *looping, "{calls:?}");
        }
    }

    #[test]
    fn agents_are_counted_apart_and_an_ended_agent_is_forgotten() {
        let mut t = Tracker::default();
        // Interleaved: each agent made the same call 3 times in a row.
        t.observe(&[
            tool(1, 1, "a", "1"),
            tool(2, 2, "a", "1"),
            tool(3, 1, "a", "1"),
            tool(4, 2, "a", "1"),
            tool(5, 1, "a", "1"),
        ]);
        assert_eq!(t.loops().len(), 1, "agent 2 made two");
        let mut ended = tool(6, 1, "", "");
        ended.event.kind = "agent.ended".into();
        t.observe(&[ended]);
        assert!(t.loops().is_empty());
    }
}
