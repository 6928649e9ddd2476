//! Bulk population of a home's store for the scheduling and scale
//! benchmarks: rows inserted through the store's own [`Tx`] (the same SQL
//! the service uses; SQLite or PostgreSQL, whichever the home's
//! agency.toml names), in a few large transactions, before any daemon
//! opens the home. Going through the service would cost one durable transaction
//! per handler (hours for 100,000); the rows written here are the ones the
//! service would write for the queries measured — outcome rows and DAG
//! edges, handler rows with their state document and audit log files (one
//! shared blob, as content addressing would store it), and delivered mail
//! to the user with body files, and on request one logged event per
//! filler outcome. Outcome Markdown files are not rendered for populated
//! rows (Agency creates a missing rendering on the next change).

use std::sync::Arc;
use std::time::{Duration, Instant};

use agency_config::Home;
use agency_core::access::FileKind;
use agency_core::{FileId, HandlerId, MailTarget, MessageId, OutcomeId, OutcomeStatus, Timestamp};
use agency_store::{
    BlobId, BlobStore, FileRow, HandlerRow, HandlerStatus, MessageRow, NewEventRow, OutcomeRow,
    Store, StoreError, Tx, VersionRow,
};
use anyhow::{Context, Result};

/// What to put in the store.
#[derive(Debug, Clone, Copy, Default)]
pub struct Plan {
    /// Handlers below the root handler, each with its own root outcome.
    pub handlers: usize,
    /// How many of them have work (an open root outcome); the rest are
    /// blocked, so the scheduler leaves them alone.
    pub work_handlers: usize,
    /// Outcomes in total, including the root, the handlers' roots, the
    /// chain and the subtree; the rest are completed children of handler
    /// roots, spread evenly.
    pub outcomes: usize,
    /// A chain of this many outcomes below handler 0's root (its leaf sits
    /// at depth `chain + 1` below the root outcome).
    pub chain: usize,
    /// A subtree of this many outcomes (fan-out 10) below handler 1's root.
    pub subtree: usize,
    /// Delivered, unacknowledged messages from handlers to the user.
    pub user_messages: usize,
    /// Log an `outcome.created` event for each filler outcome (dated a day
    /// back), so the event log holds as many events as the store has
    /// outcomes: what the dashboard reads at scale.
    pub events: bool,
}

/// What was put there.
#[derive(Debug, Clone)]
pub struct Built {
    pub handlers: Vec<HandlerId>,
    pub chain_leaf: Option<OutcomeId>,
    pub subtree_root: Option<OutcomeId>,
    pub outcomes: usize,
    pub took: Duration,
}

/// A day in milliseconds (how far back populated events are dated).
const DAY_MS: i64 = 24 * 3600 * 1000;

/// Rows per write transaction.
const BATCH: usize = 100_000;

fn now() -> Timestamp {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    Timestamp(ms)
}

fn outcome(
    title: String,
    status: OutcomeStatus,
    responsible: HandlerId,
    at: Timestamp,
) -> OutcomeRow {
    let status_reason = match status {
        OutcomeStatus::Open => None,
        _ => Some("populated by agency-bench".to_owned()),
    };
    OutcomeRow {
        id: OutcomeId::new_random(),
        title,
        description: "Populated by agency-bench to measure Agency at scale.".to_owned(),
        status,
        status_reason,
        priority: 0,
        perpetual: false,
        process_inbox: false,
        responsible,
        created_at: at,
        updated_at: at,
    }
}

/// Insert a file with one version pointing at `blob`.
fn file(
    tx: &mut dyn Tx,
    kind: FileKind,
    description: String,
    owner: Option<HandlerId>,
    created_by: Option<HandlerId>,
    blob: &(BlobId, i64),
    at: Timestamp,
) -> Result<FileId, StoreError> {
    let id = FileId::new_random();
    tx.insert_file(&FileRow {
        id,
        kind,
        description,
        owner,
        created_at: at,
        created_by,
        latest_version: 0,
    })?;
    tx.insert_version(&VersionRow {
        file: id,
        version: 1,
        hash: blob.0.clone(),
        size: blob.1,
        created_at: at,
        handler: created_by,
        agent: None,
    })?;
    Ok(id)
}

/// Populate `home` (initialised, no daemon running) according to `plan`.
pub fn populate(home: &Home, plan: &Plan) -> Result<Built> {
    let started = Instant::now();
    // The home's own store, whichever backend its agency.toml names.
    let config = home
        .config()
        .context("failed to read the home's agency.toml")?;
    let (store, blobs): (Arc<dyn Store>, Arc<dyn BlobStore>) = home
        .open_store(&config)
        .with_context(|| format!("failed to open the store of {}", home.dir().display()))?;
    let text = b"# State\n\nPopulated by agency-bench.\n";
    let blob = (
        blobs
            .put(text)
            .context("failed to store the shared populated blob")?,
        text.len() as i64,
    );
    let root = agency_store::read(&*store, |tx| tx.root_handler())
        .context("failed to read the root handler")?
        .context("failed to find the root handler (home not initialised?)")?
        .id;
    let at = now();
    let mut handlers: Vec<HandlerId> = Vec::with_capacity(plan.handlers);
    let mut count = 1usize; // the root outcome
    for start in (0..plan.handlers).step_by(BATCH / 7) {
        let end = (start + BATCH / 7).min(plan.handlers);
        let made = agency_store::write(&*store, |tx| {
            let mut made = Vec::with_capacity(end - start);
            for i in start..end {
                let status = if i < plan.work_handlers {
                    OutcomeStatus::Open
                } else {
                    OutcomeStatus::Blocked
                };
                // Referenced rows first (files, then the handler, then its
                // outcome): a dangling deferred foreign key would make SQLite
                // scan the child tables on every later parent insert.
                let mut o = outcome(format!("Bench handler {i}"), status, root, at);
                let h = HandlerId::from_root(o.id);
                o.responsible = h;
                let state_doc = file(
                    tx,
                    FileKind::State,
                    format!("State document of handler {h}: Bench handler {i}"),
                    Some(h),
                    None,
                    &blob,
                    at,
                )?;
                let audit_log = file(
                    tx,
                    FileKind::AuditLog,
                    format!("Audit log of handler {h}: Bench handler {i}"),
                    Some(h),
                    None,
                    &blob,
                    at,
                )?;
                tx.insert_handler(&HandlerRow {
                    id: h,
                    boss: Some(root),
                    status: HandlerStatus::Active,
                    state_doc,
                    audit_log,
                    created_at: at,
                    updated_at: at,
                })?;
                tx.insert_outcome(&o)?;
                tx.insert_edge(root.root(), o.id)?;
                made.push(h);
            }
            Ok::<_, StoreError>(made)
        })
        .context("failed to insert a batch of handlers")?;
        handlers.extend(made);
    }
    count += handlers.len();
    let owner = |k: usize| handlers.get(k % handlers.len().max(1)).copied();
    // The chain below handler 0's root.
    let mut chain_leaf = None;
    if let (Some(h), true) = (owner(0), plan.chain > 0) {
        chain_leaf = agency_store::write(&*store, |tx| {
            let mut parent = h.root();
            for d in 0..plan.chain {
                let o = outcome(format!("Chain step {d}"), OutcomeStatus::Completed, h, at);
                tx.insert_outcome(&o)?;
                tx.insert_edge(parent, o.id)?;
                parent = o.id;
            }
            Ok::<_, StoreError>(Some(parent))
        })
        .context("failed to insert the chain")?;
        count += plan.chain;
    }
    // The subtree below handler 1's root, breadth first with fan-out 10.
    let mut subtree_root = None;
    if let (Some(h), true) = (owner(1), plan.subtree > 0) {
        subtree_root = agency_store::write(&*store, |tx| {
            let top = outcome("Subtree top".to_owned(), OutcomeStatus::Completed, h, at);
            tx.insert_outcome(&top)?;
            tx.insert_edge(h.root(), top.id)?;
            let mut frontier = std::collections::VecDeque::from([top.id]);
            let mut made = 1;
            while made < plan.subtree {
                let Some(p) = frontier.pop_front() else { break };
                for _ in 0..10 {
                    if made >= plan.subtree {
                        break;
                    }
                    let o = outcome(
                        format!("Subtree node {made}"),
                        OutcomeStatus::Completed,
                        h,
                        at,
                    );
                    tx.insert_outcome(&o)?;
                    tx.insert_edge(p, o.id)?;
                    frontier.push_back(o.id);
                    made += 1;
                }
            }
            Ok::<_, StoreError>(Some(top.id))
        })
        .context("failed to insert the subtree")?;
        count += plan.subtree;
    }
    // Filler: completed children of handler roots.
    let filler = plan.outcomes.saturating_sub(count);
    if !handlers.is_empty() {
        for start in (0..filler).step_by(BATCH / 2) {
            let end = (start + BATCH / 2).min(filler);
            agency_store::write(&*store, |tx| {
                for k in start..end {
                    let h = handlers[k % handlers.len()];
                    let o = outcome(
                        format!("Bench outcome {k}"),
                        OutcomeStatus::Completed,
                        h,
                        at,
                    );
                    tx.insert_outcome(&o)?;
                    tx.insert_edge(h.root(), o.id)?;
                    if plan.events {
                        tx.append_event(&NewEventRow {
                            at: Timestamp(at.0 - DAY_MS),
                            kind: "outcome.created".to_owned(),
                            handler: Some(h),
                            agent: None,
                            outcome: Some(o.id),
                            summary: format!("outcome {} created: {}", o.id, o.title),
                            data: "{}".to_owned(),
                        })?;
                    }
                }
                Ok::<_, StoreError>(())
            })
            .context("failed to insert a batch of outcomes")?;
        }
        count += filler;
    }
    // Mail from handlers to the user, delivered and waiting.
    if !handlers.is_empty() {
        for start in (0..plan.user_messages).step_by(BATCH / 3) {
            let end = (start + BATCH / 3).min(plan.user_messages);
            agency_store::write(&*store, |tx| {
                for m in start..end {
                    let h = handlers[m % handlers.len()];
                    let body = file(
                        tx,
                        FileKind::Message,
                        format!("Mail body {m}"),
                        None,
                        Some(h),
                        &blob,
                        at,
                    )?;
                    tx.insert_message(&MessageRow {
                        id: MessageId::new_random(),
                        file: body,
                        from: MailTarget::Handler(h),
                        to: MailTarget::User,
                        subject: format!("Report {m}"),
                        created_at: at,
                        deliver_at: at,
                        delivered_at: Some(at),
                        acked_at: None,
                        dropped_reason: None,
                        in_reply_to: None,
                        notice: false,
                    })?;
                }
                Ok::<_, StoreError>(())
            })
            .context("failed to insert a batch of messages")?;
        }
    }
    Ok(Built {
        handlers,
        chain_leaf,
        subtree_root,
        outcomes: count,
        took: started.elapsed(),
    })
}
