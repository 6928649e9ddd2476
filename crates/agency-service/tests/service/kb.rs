//! Knowledge Base behaviour: versions, compare-and-set, history, listing,
//! browse, size limit, audit log, system-written files.

use agency_core::access::FileKind;
use agency_core::{Level, Limits, Principal, Resource};
use agency_service::{GrantRequest, KbAction};

use crate::support::{Env, assert_kind};

#[test]
fn versions_cas_history_and_read_version() {
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let f = svc.kb_create(r, "Recipe for bread", b"flour").unwrap();
    let v1 = svc.kb_read(r, f).unwrap();
    assert_eq!((v1.version, v1.content.as_slice()), (1, &b"flour"[..]));
    let v2 = svc
        .kb_write(r, f, b"flour, water", 1, v1.hash.as_str())
        .unwrap();
    assert_eq!(v2.version, 2);
    // A stale write names the current version and hash.
    let e = assert_kind(
        svc.kb_write(r, f, b"flour, salt", 1, v1.hash.as_str()),
        "conflict",
    );
    let msg = e.to_string();
    assert!(
        msg.contains("current version is 2") && msg.contains(v2.hash.as_str()),
        "{msg}"
    );
    // Right version, wrong hash is stale too.
    assert_kind(svc.kb_write(r, f, b"x", 2, v1.hash.as_str()), "conflict");
    assert_kind(svc.kb_write(r, f, b"x", 2, "not-a-hash"), "invalid_input");
    let hist = svc.kb_history(r, f).unwrap();
    assert_eq!(
        hist.iter().map(|v| v.version).collect::<Vec<_>>(),
        vec![1, 2]
    );
    assert_eq!(hist[1].agent, r.agent_id());
    assert_eq!(svc.kb_read_version(r, f, 1).unwrap().content, b"flour");
    assert_kind(svc.kb_read_version(r, f, 3), "invalid_input");
    // Identical content is stored once.
    let g = svc.kb_create(r, "copy", b"flour").unwrap();
    assert_eq!(svc.kb_read(r, g).unwrap().hash, v1.hash);
}

#[test]
fn every_read_and_write_is_in_the_file_audit_log() {
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let f = svc.kb_create(r, "audited", b"a").unwrap();
    let v = svc.kb_read(r, f).unwrap();
    // Reads are audited by a background group commit, and the log is
    // ordered by time (milliseconds), then by commit: a read and a write in
    // the same millisecond would list the write first unless the read's
    // record is committed before the write. (A known imprecision, left
    // for the hot-path work of issue 15; this test checks the records.)
    svc.flush_read_audit().unwrap();
    svc.kb_write(r, f, b"b", v.version, v.hash.as_str())
        .unwrap();
    svc.kb_read(Principal::User, f).unwrap();
    let log = svc.kb_audit(Principal::User, f, None).unwrap();
    let actions: Vec<(KbAction, Option<_>)> = log.iter().map(|a| (a.action, a.agent)).collect();
    assert_eq!(
        actions,
        vec![
            (KbAction::Create, r.agent_id()),
            (KbAction::Read, r.agent_id()),
            (KbAction::Write, r.agent_id()),
            (KbAction::Read, None),
        ]
    );
    assert!(log.iter().take(3).all(|a| a.handler == Some(env.root)));
}

/// Issue 15 item 1: the read-audit batches ran at the priority of the
/// threads answering calls and made the slowest percent of `kb_read`s.
#[test]
fn the_read_audit_thread_runs_below_the_threads_that_answer_calls() {
    let env = Env::new();
    let svc = &env.svc;
    let f = svc.kb_create(Principal::User, "notes", b"x").unwrap();
    svc.kb_read(Principal::User, f).unwrap();
    svc.flush_read_audit().unwrap();
    let mut nice = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let task = task.unwrap().path();
        let comm = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        if comm.trim() != "agency-read-aud" {
            continue;
        }
        let stat = std::fs::read_to_string(task.join("stat")).unwrap();
        // Field 19 (nice) counted after the `(comm)` field's closing paren.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        nice.push(after.split(' ').nth(16).unwrap().parse::<i32>().unwrap());
    }
    assert!(!nice.is_empty(), "no read-audit thread found");
    assert!(nice.iter().all(|n| *n == 10), "{nice:?}");
}

#[test]
fn list_and_browse_follow_levels() {
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let a = env.outcome(env.root, "Research", &[env.root.root()]);
    let seen = svc.kb_create(r, "Market SIZE report 100%", b"1").unwrap();
    let known = svc.kb_create(r, "Market secret pricing", b"2").unwrap();
    let hidden = svc.kb_create(r, "Market hidden memo", b"3").unwrap();
    let grants = [
        GrantRequest {
            resource: Resource::Kb(seen),
            level: Level::Read,
            delegatable: false,
        },
        GrantRequest {
            resource: Resource::Kb(known),
            level: Level::None,
            delegatable: false,
        },
    ];
    let h = svc.delegate(r, a, &grants).unwrap().handler;
    let p = env.agent(h);
    let listed: Vec<_> = svc
        .kb_list(p, None, None)
        .unwrap()
        .into_iter()
        .map(|f| f.id)
        .collect();
    assert!(listed.contains(&seen));
    assert!(!listed.contains(&known) && !listed.contains(&hidden));
    let found = svc.kb_browse(p, "market", None, None).unwrap();
    let found_ids: Vec<_> = found.iter().map(|f| f.id).collect();
    assert!(
        found_ids.contains(&seen) && found_ids.contains(&known),
        "{found:?}"
    );
    assert!(!found_ids.contains(&hidden));
    assert_eq!(
        found.iter().find(|f| f.id == known).unwrap().level,
        Level::None
    );
    // Words match case-insensitively; LIKE wildcards are literal.
    assert_eq!(svc.kb_browse(p, "size 100%", None, None).unwrap().len(), 1);
    assert!(svc.kb_browse(p, "s_ze", None, None).unwrap().is_empty());
    // None lets the handler see the file but not read it.
    let e = assert_kind(svc.kb_read(p, known), "permission_denied");
    assert!(e.to_string().contains("none access"), "{e}");
    // The handler sees its own state document and audit log, and the
    // outcomes of its area, as files.
    let kinds: Vec<FileKind> = svc
        .kb_list(p, None, None)
        .unwrap()
        .into_iter()
        .map(|f| f.kind)
        .collect();
    assert!(
        kinds.contains(&FileKind::State)
            && kinds.contains(&FileKind::AuditLog)
            && kinds.contains(&FileKind::Outcome)
    );
    // Paging returns each file once.
    let all = svc.kb_list(Principal::User, None, None).unwrap();
    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let page = svc.kb_list(Principal::User, after, Some(2)).unwrap();
        if page.is_empty() {
            break;
        }
        after = page.last().map(|f| f.id);
        paged.extend(page);
    }
    assert_eq!(paged, all);
}

#[test]
fn oversized_content_is_refused_before_anything_is_stored() {
    let env = Env::with_limits(Limits {
        max_file_bytes: 16,
        ..Limits::default()
    });
    let svc = &env.svc;
    let r = env.agent(env.root);
    let blobs_before = svc.fsck().unwrap();
    let e = assert_kind(svc.kb_create(r, "big", &[b'x'; 17]), "invalid_input");
    assert!(
        e.to_string().contains("maximum file size of 16 bytes"),
        "{e}"
    );
    let f = svc.kb_create(r, "small", &[b'x'; 16]).unwrap();
    let v = svc.kb_read(r, f).unwrap();
    assert_kind(
        svc.kb_write(r, f, &[b'y'; 17], 1, v.hash.as_str()),
        "invalid_input",
    );
    let after = svc.fsck().unwrap();
    assert_eq!(after.versions_checked, blobs_before.versions_checked + 1);
    assert_eq!(after.unreferenced_blobs, blobs_before.unreferenced_blobs);
}

#[test]
fn system_files_and_bad_input_are_refused() {
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let a = env.outcome(env.root, "A", &[env.root.root()]);
    let v = svc.kb_read(r, a.file()).unwrap();
    assert!(v.text().contains("# Outcome: A"));
    assert_kind(
        svc.kb_write(r, a.file(), b"forged", v.version, v.hash.as_str()),
        "invalid_input",
    );
    assert_kind(
        svc.kb_write(
            Principal::User,
            a.file(),
            b"forged",
            v.version,
            v.hash.as_str(),
        ),
        "invalid_input",
    );
    assert_kind(svc.kb_create(r, "  ", b"x"), "invalid_input");
    assert_kind(svc.kb_create(r, "nul\0", b"x"), "invalid_input");
}

#[test]
fn state_document_is_read_write_for_its_handler_and_audit_log_is_appended_by_agency() {
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let s = svc.state_read(r, None).unwrap();
    svc.state_write(r, b"# working on A", s.version, s.hash.as_str())
        .unwrap();
    assert_eq!(
        svc.state_read(Principal::User, Some(env.root))
            .unwrap()
            .content,
        b"# working on A"
    );
    svc.audit_submit(r, "Triaged the inbox; created outcome A.")
        .unwrap();
    let log = svc.audit_read(r, None).unwrap();
    assert_eq!(
        log.last().unwrap().summary,
        "Triaged the inbox; created outcome A."
    );
    assert_eq!(log.last().unwrap().agent, r.agent_id());
    let view = svc.handler_view(r, env.root).unwrap();
    let rendered = svc.kb_read(r, view.audit_log).unwrap().text();
    assert!(rendered.contains("Triaged the inbox"), "{rendered}");
    // The handler may read its audit log but not write it.
    let v = svc.kb_read(r, view.audit_log).unwrap();
    assert_kind(
        svc.kb_write(r, view.audit_log, b"erased", v.version, v.hash.as_str()),
        "invalid_input",
    );
    assert_kind(svc.audit_submit(Principal::User, "x"), "invalid_input");
    assert_kind(svc.audit_submit(r, " "), "invalid_input");
}
