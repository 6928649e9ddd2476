//! The statuses and kinds of the domain's records, with the names they
//! have in the store, on the wire and in the CLI (`as_str`, `parse`, serde
//! `snake_case`): one enum each, shared by the store and `agency-api`.

use serde::{Deserialize, Serialize};

/// Where a message from outside stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrgMessageStatus {
    /// Delivered to the executive handler; no reply yet.
    Pending,
    /// The executive handler replied (`reply_text`).
    Answered,
    /// It will never be answered (kept for the store's format; nothing
    /// sets it yet).
    Failed,
}

impl OrgMessageStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OrgMessageStatus::Pending => "pending",
            OrgMessageStatus::Answered => "answered",
            OrgMessageStatus::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<OrgMessageStatus> {
        Some(match s {
            "pending" => OrgMessageStatus::Pending,
            "answered" => OrgMessageStatus::Answered,
            "failed" => OrgMessageStatus::Failed,
            _ => return None,
        })
    }
}

/// Whether an organisation's agent is stood up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrgAgentStatus {
    Active,
    Retired,
}

impl OrgAgentStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            OrgAgentStatus::Active => "active",
            OrgAgentStatus::Retired => "retired",
        }
    }

    pub fn parse(s: &str) -> Option<OrgAgentStatus> {
        [OrgAgentStatus::Active, OrgAgentStatus::Retired]
            .into_iter()
            .find(|v| v.as_str() == s)
    }
}

/// Where a change stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PinChangeStatus {
    /// Waiting for the user; the tool is quarantined meanwhile.
    Pending,
    /// The user approved it: its definition is the pinned one (or was,
    /// until a later approval).
    Approved,
    /// The user refused it: the tool stays quarantined while the server
    /// presents this definition.
    Rejected,
    /// Another change of the same tool was approved first.
    Superseded,
}

impl PinChangeStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            PinChangeStatus::Pending => "pending",
            PinChangeStatus::Approved => "approved",
            PinChangeStatus::Rejected => "rejected",
            PinChangeStatus::Superseded => "superseded",
        }
    }

    pub fn parse(s: &str) -> Option<PinChangeStatus> {
        Some(match s {
            "pending" => PinChangeStatus::Pending,
            "approved" => PinChangeStatus::Approved,
            "rejected" => PinChangeStatus::Rejected,
            "superseded" => PinChangeStatus::Superseded,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KbAction {
    Create,
    Read,
    Write,
}

impl KbAction {
    pub fn as_str(self) -> &'static str {
        match self {
            KbAction::Create => "create",
            KbAction::Read => "read",
            KbAction::Write => "write",
        }
    }

    pub fn parse(s: &str) -> Option<KbAction> {
        match s {
            "create" => Some(KbAction::Create),
            "read" => Some(KbAction::Read),
            "write" => Some(KbAction::Write),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HandlerStatus {
    Active,
    /// Stopped by force-stop or retired when its root outcome finished; its
    /// state is kept for review.
    Deactivated,
}

impl HandlerStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            HandlerStatus::Active => "active",
            HandlerStatus::Deactivated => "deactivated",
        }
    }

    pub fn parse(s: &str) -> Option<HandlerStatus> {
        match s {
            "active" => Some(HandlerStatus::Active),
            "deactivated" => Some(HandlerStatus::Deactivated),
            _ => None,
        }
    }
}

/// How a capability came to be; kept for explanation and audit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapOrigin {
    /// Granted by the user (`derived_from` is `None`).
    User,
    /// Granted by a boss with `grant` or as part of `delegate`.
    Grant,
    /// Held by the handler that created the KB file.
    Creator,
    /// Read on a file attached to a delivered message.
    Mail,
    /// Made by Agency from the handler tree (mail between boss and underling).
    System,
    /// Passed to the boss that retired a subtree: its handlers' work product,
    /// scoped to the boss's own root.
    Handover,
}

impl CapOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            CapOrigin::User => "user",
            CapOrigin::Grant => "grant",
            CapOrigin::Creator => "creator",
            CapOrigin::Mail => "mail",
            CapOrigin::System => "system",
            CapOrigin::Handover => "handover",
        }
    }

    pub fn parse(s: &str) -> Option<CapOrigin> {
        [
            CapOrigin::User,
            CapOrigin::Grant,
            CapOrigin::Creator,
            CapOrigin::Mail,
            CapOrigin::System,
            CapOrigin::Handover,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
    }
}

/// Where an approval request stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalStatus {
    /// Waiting for the user.
    Pending,
    /// Approved and not used yet (or, with `always`, usable every time).
    Approved,
    /// Refused by the user.
    Denied,
    /// Approved once and used by the call it allowed.
    Consumed,
}

impl ApprovalStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalStatus::Pending => "pending",
            ApprovalStatus::Approved => "approved",
            ApprovalStatus::Denied => "denied",
            ApprovalStatus::Consumed => "consumed",
        }
    }

    pub fn parse(s: &str) -> Option<ApprovalStatus> {
        [
            ApprovalStatus::Pending,
            ApprovalStatus::Approved,
            ApprovalStatus::Denied,
            ApprovalStatus::Consumed,
        ]
        .into_iter()
        .find(|o| o.as_str() == s)
    }
}

/// Where a memory stands. Memories are never deleted by an operation:
/// forgetting and condensing mark them, so that history stays readable by
/// the user and a condensation can be undone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryState {
    /// Searched and recalled.
    Live,
    /// Forgotten by its handler's agent or the user.
    Forgotten,
    /// Replaced by a summary memory (`condensed_into`); kept as history.
    Condensed,
}

impl MemoryState {
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryState::Live => "live",
            MemoryState::Forgotten => "forgotten",
            MemoryState::Condensed => "condensed",
        }
    }

    pub fn parse(s: &str) -> Option<MemoryState> {
        Some(match s {
            "live" => MemoryState::Live,
            "forgotten" => MemoryState::Forgotten,
            "condensed" => MemoryState::Condensed,
            _ => return None,
        })
    }
}

/// Where a condensation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CompactionStatus {
    /// Agency asked the handler's next agent to condense; not done yet.
    Requested,
    /// An agent condensed memories into a summary (`summary`).
    Done,
    /// The user undid it: the summary is forgotten, the originals live.
    Undone,
}

impl CompactionStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            CompactionStatus::Requested => "requested",
            CompactionStatus::Done => "done",
            CompactionStatus::Undone => "undone",
        }
    }

    pub fn parse(s: &str) -> Option<CompactionStatus> {
        Some(match s {
            "requested" => CompactionStatus::Requested,
            "done" => CompactionStatus::Done,
            "undone" => CompactionStatus::Undone,
            _ => return None,
        })
    }
}

/// Where a pipeline run is. `Running`, `Waiting` and `Paused`
/// are unfinished: the daemon's engine carries them on, also after a
/// restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PipelineRunStatus {
    /// A stage runs or is next.
    Running,
    /// A stage waits for the user (an approval).
    Waiting,
    /// A budget of the run's subtree was reached; it goes on when raised.
    Paused,
    /// Every stage ended `ok` or `repaired`.
    Done,
    /// A stage ended in a failure; the run stopped there.
    Failed,
    /// The user stopped it.
    Stopped,
}

impl PipelineRunStatus {
    pub const ALL: [PipelineRunStatus; 6] = [
        PipelineRunStatus::Running,
        PipelineRunStatus::Waiting,
        PipelineRunStatus::Paused,
        PipelineRunStatus::Done,
        PipelineRunStatus::Failed,
        PipelineRunStatus::Stopped,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            PipelineRunStatus::Running => "running",
            PipelineRunStatus::Waiting => "waiting",
            PipelineRunStatus::Paused => "paused",
            PipelineRunStatus::Done => "done",
            PipelineRunStatus::Failed => "failed",
            PipelineRunStatus::Stopped => "stopped",
        }
    }

    pub fn parse(s: &str) -> Option<PipelineRunStatus> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Whether the engine still has something to do for it.
    pub fn is_unfinished(self) -> bool {
        matches!(
            self,
            PipelineRunStatus::Running | PipelineRunStatus::Waiting | PipelineRunStatus::Paused
        )
    }
}

/// Where one stage of a pipeline run is: `pending` and `running`, then one
/// of its terminal states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StageStatus {
    Pending,
    Running,
    /// The first answer validated.
    Ok,
    /// An answer validated after a repair parse, a re-ask or escalation.
    Repaired,
    /// No answer validated within the ladder.
    FailedValidation,
    /// The model could not be reached (5xx, 429, timeouts) after backoff.
    FailedInfra,
    /// The policy or SafetyGuard refused.
    BlockedPolicy,
    /// A budget was reached.
    BudgetExhausted,
}

impl StageStatus {
    pub const ALL: [StageStatus; 8] = [
        StageStatus::Pending,
        StageStatus::Running,
        StageStatus::Ok,
        StageStatus::Repaired,
        StageStatus::FailedValidation,
        StageStatus::FailedInfra,
        StageStatus::BlockedPolicy,
        StageStatus::BudgetExhausted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            StageStatus::Pending => "pending",
            StageStatus::Running => "running",
            StageStatus::Ok => "ok",
            StageStatus::Repaired => "repaired",
            StageStatus::FailedValidation => "failed_validation",
            StageStatus::FailedInfra => "failed_infra",
            StageStatus::BlockedPolicy => "blocked_policy",
            StageStatus::BudgetExhausted => "budget_exhausted",
        }
    }

    pub fn parse(s: &str) -> Option<StageStatus> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    /// Whether the stage produced its artifact.
    pub fn succeeded(self) -> bool {
        matches!(self, StageStatus::Ok | StageStatus::Repaired)
    }

    /// Whether the stage ended (successfully or not).
    pub fn is_terminal(self) -> bool {
        !matches!(self, StageStatus::Pending | StageStatus::Running)
    }
}

/// Where a lesson a pipeline learned is. Only `admitted` lessons are
/// recalled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LessonState {
    /// Proposed by a Learner; waits for more evidence.
    Proposed,
    /// Its evidence sufficed; the replay gate re-runs the stages it
    /// would affect with and without it.
    Replaying,
    /// Passed every check, and its scope (a tool policy or a permission)
    /// needs the user's approval as well.
    AwaitingUser,
    /// Recalled by later runs.
    Admitted,
    /// Refused, with the reason; reconsidered only on new evidence.
    Rejected,
    /// No longer recalled (deprecated, harmful, or by the user).
    Retired,
    /// Its admission was undone by the user (`agency lessons rollback`).
    RolledBack,
}

impl LessonState {
    pub const ALL: [LessonState; 7] = [
        LessonState::Proposed,
        LessonState::Replaying,
        LessonState::AwaitingUser,
        LessonState::Admitted,
        LessonState::Rejected,
        LessonState::Retired,
        LessonState::RolledBack,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            LessonState::Proposed => "proposed",
            LessonState::Replaying => "replaying",
            LessonState::AwaitingUser => "awaiting_user",
            LessonState::Admitted => "admitted",
            LessonState::Rejected => "rejected",
            LessonState::Retired => "retired",
            LessonState::RolledBack => "rolled_back",
        }
    }

    pub fn parse(s: &str) -> Option<LessonState> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }
}
