//! Issue 13 item 5 from the command line: `agency memory search`, `show`,
//! `delete`, `status`, `compactions` and `undo` (text and `--json`)
//! against a real `agency serve`, memories that survive a restart of the
//! daemon, and a memory id of one handler that is not found under another.

#![allow(clippy::unwrap_used)]

use agency_config::Home;
use agency_core::{MemoryId, Principal};
use agency_service::NewOutcome;

use crate::home_cli;

use home_cli::{agency, json, ok, serve, stop};

#[test]
fn issue13_memory_commands_against_a_real_daemon() {
    let tmp = tempfile::tempdir().unwrap();
    let home = Home::new(tmp.path().join("home"));
    home.init().unwrap();
    // Memories stored by the agents of two handlers (root and an
    // underling), one condensation; the store is closed before the daemon
    // opens it.
    let (root, under, ids) = {
        let svc = home.open_service().unwrap();
        let root = svc.root_handler().unwrap().unwrap();
        let ra = Principal::agent(root, svc.agent_start(root).unwrap());
        let o = svc
            .outcome_create(
                ra,
                &NewOutcome {
                    title: "Under".into(),
                    parents: vec![root.root()],
                    ..Default::default()
                },
            )
            .unwrap();
        let under = svc.delegate(ra, o, &[]).unwrap().handler;
        let ua = Principal::agent(under, svc.agent_start(under).unwrap());
        let s = |who, text: &str, tags: &[&str]| {
            let tags: Vec<String> = tags.iter().map(|t| (*t).to_owned()).collect();
            svc.memory_store(who, text, &tags, Some("fact")).unwrap().id
        };
        let tea = s(ra, "The user drinks green tea\nin the morning", &["user"]);
        let a1 = s(ra, "The garden needs water on Mondays", &[]);
        let a2 = s(ra, "The garden hose is in the shed", &[]);
        let secret = s(ua, "Underling's note: tea supplier is Leaf & Co", &[]);
        let k = svc
            .memory_condense(
                ra,
                &[a1, a2],
                "Garden: water Mondays; hose in the shed",
                &[],
                None,
            )
            .unwrap();
        for a in [ra, ua] {
            svc.agent_end(a.agent_id().unwrap(), "test").unwrap();
        }
        (
            root,
            under,
            vec![tea, a1, a2, secret, k.summary.id, MemoryId(k.compaction.0)],
        )
    };
    let [tea, a1, a2, secret, summary, compaction] = ids[..] else {
        panic!("six ids");
    };
    let (r8, u8_) = (&root.to_string()[..8], &under.to_string()[..8]);
    let daemon = serve(&home, &tmp.path().join("daemon1.log"));

    // Search: ranked table; only the named handler's memories.
    let out = ok(&home, &["memory", "search", r8, "tea"]);
    assert!(out.starts_with("ID"), "{out}");
    assert!(out.contains(&tea.to_string()), "{out}");
    assert!(out.contains("The user drinks green tea…"), "{out}");
    assert!(!out.contains(&secret.to_string()), "{out}");
    let v = json(&home, &["memory", "search", u8_, "tea"]);
    assert_eq!(v.as_array().unwrap().len(), 1);
    assert_eq!(v[0]["id"], secret.to_string());
    let v = json(&home, &["memory", "search", r8, "garden", "--tag", "user"]);
    assert!(v.as_array().unwrap().is_empty(), "{v}");
    let out = ok(&home, &["memory", "search", r8, "garden"]);
    assert!(out.contains(&summary.to_string()), "{out}");
    assert!(!out.contains(&a1.to_string()), "{out}");
    let v = json(&home, &["memory", "search", r8, "garden", "--all"]);
    assert_eq!(v.as_array().unwrap().len(), 3, "{v}");
    let (code, _, err) = agency(&home, &["memory", "search", r8, "*", "("]);
    assert_ne!(code, 0);
    assert!(err.contains("no word"), "{err}");

    // Status, compactions, show.
    let st = json(&home, &["memory", "status", r8]);
    assert_eq!(st["counts"]["live"], 2);
    assert_eq!(st["counts"]["condensed"], 2);
    assert_eq!(st["embeddings_model"], serde_json::Value::Null);
    let out = ok(&home, &["memory", "status", r8]);
    assert!(out.contains("2 live memories"), "{out}");
    assert!(out.contains("embeddings: not configured"), "{out}");
    let out = ok(&home, &["memory", "compactions", r8]);
    assert!(out.contains(&compaction.to_string()), "{out}");
    assert!(out.contains("done"), "{out}");
    let out = ok(&home, &["memory", "show", r8, &a2.to_string()]);
    assert!(out.contains("condensed"), "{out}");
    assert!(out.contains("  The garden hose is in the shed"), "{out}");

    // Another handler's memory id under this handler: not found.
    let (code, _, err) = agency(&home, &["memory", "delete", r8, &secret.to_string()]);
    assert_ne!(code, 0);
    assert!(
        err.contains("not_found") || err.contains("no such memory"),
        "{err}"
    );
    // Ids are prefixes like every other (issue 28); this one is none.
    let (code, _, err) = agency(&home, &["memory", "show", r8, "abc"]);
    assert_ne!(code, 0);
    assert!(err.contains("no such memory"), "{err}");

    // Undo the condensation, delete a memory; then restart the daemon.
    let out = ok(&home, &["memory", "undo", r8, &compaction.to_string()]);
    assert!(out.contains("2 memories are live again"), "{out}");
    ok(&home, &["memory", "delete", r8, &tea.to_string()]);
    stop(&home, daemon);

    let daemon = serve(&home, &tmp.path().join("daemon2.log"));
    let v = json(&home, &["memory", "search", r8, "garden"]);
    let mut got: Vec<String> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap().to_owned())
        .collect();
    got.sort();
    let mut want = vec![a1.to_string(), a2.to_string()];
    want.sort();
    assert_eq!(got, want);
    assert!(
        json(&home, &["memory", "search", r8, "tea"])
            .as_array()
            .unwrap()
            .is_empty()
    );
    let st = json(&home, &["memory", "status", r8]);
    assert_eq!(st["counts"]["live"], 2);
    assert_eq!(st["counts"]["forgotten"], 2);
    let ks = json(&home, &["memory", "compactions", r8]);
    assert_eq!(ks[0]["status"], "undone");
    stop(&home, daemon);
}
