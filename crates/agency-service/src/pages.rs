//! Listings bounded in rows and in bytes: one call never
//! allocates in proportion to an inbox, a history or a log.
//!
//! Each page holds at most the caller's `limit` rows (clamped to
//! `limits.max_list`) and about `limits.max_page_bytes` of variable-length
//! text; `next` is the cursor to pass as `after` for the rest (`None` at
//! the end). A row is never split: a page always holds at least one row,
//! so a single row larger than the budget still gets through. Message
//! bodies are inline only up to `limits.max_inline_bytes` and while the
//! page has room; a larger one comes back as a reference (`file`,
//! `body_size`, `body_truncated`) to read with `kb_read`, and its blob is
//! not even loaded.

use agency_core::{FileId, HandlerId, Level, MessageId, OutcomeId, Principal};

use crate::Result;
use crate::access::{file_at_level, visible_outcome};
use crate::error::ServiceError;
use crate::kb::version_info;
use crate::mail::view;
use crate::service::{Service, authenticate};
use crate::views::{HistoryEvent, LogEntry, MessageView, Page, VersionInfo};

/// A message and its body's (version, size), if its file is there.
type WithSize = (agency_store::MessageRow, Option<(i64, i64)>);

/// A message with the version and size of its body as of this snapshot:
/// the body is read at that version, so its size is the one the page's
/// budget was checked against.
fn with_size(tx: &mut dyn agency_store::Tx, m: agency_store::MessageRow) -> Result<WithSize> {
    let sized = match tx.file(m.file)? {
        Some(f) => tx
            .version(f.id, f.latest_version)?
            .map(|v| (v.version, v.size)),
        None => None,
    };
    Ok((m, sized))
}

/// Bytes counted for a row's fixed part (ids, times, JSON keys), so that a
/// page of rows with empty text is bounded too.
const ROW_BYTES: usize = 256;

impl Service {
    /// One page of the caller's inbox (delivered, unacknowledged messages,
    /// oldest first), starting after message `after`. Bodies up to the
    /// inline budget are included; larger ones are references.
    pub fn mail_inbox_page(
        &self,
        who: Principal,
        after: Option<MessageId>,
        limit: Option<usize>,
    ) -> Result<Page<MessageView, MessageId>> {
        let limit = self.cfg.limits.page(limit);
        let rows = self.read(|tx| {
            let caller = authenticate(tx, who)?;
            if let Some(a) = after
                && tx.message(a)?.is_none_or(|m| m.to != caller.party())
            {
                return Err(ServiceError::invalid(format!(
                    "failed to read the inbox after message {a}: it is not a message to you; start again without `after`"
                )));
            }
            let mut out = Vec::new();
            for m in tx.inbox_after(caller.party(), after, limit + 1)? {
                out.push(with_size(tx, m)?);
            }
            Ok(out)
        })?;
        let more = rows.len() > limit;
        let (items, more) = self.with_bodies(who, rows, limit, more);
        let next = if more {
            items.last().map(|m| m.id)
        } else {
            None
        };
        Ok(Page { items, next })
    }

    /// The user's `agency inbox --all`: the last `limit` messages delivered
    /// to the caller, acknowledged or not (replies to outside callers,
    /// which `agency conversations` shows and the inbox leaves out,
    /// included), newest first, with the bodies that fit like an inbox
    /// page's.
    pub fn mail_received(&self, who: Principal, limit: Option<usize>) -> Result<Vec<MessageView>> {
        let limit = self.cfg.limits.page(limit);
        let rows = self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let mut out = Vec::new();
            for m in tx.received(caller.party(), limit)? {
                out.push(with_size(tx, m)?);
            }
            Ok(out)
        })?;
        Ok(self.with_bodies(who, rows, limit, false).0)
    }

    /// Views of `rows` (at most `limit`) with the bodies that fit the
    /// page's byte budget; whether rows were left (`more`, or the budget
    /// ran out).
    fn with_bodies(
        &self,
        who: Principal,
        rows: Vec<WithSize>,
        limit: usize,
        mut more: bool,
    ) -> (Vec<MessageView>, bool) {
        let lim = &self.cfg.limits;
        let mut budget = lim.max_page_bytes;
        let mut items: Vec<MessageView> = Vec::new();
        for (m, sized) in rows.into_iter().take(limit) {
            let envelope = ROW_BYTES + m.subject.len();
            if !items.is_empty() && envelope > budget {
                more = true;
                break;
            }
            budget = budget.saturating_sub(envelope);
            let size = sized.map(|(_, s)| usize::try_from(s).unwrap_or(usize::MAX));
            let fits = size.is_some_and(|s| s <= lim.max_inline_bytes && s <= budget);
            let body = match sized {
                // Access-checked, and recorded in the body's access log.
                Some((version, _)) if fits => self
                    .kb_read_version(who, m.file, version)
                    .ok()
                    .map(|c| c.text()),
                _ => None,
            };
            budget = budget.saturating_sub(body.as_ref().map_or(0, String::len));
            let mut v = view(m, body);
            v.body_size = sized.map(|(_, s)| s);
            v.body_truncated = size.is_some() && !fits;
            items.push(v);
        }
        (items, more)
    }

    /// One page of the messages the caller sent, newest first, starting
    /// after (older than) message `after`. No bodies.
    pub fn mail_sent_page(
        &self,
        who: Principal,
        after: Option<MessageId>,
        limit: Option<usize>,
    ) -> Result<Page<MessageView, MessageId>> {
        let limit = self.cfg.limits.page(limit);
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            if let Some(a) = after
                && tx.message(a)?.is_none_or(|m| m.from != caller.party())
            {
                return Err(ServiceError::invalid(format!(
                    "failed to list sent mail after message {a}: it is not a message you sent; start again without `after`"
                )));
            }
            let rows = tx.outbox_before(caller.party(), after, limit + 1)?;
            let more = rows.len() > limit;
            let items: Vec<MessageView> = rows
                .into_iter()
                .take(limit)
                .map(|m| view(m, None))
                .collect();
            let next = if more { items.last().map(|m| m.id) } else { None };
            Ok(Page { items, next })
        })
    }

    /// One page of a file's versions, oldest first, after version `after`.
    pub fn kb_history_page(
        &self,
        who: Principal,
        file: FileId,
        after: Option<i64>,
        limit: Option<usize>,
    ) -> Result<Page<VersionInfo, i64>> {
        let limit = self.cfg.limits.page(limit);
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            file_at_level(tx, &caller, file, Level::Read, "view the history of")?;
            let rows = tx.versions_after(file, after, limit + 1)?;
            let more = rows.len() > limit;
            let items: Vec<VersionInfo> = rows.into_iter().take(limit).map(version_info).collect();
            let next = if more {
                items.last().map(|v| v.version)
            } else {
                None
            };
            Ok(Page { items, next })
        })
    }

    /// One page of a handler's audit log, oldest first, after entry `after`
    /// (a sequence number from an earlier page): for whoever may read the
    /// log file (the handler, its boss, a boss it was handed over to at
    /// retirement, the user). `None` means the caller's own handler.
    pub fn audit_read_page(
        &self,
        who: Principal,
        handler: Option<HandlerId>,
        after: Option<i64>,
        limit: Option<usize>,
    ) -> Result<Page<LogEntry, i64>> {
        let limit = self.cfg.limits.page(limit);
        let budget = self.cfg.limits.max_page_bytes;
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let id = caller.named_or_own(handler, "read the audit log")?;
            // Whoever may read the log file may page through its entries.
            crate::audit::readable_handler_file(tx, &caller, id, |h| h.audit_log)?;
            let rows = tx.log_entries_after(id, after, limit + 1)?;
            let (items, next) = bounded(
                rows,
                limit,
                budget,
                |(_, e)| ROW_BYTES + e.summary.len(),
                |(seq, _)| *seq,
            );
            let items = items
                .into_iter()
                .map(|(seq, entry)| LogEntry {
                    seq,
                    entry: crate::wire::audit_entry(entry),
                })
                .collect();
            Ok(Page { items, next })
        })
    }

    /// One page of an outcome's history, oldest first, after event `after`
    /// (a sequence number from an earlier page), for callers who may see
    /// the outcome.
    pub fn outcome_history(
        &self,
        who: Principal,
        id: OutcomeId,
        after: Option<i64>,
        limit: Option<usize>,
    ) -> Result<Page<HistoryEvent, i64>> {
        let limit = self.cfg.limits.page(limit);
        let budget = self.cfg.limits.max_page_bytes;
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            visible_outcome(tx, &caller, id)?;
            let rows = tx.outcome_events_after(id, after, limit + 1)?;
            let (items, next) = bounded(
                rows,
                limit,
                budget,
                |(_, e)| ROW_BYTES + e.action.len() + e.detail.len(),
                |(seq, _)| *seq,
            );
            let items = items
                .into_iter()
                .map(|(seq, event)| HistoryEvent {
                    seq,
                    event: crate::wire::outcome_event(event),
                })
                .collect();
            Ok(Page { items, next })
        })
    }
}

/// Keep rows while they fit `limit` rows (of `rows`, which holds up to
/// `limit + 1` to tell whether more follow) and `budget` bytes, at least
/// one; the cursor of the last kept row when anything was left out.
pub(crate) fn bounded<T, C>(
    rows: Vec<T>,
    limit: usize,
    budget: usize,
    bytes: impl Fn(&T) -> usize,
    cursor: impl Fn(&T) -> C,
) -> (Vec<T>, Option<C>) {
    let mut more = rows.len() > limit;
    let mut used = 0usize;
    let mut items = Vec::new();
    for r in rows.into_iter().take(limit) {
        let b = bytes(&r);
        if !items.is_empty() && used.saturating_add(b) > budget {
            more = true;
            break;
        }
        used = used.saturating_add(b);
        items.push(r);
    }
    let next = if more {
        items.last().map(&cursor)
    } else {
        None
    };
    (items, next)
}
