//! Item 7: storage per event. Agency rewrites the KB
//! files it maintains (a handler's audit log, an outcome's Markdown) as a
//! new stored version on every event; this measures the bytes those new
//! versions take per event with a short history and with a long one, and
//! the size of the perpetual root outcome's file after many inbox cycles.
//! Bytes are the sizes of every KB version created during the measured
//! events (all files, not only the one expected to change), from the
//! store's version rows.
//!
//! The long histories (10,000 prior audit entries or outcome events) are
//! inserted as rows in one transaction through the store's `Tx` before
//! the measured events, which go through the service as the root
//! handler's agent like any agent's call.

use std::path::Path;

use agency_core::{HandlerId, MailTarget, OutcomeId, Principal, Timestamp};
use agency_service::{MailBody, NewOutcome, OutcomeUpdate, System};
use agency_store::{LogEntryRow, OutcomeEventRow};
use anyhow::{Context, Result};

use crate::Cfg;
use crate::report::{Row, Section, ratio};
use crate::util::new_home;

const SHORT: usize = 10;
const LONG: usize = 10_000;
const CYCLES_FEW: usize = 10;
const CYCLES: usize = 1000;

/// A fresh home's service and the root handler's agent.
fn open(dir: &Path) -> Result<(System, HandlerId, Principal)> {
    let home = new_home(dir, "")?;
    let svc = home.open_service().context("failed to open the service")?;
    let root = svc
        .root_handler()?
        .context("failed to find the root handler")?;
    let minted = svc
        .token_mint(Principal::User, root, None)
        .context("failed to mint a token for the root handler")?;
    Ok((svc, root, Principal::agent(root, minted.agent)))
}

/// Total size of every KB version in the store.
fn stored_bytes(svc: &System) -> Result<i64> {
    let versions = agency_store::read(&**svc.store(), |tx| tx.all_versions())
        .context("failed to list the KB versions")?;
    Ok(versions.iter().map(|v| v.size).sum())
}

fn entry(i: usize) -> String {
    format!("session {i:06}: read the inbox, delegated two outcomes, wrote the state document")
}

/// Bytes stored per audit entry after `prior` entries, over `events`.
fn audit_bytes(dir: &Path, prior: usize, events: usize) -> Result<f64> {
    let (svc, root, agent) = open(dir)?;
    let rows: Vec<LogEntryRow> = (0..prior)
        .map(|i| LogEntryRow {
            handler: root,
            at: Timestamp(i as i64),
            agent: None,
            summary: entry(i),
        })
        .collect();
    agency_store::write(&**svc.store(), |tx| {
        for r in &rows {
            tx.insert_log_entry(r)?;
        }
        Ok::<_, agency_store::StoreError>(())
    })
    .context("failed to insert the prior audit entries")?;
    let before = stored_bytes(&svc)?;
    for i in 0..events {
        svc.audit_submit(agent, &entry(prior + i))
            .context("failed to submit an audit entry")?;
    }
    Ok((stored_bytes(&svc)? - before) as f64 / events as f64)
}

/// Bytes stored per outcome update after `prior` history events.
fn outcome_bytes(dir: &Path, prior: usize, events: usize) -> Result<f64> {
    let (svc, root, agent) = open(dir)?;
    let id: OutcomeId = svc
        .outcome_create(
            agent,
            &NewOutcome {
                title: "Growth bench".into(),
                description: "measured".into(),
                parents: vec![root.root()],
                priority: 0,
            },
        )
        .context("failed to create the measured outcome")?;
    let rows: Vec<OutcomeEventRow> = (0..prior)
        .map(|i| OutcomeEventRow {
            outcome: id,
            at: Timestamp(i as i64),
            handler: Some(root),
            agent: None,
            action: "updated".into(),
            detail: format!("description: step {i:06}"),
        })
        .collect();
    agency_store::write(&**svc.store(), |tx| {
        for r in &rows {
            tx.insert_outcome_event(r)?;
        }
        Ok::<_, agency_store::StoreError>(())
    })
    .context("failed to insert the prior outcome events")?;
    let before = stored_bytes(&svc)?;
    for i in 0..events {
        svc.outcome_update(
            agent,
            id,
            &OutcomeUpdate {
                description: Some(format!("step {:06}", prior + i)),
                ..OutcomeUpdate::default()
            },
        )
        .context("failed to update the measured outcome")?;
    }
    Ok((stored_bytes(&svc)? - before) as f64 / events as f64)
}

/// The root outcome file's size after `n` inbox cycles (the user writes,
/// the root handler reads and acknowledges: one Process Inbox child each).
fn root_after_cycles(dir: &Path, n: usize) -> Result<(i64, f64)> {
    let (svc, root, agent) = open(dir)?;
    let before = stored_bytes(&svc)?;
    for i in 0..n {
        svc.mail_send(
            Principal::User,
            MailTarget::Handler(root),
            &MailBody::Text {
                subject: None,
                text: format!("request {i}"),
            },
        )
        .context("failed to send the cycle's message")?;
        let ids: Vec<_> = svc
            .mail_inbox(agent, None)
            .context("failed to read the inbox")?
            .iter()
            .map(|m| m.id)
            .collect();
        svc.mail_ack(agent, &ids)
            .context("failed to acknowledge the cycle's message")?;
    }
    let size = svc
        .kb_read(Principal::User, root.root().file())
        .context("failed to read the root outcome file")?
        .content
        .len() as i64;
    let per_cycle = (stored_bytes(&svc)? - before) as f64 / n as f64;
    Ok((size, per_cycle))
}

/// The size of an audit log file that shows all `n` entries, as every
/// version did before the renderings were bounded.
fn full_log_bytes(n: usize) -> usize {
    let header = "# Audit log: Root\n\n".len();
    header
        + (0..n)
            .map(|i| format!("## {} — Agency\n\n{}\n\n", Timestamp(i as i64), entry(i)).len())
            .sum::<usize>()
}

/// Item 7.
pub fn run(cfg: Cfg) -> Result<Vec<Section>> {
    let events = cfg.pick(200, 50);
    let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
    let d = dir.path();
    let a_short = audit_bytes(&d.join("a1"), SHORT, events)?;
    let a_long = audit_bytes(&d.join("a2"), LONG, events)?;
    let o_short = outcome_bytes(&d.join("o1"), SHORT, events)?;
    let o_long = outcome_bytes(&d.join("o2"), LONG, events)?;
    let (few, few_per) = root_after_cycles(&d.join("c1"), CYCLES_FEW)?;
    let (many, many_per) = root_after_cycles(&d.join("c2"), CYCLES)?;
    let mut s = Section::new("7. Storage per event (bounded renderings)");
    s.rows.push(Row::new(
        format!("audit entry: KB bytes stored per entry, {LONG} prior entries"),
        format!("{a_long:.0} B"),
        format!("{a_short:.0} B ({SHORT} prior entries)"),
        ratio(a_long, a_short),
    ));
    s.rows.push(Row::new(
        format!("outcome update: KB bytes stored per update, {LONG} prior events"),
        format!("{o_long:.0} B"),
        format!("{o_short:.0} B ({SHORT} prior events)"),
        ratio(o_long, o_short),
    ));
    s.rows.push(Row::new(
        format!("root outcome file after {CYCLES} inbox cycles"),
        format!("{many} B"),
        format!("{few} B (after {CYCLES_FEW} cycles)"),
        ratio(many as f64, few as f64),
    ));
    s.rows.push(Row::new(
        format!("KB bytes stored per inbox cycle, over {CYCLES} cycles"),
        format!("{many_per:.0} B"),
        format!("{few_per:.0} B (over {CYCLES_FEW} cycles)"),
        ratio(many_per, few_per),
    ));
    s.shows = "that an event costs the same stored bytes however long the history behind it (ratios near 1): the audit log and outcome files show the newest entries with a count of the rest, and the rows keep everything (audit_read, outcome_history).".to_owned();
    s.notes.push(format!(
        "{events} measured events per case through the service (`audit_submit`, `outcome_update`, and per inbox cycle `mail_send` by the user, `mail_inbox` and `mail_ack` by the root handler's agent); bytes are the sizes of all KB versions created, from the version rows. The {LONG} prior entries/events are rows inserted through the store's `Tx` in one transaction first. Before the bounded renderings, each new version held the whole log or history, so bytes per event grew linearly with it (about {} B per audit entry at {LONG} prior entries).",
        full_log_bytes(LONG)
    ));
    Ok(vec![s])
}
