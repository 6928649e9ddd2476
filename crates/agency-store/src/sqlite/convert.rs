//! Conversions between domain values and SQLite columns, the decoding of
//! each row type, and the mapping of rusqlite errors onto [`StoreError`].
//!
//! Storage conventions: ids are lowercase hyphenated UUID text (their
//! `Display`), timestamps INTEGER milliseconds, enums their `as_str()` text,
//! levels INTEGER via `Level::as_i64`, a mail party `"user"` or a handler
//! UUID, and a `None` handler (the user) NULL.

use std::fmt::Display;
use std::str::FromStr;

use agency_core::access::FileKind;
use agency_core::{CapabilityId, Level, MailTarget, OutcomeStatus, Resource, Timestamp};
use rusqlite::types::FromSql;
use rusqlite::{Connection, ErrorCode, Params, Row, ffi};

use crate::blob::BlobId;
use crate::error::StoreError;
use crate::model::*;

pub(crate) type R<T> = Result<T, StoreError>;

/// Map a rusqlite error met while doing `op`. Unique and primary-key
/// violations become [`StoreError::Unique`] so callers can tell "already
/// exists" from a failing database.
pub(crate) fn db_error(op: String, err: rusqlite::Error) -> StoreError {
    if let rusqlite::Error::SqliteFailure(e, msg) = &err
        && e.code == ErrorCode::ConstraintViolation
        && matches!(
            e.extended_code,
            ffi::SQLITE_CONSTRAINT_UNIQUE | ffi::SQLITE_CONSTRAINT_PRIMARYKEY
        )
    {
        let message = msg.clone().unwrap_or_else(|| e.to_string());
        return StoreError::Unique { op, message };
    }
    StoreError::backend(op, err)
}

/// Attach the operation being attempted to a rusqlite result. The op is
/// built lazily: it is only needed on the error path.
pub(crate) trait Ctx<T> {
    fn ctx(self, op: impl FnOnce() -> String) -> R<T>;
}

impl<T> Ctx<T> for rusqlite::Result<T> {
    fn ctx(self, op: impl FnOnce() -> String) -> R<T> {
        self.map_err(|e| db_error(op(), e))
    }
}

/// Run a statement (cached) and return the number of rows it changed.
pub(crate) fn execute(
    c: &Connection,
    sql: &str,
    params: impl Params,
    op: impl Fn() -> String,
) -> R<usize> {
    let mut stmt = c.prepare_cached(sql).ctx(&op)?;
    stmt.execute(params).ctx(&op)
}

/// Run a query (cached) and decode every row.
pub(crate) fn query_rows<T>(
    c: &Connection,
    sql: &str,
    params: impl Params,
    op: impl Fn() -> String,
    mut decode: impl FnMut(&Row<'_>) -> R<T>,
) -> R<Vec<T>> {
    let mut stmt = c.prepare_cached(sql).ctx(&op)?;
    let mut rows = stmt.query(params).ctx(&op)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().ctx(&op)? {
        out.push(decode(row)?);
    }
    Ok(out)
}

/// Run a query (cached) and decode its first row, if any.
pub(crate) fn query_opt<T>(
    c: &Connection,
    sql: &str,
    params: impl Params,
    op: impl Fn() -> String,
    decode: impl FnOnce(&Row<'_>) -> R<T>,
) -> R<Option<T>> {
    let mut stmt = c.prepare_cached(sql).ctx(&op)?;
    let mut rows = stmt.query(params).ctx(&op)?;
    match rows.next().ctx(&op)? {
        Some(row) => decode(row).map(Some),
        None => Ok(None),
    }
}

/// Run a query (cached) that always yields exactly one row with one value
/// (`SELECT EXISTS …`, `SELECT COUNT(*) …`).
pub(crate) fn query_value<T: FromSql>(
    c: &Connection,
    sql: &str,
    params: impl Params,
    op: impl Fn() -> String,
) -> R<T> {
    let mut stmt = c.prepare_cached(sql).ctx(&op)?;
    stmt.query_row(params, |r| r.get(0)).ctx(&op)
}

/// An UPDATE of one named row that matched nothing means the row is missing;
/// say so instead of silently doing nothing.
pub(crate) fn require_row(changed: usize, op: impl FnOnce() -> String) -> R<()> {
    if changed == 0 {
        return Err(StoreError::backend(op(), "no such row"));
    }
    Ok(())
}

/// A `LIMIT` parameter. SQLite limits are signed; anything beyond `i64::MAX`
/// is as good as unlimited.
pub(crate) fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// An optional id as a nullable TEXT column.
pub(crate) fn opt_text(id: Option<impl Display>) -> Option<String> {
    id.map(|i| i.to_string())
}

/// A mail party as stored: `"user"` or the handler's UUID.
pub(crate) fn target_text(t: MailTarget) -> String {
    match t {
        MailTarget::User => "user".to_owned(),
        MailTarget::Handler(h) => h.to_string(),
    }
}

/// A JSON array of ids or numbers for `json_each(?)`, which lets one cached
/// statement take a list of any length. Only used for values whose text
/// needs no JSON escaping (UUIDs, integers).
pub(crate) fn json_list<T: Display>(items: impl IntoIterator<Item = T>, quoted: bool) -> String {
    let q = if quoted { "\"" } else { "" };
    let inner: Vec<String> = items.into_iter().map(|i| format!("{q}{i}{q}")).collect();
    format!("[{}]", inner.join(","))
}

// ---- column decoders ------------------------------------------------------
//
// A value that does not decode means the database holds something this build
// never wrote: report it as corrupt, naming the column.

pub(crate) fn col<T: FromSql>(row: &Row<'_>, i: usize, what: &'static str) -> R<T> {
    row.get(i)
        .map_err(|e| StoreError::corrupt(what, e.to_string()))
}

pub(crate) fn col_id<T: FromStr>(row: &Row<'_>, i: usize, what: &'static str) -> R<T> {
    let s: String = col(row, i, what)?;
    s.parse().map_err(|_| StoreError::corrupt(what, s))
}

pub(crate) fn col_opt_id<T: FromStr>(row: &Row<'_>, i: usize, what: &'static str) -> R<Option<T>> {
    let s: Option<String> = col(row, i, what)?;
    s.map(|s| s.parse().map_err(|_| StoreError::corrupt(what, s)))
        .transpose()
}

pub(crate) fn col_ts(row: &Row<'_>, i: usize, what: &'static str) -> R<Timestamp> {
    col(row, i, what).map(Timestamp)
}

pub(crate) fn col_opt_ts(row: &Row<'_>, i: usize, what: &'static str) -> R<Option<Timestamp>> {
    Ok(col::<Option<i64>>(row, i, what)?.map(Timestamp))
}

pub(crate) fn col_level(row: &Row<'_>, i: usize, what: &'static str) -> R<Level> {
    let v: i64 = col(row, i, what)?;
    Level::from_i64(v).ok_or_else(|| StoreError::corrupt(what, v.to_string()))
}

pub(crate) fn col_opt_level(row: &Row<'_>, i: usize, what: &'static str) -> R<Option<Level>> {
    let v: Option<i64> = col(row, i, what)?;
    v.map(|v| Level::from_i64(v).ok_or_else(|| StoreError::corrupt(what, v.to_string())))
        .transpose()
}

pub(crate) fn col_target(row: &Row<'_>, i: usize, what: &'static str) -> R<MailTarget> {
    let s: String = col(row, i, what)?;
    if s == "user" {
        return Ok(MailTarget::User);
    }
    s.parse()
        .map(MailTarget::Handler)
        .map_err(|_| StoreError::corrupt(what, s))
}

/// Decode an enum column with the type's own parser.
fn col_enum<T>(
    row: &Row<'_>,
    i: usize,
    what: &'static str,
    parse: impl FnOnce(&str) -> Option<T>,
) -> R<T> {
    let s: String = col(row, i, what)?;
    parse(&s).ok_or_else(|| StoreError::corrupt(what, s))
}

// ---- row decoders ---------------------------------------------------------
//
// Each `*_cols!()` macro lists the columns its decoder expects, in order, so
// that a query and its decoder cannot drift apart.

macro_rules! file_cols {
    () => {
        "id, kind, description, owner, created_at, created_by, latest_version"
    };
}
pub(crate) use file_cols;

pub(crate) fn file_row(r: &Row<'_>) -> R<FileRow> {
    Ok(FileRow {
        id: col_id(r, 0, "file id")?,
        kind: col_enum(r, 1, "file kind", FileKind::parse)?,
        description: col(r, 2, "file description")?,
        owner: col_opt_id(r, 3, "file owner")?,
        created_at: col_ts(r, 4, "file created_at")?,
        created_by: col_opt_id(r, 5, "file created_by")?,
        latest_version: col(r, 6, "file latest_version")?,
    })
}

macro_rules! version_cols {
    () => {
        "file, version, hash, size, created_at, handler, agent"
    };
}
pub(crate) use version_cols;

pub(crate) fn version_row(r: &Row<'_>) -> R<VersionRow> {
    Ok(VersionRow {
        file: col_id(r, 0, "version file")?,
        version: col(r, 1, "version number")?,
        hash: col_enum(r, 2, "version hash", BlobId::parse)?,
        size: col(r, 3, "version size")?,
        created_at: col_ts(r, 4, "version created_at")?,
        handler: col_opt_id(r, 5, "version handler")?,
        agent: col_opt_id(r, 6, "version agent")?,
    })
}

macro_rules! kb_audit_cols {
    () => {
        "file, at, handler, agent, action, version"
    };
}
pub(crate) use kb_audit_cols;

pub(crate) fn kb_audit_row(r: &Row<'_>) -> R<KbAuditRow> {
    Ok(KbAuditRow {
        file: col_id(r, 0, "KB audit file")?,
        at: col_ts(r, 1, "KB audit time")?,
        handler: col_opt_id(r, 2, "KB audit handler")?,
        agent: col_opt_id(r, 3, "KB audit agent")?,
        action: col_enum(r, 4, "KB audit action", KbAction::parse)?,
        version: col(r, 5, "KB audit version")?,
    })
}

macro_rules! outcome_cols {
    () => {
        "id, title, description, status, status_reason, priority, perpetual, process_inbox, responsible, \
         created_at, updated_at"
    };
}
pub(crate) use outcome_cols;

pub(crate) fn outcome_row(r: &Row<'_>) -> R<OutcomeRow> {
    Ok(OutcomeRow {
        id: col_id(r, 0, "outcome id")?,
        title: col(r, 1, "outcome title")?,
        description: col(r, 2, "outcome description")?,
        status: col_enum(r, 3, "outcome status", |s| s.parse::<OutcomeStatus>().ok())?,
        status_reason: col(r, 4, "outcome status_reason")?,
        priority: col(r, 5, "outcome priority")?,
        perpetual: col(r, 6, "outcome perpetual flag")?,
        process_inbox: col(r, 7, "outcome process_inbox flag")?,
        responsible: col_id(r, 8, "outcome responsible handler")?,
        created_at: col_ts(r, 9, "outcome created_at")?,
        updated_at: col_ts(r, 10, "outcome updated_at")?,
    })
}

pub(crate) fn outcome_event_row(r: &Row<'_>) -> R<OutcomeEventRow> {
    Ok(OutcomeEventRow {
        outcome: col_id(r, 0, "outcome event outcome")?,
        at: col_ts(r, 1, "outcome event time")?,
        handler: col_opt_id(r, 2, "outcome event handler")?,
        agent: col_opt_id(r, 3, "outcome event agent")?,
        action: col(r, 4, "outcome event action")?,
        detail: col(r, 5, "outcome event detail")?,
    })
}

macro_rules! handler_cols {
    () => {
        "id, boss, status, state_doc, audit_log, created_at, updated_at"
    };
}
pub(crate) use handler_cols;

/// How many columns [`handler_row`] reads.
const HANDLER_COLS: usize = 7;

pub(crate) fn handler_row(r: &Row<'_>) -> R<HandlerRow> {
    Ok(HandlerRow {
        id: col_id(r, 0, "handler id")?,
        boss: col_opt_id(r, 1, "handler boss")?,
        status: col_enum(r, 2, "handler status", HandlerStatus::parse)?,
        state_doc: col_id(r, 3, "handler state_doc")?,
        audit_log: col_id(r, 4, "handler audit_log")?,
        created_at: col_ts(r, 5, "handler created_at")?,
        updated_at: col_ts(r, 6, "handler updated_at")?,
    })
}

macro_rules! capability_cols {
    () => {
        "id, holder, resource_kind, resource_key, level, delegatable, scope, derived_from, granted_by, origin, \
         created_at, revoked_at"
    };
}
pub(crate) use capability_cols;

pub(crate) fn capability_row(r: &Row<'_>) -> R<CapabilityRow> {
    let kind: String = col(r, 2, "capability resource kind")?;
    let key: String = col(r, 3, "capability resource key")?;
    let resource = Resource::from_parts(&kind, &key)
        .map_err(|_| StoreError::corrupt("capability resource", format!("{kind}:{key}")))?;
    Ok(CapabilityRow {
        id: CapabilityId(col(r, 0, "capability id")?),
        holder: col_id(r, 1, "capability holder")?,
        resource,
        level: col_level(r, 4, "capability level")?,
        delegatable: col(r, 5, "capability delegatable flag")?,
        scope: col_opt_id(r, 6, "capability scope")?,
        derived_from: col::<Option<i64>>(r, 7, "capability derived_from")?.map(CapabilityId),
        granted_by: col_opt_id(r, 8, "capability granted_by")?,
        origin: col_enum(r, 9, "capability origin", CapOrigin::parse)?,
        created_at: col_ts(r, 10, "capability created_at")?,
        revoked_at: col_opt_ts(r, 11, "capability revoked_at")?,
    })
}

macro_rules! message_cols {
    () => {
        "id, file, from_party, to_party, subject, created_at, deliver_at, delivered_at, acked_at, dropped_reason, in_reply_to, notice"
    };
}
pub(crate) use message_cols;

pub(crate) fn message_row(r: &Row<'_>) -> R<MessageRow> {
    Ok(MessageRow {
        id: col_id(r, 0, "message id")?,
        file: col_id(r, 1, "message file")?,
        from: col_target(r, 2, "message sender")?,
        to: col_target(r, 3, "message recipient")?,
        subject: col(r, 4, "message subject")?,
        created_at: col_ts(r, 5, "message created_at")?,
        deliver_at: col_ts(r, 6, "message deliver_at")?,
        delivered_at: col_opt_ts(r, 7, "message delivered_at")?,
        acked_at: col_opt_ts(r, 8, "message acked_at")?,
        dropped_reason: col(r, 9, "message dropped_reason")?,
        in_reply_to: col_opt_id(r, 10, "message in_reply_to")?,
        notice: col::<i64>(r, 11, "message notice")? != 0,
    })
}

macro_rules! agent_cols {
    () => {
        "id, handler, started_at, ended_at, end_reason"
    };
}
pub(crate) use agent_cols;

/// How many columns [`agent_row`] reads.
const AGENT_COLS: usize = 5;

pub(crate) fn agent_row(r: &Row<'_>) -> R<AgentRow> {
    agent_row_at(r, 0)
}

/// An agent row whose columns start at `at`.
fn agent_row_at(r: &Row<'_>, at: usize) -> R<AgentRow> {
    Ok(AgentRow {
        id: col_id(r, at, "agent id")?,
        handler: col_id(r, at + 1, "agent handler")?,
        started_at: col_ts(r, at + 2, "agent started_at")?,
        ended_at: col_opt_ts(r, at + 3, "agent ended_at")?,
        end_reason: col(r, at + 4, "agent end_reason")?,
    })
}

/// An agent `a` joined with its handler `h`: the handler's columns first
/// (as [`handler_row`] reads them), then the agent's
/// ([`agent_and_handler_row`]); [`AGENT_AND_HANDLER_COLS`] in all.
macro_rules! agent_and_handler_cols {
    () => {
        "h.id, h.boss, h.status, h.state_doc, h.audit_log, h.created_at, h.updated_at, \
         a.id, a.handler, a.started_at, a.ended_at, a.end_reason"
    };
}
pub(crate) use agent_and_handler_cols;

/// How many columns [`agent_and_handler_cols`] names.
pub(crate) const AGENT_AND_HANDLER_COLS: usize = HANDLER_COLS + AGENT_COLS;

/// A token `t`'s columns, as [`token_row_at`] reads them.
macro_rules! token_cols {
    () => {
        "t.hash, t.agent, t.handler, t.workspace, t.created_at, t.revoked_at"
    };
}
pub(crate) use token_cols;

/// A token row whose columns start at `at`.
pub(crate) fn token_row_at(r: &Row<'_>, at: usize) -> R<TokenRow> {
    Ok(TokenRow {
        hash: col(r, at, "token hash")?,
        agent: col_id(r, at + 1, "token agent")?,
        handler: col_id(r, at + 2, "token handler")?,
        workspace: col(r, at + 3, "token workspace")?,
        created_at: col_ts(r, at + 4, "token created_at")?,
        revoked_at: col_opt_ts(r, at + 5, "token revoked_at")?,
    })
}

pub(crate) fn agent_and_handler_row(r: &Row<'_>) -> R<(AgentRow, HandlerRow)> {
    Ok((agent_row_at(r, HANDLER_COLS)?, handler_row(r)?))
}

pub(crate) fn log_entry_row(r: &Row<'_>) -> R<LogEntryRow> {
    Ok(LogEntryRow {
        handler: col_id(r, 0, "log entry handler")?,
        at: col_ts(r, 1, "log entry time")?,
        agent: col_opt_id(r, 2, "log entry agent")?,
        summary: col(r, 3, "log entry summary")?,
    })
}

/// A bounded count (`COUNT(*)` over a `LIMIT`ed subquery) as a `usize`.
pub(crate) fn count(n: i64) -> usize {
    usize::try_from(n).unwrap_or(0)
}

/// A short list of ids for an error message.
pub(crate) fn list_text<T: Display>(items: &[T]) -> String {
    let shown: Vec<String> = items.iter().take(5).map(|i| i.to_string()).collect();
    let more = items.len().saturating_sub(shown.len());
    if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    }
}
