//! The service's answers as `agency-api` wire types: the daemon's REST
//! routes and the MCP tools convert through here, so a renamed field of a
//! view or a store row changes nothing on the wire. `From` where the
//! service owns the type; a function where it hands out a store row as it
//! is (those become views of their own when the service gets one).

use agency_api as api;
use agency_store::{AgentRow, StoreCounts};

use crate::{FileContent, PausedView};

impl From<&PausedView> for api::PausedView {
    fn from(p: &PausedView) -> Self {
        api::PausedView {
            by: p.by,
            reason: p.reason.clone(),
            since: p.since,
        }
    }
}

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
