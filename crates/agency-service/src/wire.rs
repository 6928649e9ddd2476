//! The service's answers as `agency-api` wire types: the daemon's REST
//! routes and the MCP tools convert through here, so a renamed field of a
//! view or a store row changes nothing on the wire. `From` where the
//! service owns the type; a function where it hands out a store row as it
//! is (those become views of their own when the service gets one).

use agency_api as api;
use agency_store::{AgentRow, StoreCounts};

use crate::FileContent;

impl From<&FileContent> for api::FileMeta {
    fn from(f: &FileContent) -> Self {
        api::FileMeta {
            id: f.id,
            kind: f.kind,
            description: f.description.clone(),
            version: f.version,
            hash: f.hash.to_string(),
            created_at: f.created_at,
        }
    }
}

/// `FileText` of a file's content, for display.
pub fn file_text(f: &FileContent) -> api::FileText {
    api::FileText::new(f.into(), &f.content)
}

/// The counts of `Service::counts`.
pub fn counts(c: &StoreCounts) -> api::Counts {
    api::Counts {
        handlers_active: c.handlers_active,
        outcomes_open: c.outcomes_open,
        agents_live: c.agents_live,
        files: c.files,
        handlers_stalled: c.handlers_stalled,
    }
}

/// One agent of `Service::agents_live` / `agents_recent`.
pub fn agent(a: &AgentRow) -> api::Agent {
    api::Agent {
        id: a.id,
        handler: a.handler,
        started_at: a.started_at,
        ended_at: a.ended_at,
        end_reason: a.end_reason.clone(),
    }
}

/// An outcome row as clients see it.
pub fn outcome(o: &agency_store::OutcomeRow) -> api::Outcome {
    api::Outcome {
        id: o.id,
        title: o.title.clone(),
        description: o.description.clone(),
        status: o.status,
        status_reason: o.status_reason.clone(),
        priority: o.priority,
        perpetual: o.perpetual,
        process_inbox: o.process_inbox,
        responsible: o.responsible,
        created_at: o.created_at,
        updated_at: o.updated_at,
    }
}

/// One line of an outcome's history.
pub fn outcome_event(e: agency_store::OutcomeEventRow) -> api::OutcomeEvent {
    api::OutcomeEvent {
        outcome: e.outcome,
        at: e.at,
        handler: e.handler,
        agent: e.agent,
        action: e.action.into(),
        detail: e.detail,
    }
}

/// One entry of a handler's audit log.
pub fn audit_entry(e: agency_store::LogEntryRow) -> api::AuditEntry {
    api::AuditEntry {
        handler: e.handler,
        at: e.at,
        agent: e.agent,
        summary: e.summary,
    }
}

/// A capability as clients see it.
pub fn capability(c: &agency_store::CapabilityRow) -> api::Capability {
    api::Capability {
        id: c.id,
        holder: c.holder,
        resource: c.resource.clone(),
        level: c.level,
        delegatable: c.delegatable,
        scope: c.scope,
        derived_from: c.derived_from,
        granted_by: c.granted_by,
        origin: c.origin,
        created_at: c.created_at,
        revoked_at: c.revoked_at,
    }
}

/// One read, write or creation in the KB's audit.
pub fn kb_audit(a: agency_store::KbAuditRow) -> api::KbAuditEntry {
    api::KbAuditEntry {
        file: a.file,
        at: a.at,
        handler: a.handler,
        agent: a.agent,
        action: a.action,
        version: a.version,
    }
}

/// An approval request as clients see it.
pub fn approval(a: agency_store::ApprovalRow) -> api::Approval {
    api::Approval {
        id: a.id,
        handler: a.handler,
        agent: a.agent,
        tool: a.tool,
        args_hash: a.args_hash,
        args: a.args,
        reason: a.reason,
        status: a.status,
        always: a.always,
        created_at: a.created_at,
        decided_at: a.decided_at,
        decided_by: a.decided_by,
        deny_reason: a.deny_reason,
        consumed_at: a.consumed_at,
    }
}

/// What `agency fsck` found.
pub fn fsck_report(r: agency_store::FsckReport) -> api::FsckReport {
    api::FsckReport {
        versions_checked: r.versions_checked,
        blobs_checked: r.blobs_checked,
        problems: r
            .problems
            .into_iter()
            .map(|p| match p {
                agency_store::FsckProblem::MissingBlob {
                    file,
                    version,
                    blob,
                } => api::FsckProblem::MissingBlob {
                    file,
                    version,
                    blob: blob.as_str().to_owned(),
                },
                agency_store::FsckProblem::CorruptBlob {
                    file,
                    version,
                    blob,
                    actual,
                } => api::FsckProblem::CorruptBlob {
                    file,
                    version,
                    blob: blob.as_str().to_owned(),
                    actual: actual.as_str().to_owned(),
                },
            })
            .collect(),
        unreferenced_blobs: r
            .unreferenced_blobs
            .iter()
            .map(|b| b.as_str().to_owned())
            .collect(),
    }
}

/// How many memories a handler has in each state.
pub fn memory_counts(c: agency_store::MemoryCounts) -> api::MemoryCounts {
    api::MemoryCounts {
        live: c.live,
        condensed: c.condensed,
        forgotten: c.forgotten,
        live_bytes: c.live_bytes,
    }
}

/// One change to a handler's memory.
pub fn memory_change(c: agency_store::MemoryChangeRow) -> api::MemoryChange {
    api::MemoryChange {
        memory: c.memory,
        change: c.change.into(),
        at: c.at,
    }
}

/// One condensation of a handler's memory.
pub fn compaction(c: agency_store::MemoryCompactionRow) -> api::Compaction {
    api::Compaction {
        id: c.id,
        handler: c.handler,
        requested_at: c.requested_at,
        done_at: c.done_at,
        undone_at: c.undone_at,
        status: c.status,
        summary: c.summary,
    }
}

/// The budget set on one handler.
pub fn budget(b: &agency_store::BudgetRow) -> api::Budget {
    api::Budget {
        handler: b.handler,
        limits: b.limits,
        set_at: b.set_at,
        carved_by: b.carved_by,
        paused: b.paused.clone(),
        warned: b.warned,
    }
}
