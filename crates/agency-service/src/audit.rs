//! Handler audit logs (Agency appends an agent's activity summary; the
//! handler reads) and state documents (the handler's working memory, a KB
//! file it may write with compare-and-set).

use agency_core::{FileId, HandlerId, Level, Principal};
use agency_store::{HandlerRow, Tx};

use crate::Result;
use crate::access::kb_level;
use crate::error::ServiceError;
use crate::render::log;
use crate::render::{Author, render_audit_log_file};
use crate::service::{Caller, Service, authenticate};
use crate::views::{FileContent, VersionInfo};

impl Service {
    /// Append the calling agent's activity summary to its handler's audit
    /// log (a new version of the log file).
    pub fn audit_submit(&self, who: Principal, summary: &str) -> Result<()> {
        self.cfg.limits.check_reason("summary", summary)?;
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            let h = caller.require_handler("submit an audit summary")?.id;
            log(op, h, caller.agent(), summary.to_owned())?;
            render_audit_log_file(
                op,
                h,
                Author {
                    handler: Some(h),
                    agent: caller.agent(),
                },
            )
        })
    }

    /// The first page of a handler's audit log entries, oldest first: for
    /// whoever may read its audit log file (the handler itself, its boss, a
    /// boss it was handed over to at retirement, the user). `None` means the
    /// caller's own handler. Page through the rest with `audit_read_page`.
    pub fn audit_read(
        &self,
        who: Principal,
        handler: Option<HandlerId>,
    ) -> Result<Vec<agency_api::AuditEntry>> {
        let page = self.audit_read_page(who, handler, None, None)?;
        Ok(page.items.into_iter().map(|e| e.entry).collect())
    }

    /// Read a handler's state document (own, an underling's, a retired
    /// one's handed over to the caller, or any for the user). `None` means
    /// the caller's own handler.
    pub fn state_read(&self, who: Principal, handler: Option<HandlerId>) -> Result<FileContent> {
        let doc = self.state_doc_of(who, handler)?;
        self.kb_read(who, doc)
    }

    /// Replace the caller's state document, compare-and-set against the
    /// version and hash it last read.
    pub fn state_write(
        &self,
        who: Principal,
        content: &[u8],
        base_version: i64,
        base_hash: &str,
    ) -> Result<VersionInfo> {
        let doc = self.state_doc_of(who, None)?;
        self.kb_write(who, doc, content, base_version, base_hash)
    }

    fn state_doc_of(&self, who: Principal, handler: Option<HandlerId>) -> Result<FileId> {
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let id = caller.named_or_own(handler, "read the state document")?;
            readable_handler_file(tx, &caller, id, |h| h.state_doc)
        })
    }
}

/// One of handler `id`'s own files (state document or audit log), if the
/// caller may read it: the KB access rule decides, so a boss handed a
/// retired subtree's records reads them like its direct
/// underlings'. Anything else is `NotFound`, like a missing handler.
pub(crate) fn readable_handler_file(
    tx: &mut dyn Tx,
    caller: &Caller,
    id: HandlerId,
    which: fn(&HandlerRow) -> FileId,
) -> Result<FileId> {
    let missing = || ServiceError::not_found("handler", id);
    let h = tx.handler(id)?.ok_or_else(missing)?;
    let file = tx.file(which(&h))?.ok_or_else(missing)?;
    if kb_level(tx, caller, &file)?.is_some_and(|l| l >= Level::Read) {
        Ok(file.id)
    } else {
        Err(missing())
    }
}
