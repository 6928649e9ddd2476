//! Domain events, published after the transaction that caused them has
//! committed. The daemon's scheduler reacts to these instead of scanning.

use agency_core::policy::ApprovalId;
use agency_core::{
    AgentId, CapabilityId, FileId, HandlerId, MailTarget, MessageId, OrgMessageId, OutcomeId,
    OutcomeStatus, Resource,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Event {
    MessageDelivered {
        message: MessageId,
        to: MailTarget,
    },
    /// A deferred message was stored; it falls due at `deliver_at`.
    MailScheduled {
        message: MessageId,
        deliver_at: agency_core::Timestamp,
    },
    /// Also sent when an outcome is created (as `open`).
    OutcomeStatusChanged {
        outcome: OutcomeId,
        responsible: HandlerId,
        status: OutcomeStatus,
    },
    HandlerCreated {
        handler: HandlerId,
        boss: Option<HandlerId>,
    },
    /// The handler was deactivated; `agents` are the live agents the
    /// transaction ended, whose processes must now be killed.
    HandlerStopped {
        handler: HandlerId,
        agents: Vec<AgentId>,
    },
    CapabilityGranted {
        capability: CapabilityId,
        holder: HandlerId,
        resource: Resource,
    },
    CapabilityRevoked {
        capability: CapabilityId,
        holder: HandlerId,
        resource: Resource,
    },
    /// A KB file got a new version written by a caller (progress signal).
    KbWritten {
        file: FileId,
        by: Option<HandlerId>,
        /// The file's description, for the log's summary.
        description: String,
    },
    AgentStarted {
        agent: AgentId,
        handler: HandlerId,
    },
    AgentEnded {
        agent: AgentId,
        handler: HandlerId,
    },
    /// A paused budget was lifted (limits set or `agency resume`): pending
    /// work in `handler`'s subtree may run again.
    BudgetResumed {
        handler: HandlerId,
    },
    /// The user approved or denied `handler`'s approval request:
    /// its agent may retry the call, or must be told it may not. The
    /// notice is mailed in the same transaction; this event tells the
    /// supervisor to start the handler's agent now, past any backoff.
    ApprovalDecided {
        approval: ApprovalId,
        handler: HandlerId,
        approved: bool,
    },
    /// The user changed a handler's keep-warm setting (`agency
    /// keep-warm`): a parked agent the new setting no longer keeps warm
    /// is released by the supervisor.
    KeepWarmChanged {
        handler: HandlerId,
    },
    /// An agency's executive handler answered a message from outside
    /// (`POST /v1/agency/messages`): whoever waits for it may read it.
    OrgMessageAnswered {
        message: OrgMessageId,
        agency: String,
    },
    /// A pipeline run has a stage to run: started, or resumed by the user.
    /// The daemon's engine drives it.
    PipelineRunReady {
        run: HandlerId,
    },
    /// A lesson waits for its replay gate; the daemon's engine runs it.
    LessonReplayReady {
        lesson: agency_core::LessonId,
    },
}
