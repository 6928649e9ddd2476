//! The event log on the wire: what `GET /v1/events`, the SSE stream,
//! `agency watch --json` and the `events_read` MCP tool carry. The schema
//! is documented in `docs/events.md`; a field is added, never renamed or
//! removed, and an unknown kind reads back as [`EventKind::Other`].

use agency_core::{AgentId, HandlerId, OutcomeId, Timestamp};
use serde::{Deserialize, Serialize};

use crate::open_enum::open_enum;

open_enum! {
    /// What happened. Kinds are dotted: the part before the first dot is
    /// the kind's family (`agency watch --kind mail` follows every `mail.*`).
    pub enum EventKind {
        MailSent = "mail.sent",
        MailScheduled = "mail.scheduled",
        MailDelivered = "mail.delivered",
        MailAcked = "mail.acked",
        MailRefused = "mail.refused",
        MailDropped = "mail.dropped",
        OutcomeCreated = "outcome.created",
        OutcomeChanged = "outcome.changed",
        OutcomeDelegated = "outcome.delegated",
        HandlerCreated = "handler.created",
        HandlerStopped = "handler.stopped",
        HandlerStalled = "handler.stalled",
        HandlerKeepWarm = "handler.keep_warm",
        CapabilityGranted = "capability.granted",
        CapabilityRevoked = "capability.revoked",
        ApprovalRequested = "approval.requested",
        ApprovalDecided = "approval.decided",
        ApprovalConsumed = "approval.consumed",
        BudgetPaused = "budget.paused",
        BudgetResumed = "budget.resumed",
        AgentStarted = "agent.started",
        AgentEnded = "agent.ended",
        LeaseClaimed = "lease.claimed",
        LeaseReleased = "lease.released",
        LeaseLost = "lease.lost",
        KbWritten = "kb.written",
        ModelCallStarted = "model_call.started",
        ModelCallEnded = "model_call.ended",
        ToolCalled = "tool.called",
        ToolEnded = "tool.ended",
        AgencyAnswered = "agency.answered",
        ProblemRaised = "problem.raised",
        ProblemCleared = "problem.cleared",
        McpQuarantined = "mcp.quarantined",
        McpDecided = "mcp.decided",
        OrgApplied = "org.applied",
        OrgDown = "org.down",
        PipelineStarted = "pipeline.started",
        PipelineStageStarted = "pipeline.stage_started",
        PipelineStageEnded = "pipeline.stage_ended",
        PipelineEnded = "pipeline.ended",
        LessonProposed = "lesson.proposed",
        LessonAdmitted = "lesson.admitted",
        LessonRejected = "lesson.rejected",
        LessonRetired = "lesson.retired",
        LessonRolledBack = "lesson.rolled_back",
        LessonChanged = "lesson.changed",
        JudgeChecked = "judge.checked",
    }
}

impl EventKind {
    /// The family: the part before the first dot.
    pub fn family(&self) -> &str {
        let s = self.as_str();
        s.split_once('.').map_or(s, |(f, _)| f)
    }
}

/// One event of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The event's number: strictly increasing in commit order; pass the
    /// last one seen as `after` (or SSE `Last-Event-ID`) to resume.
    pub seq: i64,
    /// When it happened, milliseconds since the Unix epoch (UTC).
    pub at: Timestamp,
    pub kind: EventKind,
    /// The handler the event is about (whose area it belongs to); absent
    /// for an event about the organisation as a whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler: Option<HandlerId>,
    /// That handler's title (its root outcome's), as it is now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handler_title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<OutcomeId>,
    /// What happened, in one line. Text agents wrote (titles, subjects)
    /// appears in it: show it as text, never as markup.
    pub summary: String,
    /// The kind's own fields (see `docs/events.md`).
    pub data: serde_json::Value,
}

/// A page of the log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EventsPage {
    pub events: Vec<Event>,
    /// Where the next page starts: pass it as `after`. Past the last
    /// event read, or the log's end when nothing matched (so a filtered
    /// reader does not re-scan what it already passed).
    pub next: i64,
}
