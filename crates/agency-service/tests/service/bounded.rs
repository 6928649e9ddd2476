//! Issue 9 items 9 and 10: every listing is bounded in rows and bytes and
//! pages with a cursor; the files Agency rewrites on every event (audit
//! logs, outcome files) stay the same size however long the history.

use std::collections::BTreeSet;

use agency_core::render::{HISTORY_SHOWN, LOG_ENTRIES_SHOWN};
use agency_core::{Limits, MailTarget, MessageId, Principal};
use agency_service::{MailBody, Service};

use crate::support::{Env, assert_kind};

fn text(t: String) -> MailBody {
    MailBody::Text {
        subject: None,
        text: t,
    }
}

/// Size of the latest version of a file, as the user sees it.
fn latest_size(svc: &Service, file: agency_core::FileId) -> i64 {
    let page = svc
        .kb_history_page(Principal::User, file, None, Some(1000))
        .unwrap();
    page.items.last().unwrap().size
}

#[test]
fn issue9_item10_audit_log_versions_do_not_grow_with_the_log() {
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let log = svc
        .handler_view(Principal::User, env.root)
        .unwrap()
        .audit_log;
    let entry = |i: usize| format!("session {i:05}: did the work, wrote it down");
    let mut at_20 = 0;
    for i in 0..120 {
        svc.audit_submit(r, &entry(i)).unwrap();
        if i == 19 {
            at_20 = latest_size(svc, log);
        }
    }
    let at_120 = latest_size(svc, log);
    // Same number of entries shown, same lengths: the same size, give or
    // take the digits of the "earlier entries" count. Rewriting the whole
    // log would make it six times larger.
    assert!(
        (at_120 - at_20).abs() <= 8,
        "audit log version grew from {at_20} to {at_120} bytes"
    );
    let file = svc.kb_read(Principal::User, log).unwrap().text();
    assert!(file.contains(&entry(119)), "{file}");
    assert!(!file.contains(&entry(119 - LOG_ENTRIES_SHOWN)), "{file}");
    assert!(file.contains("earlier entries; page through the whole log with audit_read"));

    // The rows keep everything: audit_read pages through all of it, in
    // order, each entry once.
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = svc
            .audit_read_page(Principal::User, Some(env.root), after, Some(7))
            .unwrap();
        assert!(page.items.len() <= 7);
        seen.extend(page.items.iter().map(|e| e.entry.summary.clone()));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    let submitted: Vec<String> = (0..120).map(entry).collect();
    let ours: Vec<String> = seen
        .into_iter()
        .filter(|s| s.starts_with("session "))
        .collect();
    assert_eq!(ours, submitted);
}

#[test]
fn issue9_item10_root_outcome_file_does_not_grow_with_inbox_cycles() {
    let env = Env::new();
    let svc = &env.svc;
    let root = env.root;
    let r = env.agent(root);
    let file = root.root().file();
    let cycle = |i: usize| {
        svc.mail_send(
            Principal::User,
            MailTarget::Handler(root),
            &text(format!("request {i}")),
        )
        .unwrap();
        let inbox = svc.mail_inbox(r, None).unwrap();
        let ids: Vec<MessageId> = inbox.iter().map(|m| m.id).collect();
        svc.mail_ack(r, &ids).unwrap();
    };
    for i in 0..20 {
        cycle(i);
    }
    let at_20 = latest_size(svc, file);
    for i in 20..80 {
        cycle(i);
    }
    let at_80 = latest_size(svc, file);
    assert!(
        (at_80 - at_20).abs() <= 16,
        "root outcome file grew from {at_20} to {at_80} bytes over 60 inbox cycles"
    );
    let md = svc.kb_read(Principal::User, file).unwrap().text();
    // Finishing a child re-renders its parents: none is left "not finished".
    assert!(
        md.contains("80 in all: 0 not finished, 80 finished."),
        "{md}"
    );
    assert!(md.contains("… and 70 more finished children"), "{md}");

    // outcome_view shows the newest events and the total; outcome_history
    // pages through all of them.
    let child = svc
        .outcome_subtree(Principal::User, root.root(), Some(1000))
        .unwrap()
        .outcomes
        .iter()
        .find(|o| o.process_inbox)
        .unwrap()
        .id;
    let view = svc.outcome_view(Principal::User, child).unwrap();
    assert_eq!(view.history_total, view.history.len() as i64);
    let hist = |id| {
        let mut all = Vec::new();
        let mut after = None;
        loop {
            let p = svc
                .outcome_history(Principal::User, id, after, Some(3))
                .unwrap();
            all.extend(p.items);
            match p.next {
                Some(n) => after = Some(n),
                None => return all,
            }
        }
    };
    let events = hist(child);
    assert_eq!(events.len() as i64, view.history_total);
    let seqs: BTreeSet<i64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(seqs.len(), events.len(), "each event once");
}

#[test]
fn issue9_item10_outcome_file_history_is_the_newest_events() {
    let env = Env::new();
    let svc = &env.svc;
    let a = env.outcome(env.root, "A", &[env.root.root()]);
    let r = env.agent(env.root);
    for i in 0..40 {
        svc.outcome_update(
            r,
            a,
            &agency_service::OutcomeUpdate {
                description: Some(format!("step {i:03}")),
                ..Default::default()
            },
        )
        .unwrap();
    }
    let md = svc.kb_read(Principal::User, a.file()).unwrap().text();
    let view = svc.outcome_view(Principal::User, a).unwrap();
    let earlier = view.history_total as usize - HISTORY_SHOWN;
    assert!(
        md.contains(&format!(
            "({earlier} earlier events; page through the whole history with outcome_history)"
        )),
        "{md}"
    );
    assert_eq!(md.matches("\n- 20").count(), HISTORY_SHOWN, "{md}");
    assert_eq!(view.history.len(), view.history_total.min(50) as usize);
}

#[test]
fn issue9_item9_inbox_pages_are_bounded_in_bytes_and_large_bodies_are_references() {
    let max = 200 * 1024;
    let env = Env::with_limits(Limits {
        max_file_bytes: max,
        ..Limits::default()
    });
    let svc = &env.svc;
    let root = env.root;
    let r = env.agent(root);
    let mut sent = Vec::new();
    for i in 0..12 {
        // Alternate large (over the inline budget) and small bodies.
        let body = if i % 2 == 0 {
            let mut t = format!("large {i}\n");
            t.push_str(&"x".repeat(max - t.len()));
            t
        } else {
            format!("small {i}")
        };
        sent.push(
            svc.mail_send(Principal::User, MailTarget::Handler(root), &text(body))
                .unwrap(),
        );
    }
    let lim = *svc.limits();
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = svc.mail_inbox_page(r, after, Some(1000)).unwrap();
        let inline: usize = page
            .items
            .iter()
            .filter_map(|m| m.body.as_ref())
            .map(String::len)
            .sum();
        assert!(
            inline <= lim.max_page_bytes,
            "{inline} bytes of bodies inline"
        );
        for m in &page.items {
            if m.body_truncated {
                assert_eq!(m.body, None);
                assert_eq!(m.body_size, Some(max as i64));
                // The reference works: the recipient reads it whole.
                let whole = svc.kb_read(r, m.file).unwrap().content;
                assert_eq!(whole.len(), max);
            } else {
                assert!(m.body.as_deref().unwrap().starts_with("small"));
            }
        }
        seen.extend(page.items.iter().map(|m| m.id));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    // Each message once (the clock stands still, so the order among equal
    // delivery times is by id).
    assert_eq!(seen.len(), sent.len());
    assert_eq!(
        seen.iter().collect::<BTreeSet<_>>(),
        sent.iter().collect::<BTreeSet<_>>()
    );

    // A page of at most `limit`, with the cursor for the rest.
    let first = svc.mail_inbox_page(r, None, Some(5)).unwrap();
    assert_eq!(first.items.len(), 5);
    assert_eq!(first.next, Some(seen[4]));

    // The cursor must be one of the caller's own messages.
    let other = svc
        .mail_send(r, MailTarget::User, &text("to the user".into()))
        .unwrap();
    assert_kind(svc.mail_inbox_page(r, Some(other), None), "invalid_input");
}

#[test]
fn issue9_item9_kb_listings_and_history_page_by_bytes_and_rows() {
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let long = "d".repeat(19_000);
    let mut made = BTreeSet::new();
    for i in 0..40 {
        made.insert(svc.kb_create(r, &format!("{i} {long}"), b"x").unwrap());
    }
    let budget = svc.limits().max_page_bytes;
    let mut seen = BTreeSet::new();
    let mut after = None;
    let mut pages = 0;
    loop {
        let page = svc.kb_list_page(r, after, Some(1000)).unwrap();
        let bytes: usize = page.items.iter().map(|f| f.description.len()).sum();
        assert!(bytes <= budget, "{bytes} bytes of descriptions in one page");
        for f in &page.items {
            assert!(seen.insert(f.id), "listed twice");
        }
        pages += 1;
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert!(
        pages > 1,
        "40 × 19 kB of descriptions needs more than one page"
    );
    assert!(made.is_subset(&seen));

    let f = *made.iter().next().unwrap();
    let mut v = svc.kb_read(r, f).unwrap();
    for i in 0..9 {
        svc.kb_write(r, f, format!("v{i}").as_bytes(), v.version, v.hash.as_str())
            .unwrap();
        v = svc.kb_read(r, f).unwrap();
    }
    let p1 = svc.kb_history_page(r, f, None, Some(4)).unwrap();
    assert_eq!(
        p1.items.iter().map(|v| v.version).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    assert_eq!(p1.next, Some(4));
    let p3 = svc.kb_history_page(r, f, Some(8), Some(4)).unwrap();
    assert_eq!(
        p3.items.iter().map(|v| v.version).collect::<Vec<_>>(),
        [9, 10]
    );
    assert_eq!(p3.next, None);
}
