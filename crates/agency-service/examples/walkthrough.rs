//! The core's main job, end to end, on the embedded default store (SQLite
//! and a blob directory, nothing to install): the user asks for work, the
//! root handler decomposes and delegates it with a restricted capability,
//! the underling reports back, the boss verifies and completes, and the
//! reply reaches the user's inbox. Prints the handler tree, the outcome DAG
//! and the user's inbox.
//!
//! `cargo run -p agency-service --example walkthrough [-- DIR]` (a temporary
//! directory when DIR is not given). Until the daemon and CLI land, this is
//! how to see Agency's core work; agents here are scripted calls, not LLMs.

use std::path::PathBuf;
use std::sync::Arc;

use agency_core::{Level, MailTarget, OutcomeId, Principal, Resource};
use agency_service::{GrantRequest, MailBody, NewOutcome, Service, SystemClock};
use agency_store::{FsBlobStore, SqliteStore};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let tmp;
    let dir: PathBuf = match std::env::args().nth(1) {
        Some(d) => PathBuf::from(d),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    std::fs::create_dir_all(&dir)?;
    let store = Arc::new(SqliteStore::open(&dir.join("agency.db"))?);
    let blobs = Arc::new(FsBlobStore::open(dir.join("blobs"))?);
    let svc = Service::builder(store, blobs, Arc::new(SystemClock)).build();
    let root = svc.bootstrap()?;
    let text = |t: &str| MailBody::Text {
        subject: None,
        text: t.to_owned(),
    };

    // The user asks the root handler for something.
    svc.mail_send(
        Principal::User,
        MailTarget::Handler(root),
        &text("Write a short guide to composting."),
    )?;

    // The root handler's agent triages its inbox into an outcome and a brief.
    let r = Principal::agent(root, svc.agent_start(root)?);
    let msgs = svc.mail_inbox(r, None)?;
    let guide = svc.outcome_create(
        r,
        &NewOutcome {
            title: "Composting guide written".into(),
            parents: vec![root.root()],
            ..Default::default()
        },
    )?;
    let brief = svc.kb_create(
        r,
        "Brief for the composting guide",
        b"Audience: beginners. One page.",
    )?;
    svc.mail_ack(r, &msgs.iter().map(|m| m.id).collect::<Vec<_>>())?;

    // It delegates the outcome, granting the brief read-only.
    let d = svc.delegate(
        r,
        guide,
        &[GrantRequest {
            resource: Resource::Kb(brief),
            level: Level::Read,
            delegatable: false,
        }],
    )?;
    let w = Principal::agent(d.handler, svc.agent_start(d.handler)?);
    let brief_text = svc.kb_read(w, brief)?.text();
    let draft = svc.kb_create(
        w,
        "Composting guide, draft 1",
        format!("# Composting\n\n({brief_text})\n\nGreens + browns, keep moist, turn weekly.\n")
            .as_bytes(),
    )?;
    svc.mail_send(
        w,
        MailTarget::Handler(root),
        &MailBody::File {
            file: draft,
            subject: Some("Draft ready".into()),
        },
    )?;
    svc.audit_submit(w, "Wrote draft 1 of the guide and sent it to my boss.")?;
    svc.outcome_request_completion(w, "The guide is written: see the draft I sent.")?;
    svc.agent_end(w.agent_id().expect("agent"), "exited")?;

    // The boss verifies and completes, then answers the user.
    let inbox = svc.mail_inbox(r, None)?;
    let report = svc.outcome_complete(r, guide, "Read the draft: it covers the brief.")?;
    svc.mail_ack(r, &inbox.iter().map(|m| m.id).collect::<Vec<_>>())?;
    svc.mail_send(
        r,
        MailTarget::User,
        &MailBody::File {
            file: draft,
            subject: Some("Your composting guide".into()),
        },
    )?;

    println!("Agency home: {}\n", dir.display());
    println!("Handlers:");
    for h in svc.handlers(Principal::User, None, None)? {
        let boss = h.boss.map_or("user".to_owned(), |b| short(&b.to_string()));
        println!(
            "  {}  {:<12} boss={:<8} inbox={}  {}",
            short(&h.id.to_string()),
            h.status.as_str(),
            boss,
            h.inbox_depth,
            h.title
        );
    }
    println!("\nOutcomes:");
    print_tree(&svc, root.root(), 1)?;
    println!(
        "\nCompleting the guide revoked {} capabilities and retired {} handler(s).",
        report.revoked.len(),
        report.retired_handlers.len()
    );
    println!("\nUser's inbox:");
    for m in svc.mail_inbox(Principal::User, None)? {
        println!(
            "  [{}] {}\n{}",
            m.subject,
            short(&m.id.to_string()),
            indent(m.body.as_deref().unwrap_or(""))
        );
    }
    let fsck = svc.fsck()?;
    println!(
        "fsck: {} versions, {} blobs, {} problems",
        fsck.versions_checked,
        fsck.blobs_checked,
        fsck.problems.len()
    );
    Ok(())
}

fn print_tree(
    svc: &Service,
    id: OutcomeId,
    depth: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let v = svc.outcome_view(Principal::User, id)?;
    println!(
        "{}- {} [{}] ({})",
        "  ".repeat(depth),
        v.outcome.title,
        v.outcome.status,
        short(&id.to_string())
    );
    for c in v.children {
        print_tree(svc, c.id, depth + 1)?;
    }
    Ok(())
}

fn short(id: &str) -> String {
    id.chars().take(8).collect()
}

fn indent(s: &str) -> String {
    s.lines().map(|l| format!("      {l}\n")).collect()
}
