//! Ids and rows the stories share, and `rd` / `wr` / `wr_err` to run a
//! transaction that must succeed (or fail).

use agency_core::access::FileKind;
use agency_core::{
    AgentId, CapabilityId, FileId, HandlerId, Level, MessageId, OutcomeId, OutcomeStatus, Resource,
    Timestamp,
};
use uuid::Uuid;

use crate::tx::{R, Tx};
use crate::{
    AgentRow, BlobId, CapOrigin, FileRow, HandlerRow, HandlerStatus, NewCapability, OutcomeRow,
    Store, StoreError, VersionRow, read, write,
};

pub fn uuid(n: u128) -> Uuid {
    Uuid::from_u128(n)
}
pub fn hid(n: u128) -> HandlerId {
    HandlerId(uuid(n))
}
pub fn oid(n: u128) -> OutcomeId {
    OutcomeId(uuid(n))
}
pub fn fid(n: u128) -> FileId {
    FileId(uuid(n))
}

// Disjoint id ranges so that ids sort predictably: handlers / outcomes are
// small numbers, their state documents, audit logs and other files above.
pub const STATE: u128 = 0x1_0000;
pub const AUDIT: u128 = 0x2_0000;
pub const DOC: u128 = 0x3_0000;

pub fn file(id: FileId, kind: FileKind, description: &str, owner: Option<HandlerId>) -> FileRow {
    FileRow {
        id,
        kind,
        description: description.to_owned(),
        owner,
        created_at: Timestamp(1),
        created_by: None,
        latest_version: 0,
    }
}

pub fn outcome(id: OutcomeId, responsible: HandlerId) -> OutcomeRow {
    OutcomeRow {
        id,
        title: format!("outcome {id}"),
        description: String::new(),
        status: OutcomeStatus::Open,
        status_reason: None,
        priority: 0,
        perpetual: false,
        process_inbox: false,
        responsible,
        created_at: Timestamp(10),
        updated_at: Timestamp(10),
    }
}

/// Insert an outcome with its Markdown file.
pub fn add_outcome(tx: &mut dyn Tx, o: OutcomeRow) -> R<()> {
    tx.insert_file(&file(o.id.file(), FileKind::Outcome, &o.title, None))?;
    tx.insert_outcome(&o)
}

/// A handler numbered `n` (its root outcome is `oid(n)`), with its root
/// outcome (perpetual for the root handler), state document and audit log.
pub fn add_handler(tx: &mut dyn Tx, n: u128, boss: Option<HandlerId>) -> R<HandlerId> {
    let h = hid(n);
    add_outcome(
        tx,
        OutcomeRow {
            perpetual: boss.is_none(),
            ..outcome(h.root(), h)
        },
    )?;
    tx.insert_file(&file(
        fid(STATE + n),
        FileKind::State,
        &format!("state of {n}"),
        Some(h),
    ))?;
    tx.insert_file(&file(
        fid(AUDIT + n),
        FileKind::AuditLog,
        &format!("audit log of {n}"),
        Some(h),
    ))?;
    tx.insert_handler(&HandlerRow {
        id: h,
        boss,
        status: HandlerStatus::Active,
        state_doc: fid(STATE + n),
        audit_log: fid(AUDIT + n),
        created_at: Timestamp(n as i64),
        updated_at: Timestamp(n as i64),
    })?;
    Ok(h)
}

pub fn cap(
    holder: HandlerId,
    resource: Resource,
    level: Level,
    derived_from: Option<CapabilityId>,
) -> NewCapability {
    NewCapability {
        holder,
        resource,
        level,
        delegatable: true,
        scope: None,
        derived_from,
        granted_by: None,
        origin: if derived_from.is_some() {
            CapOrigin::Grant
        } else {
            CapOrigin::User
        },
        created_at: Timestamp(5),
    }
}

pub fn version(f: FileId, v: i64) -> VersionRow {
    VersionRow {
        file: f,
        version: v,
        hash: BlobId::of(format!("{f} v{v}").as_bytes()),
        size: 3,
        created_at: Timestamp(v),
        handler: None,
        agent: None,
    }
}

pub fn agent(id: u128, handler: HandlerId, started: i64) -> AgentRow {
    AgentRow {
        id: aid(id),
        handler,
        started_at: Timestamp(started),
        ended_at: None,
        end_reason: None,
    }
}

pub fn aid(n: u128) -> AgentId {
    AgentId(uuid(n))
}
pub fn mid(n: u128) -> MessageId {
    MessageId(uuid(n))
}

/// Run a read transaction; an error fails the test.
pub fn rd<T>(store: &dyn Store, f: impl FnOnce(&mut dyn Tx) -> R<T>) -> T {
    read(store, f).unwrap_or_else(|e| panic!("read transaction failed: {e}"))
}

/// Run a write transaction; an error fails the test.
pub fn wr<T>(store: &dyn Store, f: impl FnOnce(&mut dyn Tx) -> R<T>) -> T {
    write(store, f).unwrap_or_else(|e| panic!("write transaction failed: {e}"))
}

/// Run a write transaction that must fail, returning its error.
pub fn wr_err<T: std::fmt::Debug>(
    store: &dyn Store,
    f: impl FnOnce(&mut dyn Tx) -> R<T>,
) -> StoreError {
    write(store, f).expect_err("the write transaction should fail")
}
