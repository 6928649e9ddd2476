//! Conversions between domain values and PostgreSQL columns, the decoding
//! of each row type, and the mapping of client errors onto [`StoreError`].
//!
//! Storage conventions are the SQLite store's: ids are lowercase
//! hyphenated UUID text, timestamps BIGINT milliseconds, flags 0/1 BIGINT,
//! enums their `as_str()` text, levels via `Level::as_i64`, a mail party
//! `"user"` or a handler UUID. Every integer column is BIGINT and every
//! integer parameter an `i64`; [`Column`] reads a BIGINT into the narrower
//! or boolean Rust type a row field has, checking the range.

use std::fmt::{self, Display};
use std::str::FromStr;

use agency_core::access::FileKind;
use agency_core::{CapabilityId, Level, MailTarget, OutcomeStatus, Resource, Timestamp};
use agency_store::model::*;
use agency_store::{BlobId, StoreError};
use tokio_postgres::Row;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{FromSql, Type};

use crate::conn::{Conn, Params};

pub(crate) type R<T> = Result<T, StoreError>;

/// Map a client error met while doing `op`. Unique and primary-key
/// violations become [`StoreError::Unique`] so callers can tell "already
/// exists" from a failing database.
pub(crate) fn db_error(op: String, err: tokio_postgres::Error) -> StoreError {
    if err.code() == Some(&SqlState::UNIQUE_VIOLATION) {
        let message = err
            .as_db_error()
            .map(|d| d.message().to_owned())
            .unwrap_or_else(|| err.to_string());
        return StoreError::Unique { op, message };
    }
    StoreError::backend(op, PgError(err))
}

/// A client error whose message carries the server's own (its `Display`
/// alone says only "db error"), kept whole as the source.
#[derive(Debug)]
pub(crate) struct PgError(pub(crate) tokio_postgres::Error);

impl Display for PgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_db_error() {
            Some(db) => {
                write!(f, "{}: {}", db.severity(), db.message())?;
                if let Some(detail) = db.detail() {
                    write!(f, " ({detail})")?;
                }
                Ok(())
            }
            None => write!(f, "{}", self.0),
        }
    }
}

impl std::error::Error for PgError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

/// Attach the operation being attempted to a client result. The op is
/// built lazily: it is only needed on the error path.
pub(crate) trait Ctx<T> {
    fn ctx(self, op: impl FnOnce() -> String) -> R<T>;
}

impl<T> Ctx<T> for Result<T, tokio_postgres::Error> {
    fn ctx(self, op: impl FnOnce() -> String) -> R<T> {
        self.map_err(|e| db_error(op(), e))
    }
}

/// Run a statement (prepared once per connection) and return the number of
/// rows it changed.
pub(crate) fn execute(
    c: &mut Conn,
    sql: &str,
    params: Params,
    op: impl Fn() -> String,
) -> R<usize> {
    let n = c.execute(sql, params).ctx(&op)?;
    Ok(usize::try_from(n).unwrap_or(usize::MAX))
}

/// Run a query and decode every row.
pub(crate) fn query_rows<T>(
    c: &mut Conn,
    sql: &str,
    params: Params,
    op: impl Fn() -> String,
    decode: impl FnMut(&Row) -> R<T>,
) -> R<Vec<T>> {
    c.query(sql, params).ctx(&op)?.iter().map(decode).collect()
}

/// Run a query and decode its first row, if any.
pub(crate) fn query_opt<T>(
    c: &mut Conn,
    sql: &str,
    params: Params,
    op: impl Fn() -> String,
    decode: impl FnOnce(&Row) -> R<T>,
) -> R<Option<T>> {
    match c.query_opt(sql, params).ctx(&op)? {
        Some(row) => decode(&row).map(Some),
        None => Ok(None),
    }
}

/// Run a query that always yields exactly one row with one value
/// (`SELECT EXISTS …`, `SELECT COUNT(*) …`).
pub(crate) fn query_value<T: Column>(
    c: &mut Conn,
    sql: &str,
    params: Params,
    op: impl Fn() -> String,
) -> R<T> {
    match c.query_opt(sql, params).ctx(&op)? {
        Some(row) => T::get(&row, 0).map_err(|e| StoreError::backend(op(), e)),
        None => Err(StoreError::backend(op(), "the query returned no row")),
    }
}

/// An UPDATE of one named row that matched nothing means the row is missing;
/// say so instead of silently doing nothing.
pub(crate) fn require_row(changed: usize, op: impl FnOnce() -> String) -> R<()> {
    if changed == 0 {
        return Err(StoreError::backend(op(), "no such row"));
    }
    Ok(())
}

/// A `LIMIT` parameter; anything beyond `i64::MAX` is as good as unlimited.
pub(crate) fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// A flag as a 0/1 BIGINT parameter.
pub(crate) fn flag(b: bool) -> i64 {
    i64::from(b)
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

/// A list of ids or names as a `TEXT[]` parameter (`= ANY($n)`), which
/// lets one prepared statement take a list of any length.
pub(crate) fn text_list<T: Display>(items: impl IntoIterator<Item = T>) -> Vec<String> {
    items.into_iter().map(|i| i.to_string()).collect()
}

// ---- column decoders ------------------------------------------------------
//
// A value that does not decode means the database holds something this build
// never wrote: report it as corrupt, naming the column.

/// A Rust value read from one column. Integers are stored as BIGINT: the
/// narrower integer types and `bool` (0/1) are read from it, checking the
/// range, so a row decoder reads each field with the same `col` call
/// whatever its width.
pub(crate) trait Column: Sized {
    fn get(row: &Row, i: usize) -> Result<Self, String>;
}

fn raw<'a, T: FromSql<'a>>(row: &'a Row, i: usize) -> Result<T, String> {
    row.try_get(i).map_err(|e| e.to_string())
}

impl Column for i64 {
    fn get(row: &Row, i: usize) -> Result<Self, String> {
        raw(row, i)
    }
}

impl Column for String {
    fn get(row: &Row, i: usize) -> Result<Self, String> {
        raw(row, i)
    }
}

impl Column for f64 {
    fn get(row: &Row, i: usize) -> Result<Self, String> {
        raw(row, i)
    }
}

impl Column for f32 {
    fn get(row: &Row, i: usize) -> Result<Self, String> {
        raw(row, i)
    }
}

impl Column for Vec<u8> {
    fn get(row: &Row, i: usize) -> Result<Self, String> {
        raw(row, i)
    }
}

impl Column for bool {
    /// A 0/1 flag column, or a boolean expression (`EXISTS …`).
    fn get(row: &Row, i: usize) -> Result<Self, String> {
        if row
            .columns()
            .get(i)
            .is_some_and(|c| c.type_() == &Type::BOOL)
        {
            return raw(row, i);
        }
        match raw::<i64>(row, i)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(format!("{v} is not a flag (0 or 1)")),
        }
    }
}

macro_rules! narrow_int {
    ($($t:ty),*) => {$(
        impl Column for $t {
            fn get(row: &Row, i: usize) -> Result<Self, String> {
                let v = raw::<i64>(row, i)?;
                <$t>::try_from(v).map_err(|_| format!("{v} is out of range"))
            }
        }
    )*};
}
narrow_int!(i32, u32, u64, usize, u8, u16, i16);

/// Whether a column is NULL, whatever its type.
struct IsNull(bool);

impl<'a> FromSql<'a> for IsNull {
    fn from_sql(_: &Type, _: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(IsNull(false))
    }
    fn from_sql_null(_: &Type) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(IsNull(true))
    }
    fn accepts(_: &Type) -> bool {
        true
    }
}

impl<T: Column> Column for Option<T> {
    fn get(row: &Row, i: usize) -> Result<Self, String> {
        if raw::<IsNull>(row, i)?.0 {
            return Ok(None);
        }
        T::get(row, i).map(Some)
    }
}

pub(crate) fn col<T: Column>(row: &Row, i: usize, what: &'static str) -> R<T> {
    T::get(row, i).map_err(|e| StoreError::corrupt(what, e))
}

pub(crate) fn col_id<T: FromStr>(row: &Row, i: usize, what: &'static str) -> R<T> {
    let s: String = col(row, i, what)?;
    s.parse().map_err(|_| StoreError::corrupt(what, s))
}

pub(crate) fn col_opt_id<T: FromStr>(row: &Row, i: usize, what: &'static str) -> R<Option<T>> {
    let s: Option<String> = col(row, i, what)?;
    s.map(|s| s.parse().map_err(|_| StoreError::corrupt(what, s)))
        .transpose()
}

pub(crate) fn col_ts(row: &Row, i: usize, what: &'static str) -> R<Timestamp> {
    col(row, i, what).map(Timestamp)
}

pub(crate) fn col_opt_ts(row: &Row, i: usize, what: &'static str) -> R<Option<Timestamp>> {
    Ok(col::<Option<i64>>(row, i, what)?.map(Timestamp))
}

pub(crate) fn col_level(row: &Row, i: usize, what: &'static str) -> R<Level> {
    let v: i64 = col(row, i, what)?;
    Level::from_i64(v).ok_or_else(|| StoreError::corrupt(what, v.to_string()))
}

pub(crate) fn col_opt_level(row: &Row, i: usize, what: &'static str) -> R<Option<Level>> {
    let v: Option<i64> = col(row, i, what)?;
    v.map(|v| Level::from_i64(v).ok_or_else(|| StoreError::corrupt(what, v.to_string())))
        .transpose()
}

pub(crate) fn col_target(row: &Row, i: usize, what: &'static str) -> R<MailTarget> {
    let s: String = col(row, i, what)?;
    if s == "user" {
        return Ok(MailTarget::User);
    }
    s.parse()
        .map(MailTarget::Handler)
        .map_err(|_| StoreError::corrupt(what, s))
}

/// Decode an enum column with the type's own parser.
pub(crate) fn col_enum<T>(
    row: &Row,
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

pub(crate) fn file_row(r: &Row) -> R<FileRow> {
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

pub(crate) fn version_row(r: &Row) -> R<VersionRow> {
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

pub(crate) fn kb_audit_row(r: &Row) -> R<KbAuditRow> {
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

pub(crate) fn outcome_row(r: &Row) -> R<OutcomeRow> {
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

pub(crate) fn outcome_event_row(r: &Row) -> R<OutcomeEventRow> {
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

pub(crate) fn handler_row(r: &Row) -> R<HandlerRow> {
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

pub(crate) fn capability_row(r: &Row) -> R<CapabilityRow> {
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

pub(crate) fn message_row(r: &Row) -> R<MessageRow> {
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
        notice: col(r, 11, "message notice")?,
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

pub(crate) fn agent_row(r: &Row) -> R<AgentRow> {
    agent_row_at(r, 0)
}

/// An agent row whose columns start at `at`.
fn agent_row_at(r: &Row, at: usize) -> R<AgentRow> {
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
pub(crate) fn token_row_at(r: &Row, at: usize) -> R<TokenRow> {
    Ok(TokenRow {
        hash: col(r, at, "token hash")?,
        agent: col_id(r, at + 1, "token agent")?,
        handler: col_id(r, at + 2, "token handler")?,
        workspace: col(r, at + 3, "token workspace")?,
        created_at: col_ts(r, at + 4, "token created_at")?,
        revoked_at: col_opt_ts(r, at + 5, "token revoked_at")?,
    })
}

pub(crate) fn agent_and_handler_row(r: &Row) -> R<(AgentRow, HandlerRow)> {
    Ok((agent_row_at(r, HANDLER_COLS)?, handler_row(r)?))
}

pub(crate) fn log_entry_row(r: &Row) -> R<LogEntryRow> {
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
