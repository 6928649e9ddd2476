//! Behaviour of the SQLite backend through the `Store` / `Tx` traits:
//! persistence and migrations, uniqueness rules, DAG and tree walks,
//! revocation cascades, KB visibility, mail scheduling, transaction
//! atomicity (errors, panics, concurrency) and index use of hot queries.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

use agency_core::access::FileKind;
use agency_core::{
    AgentId, CapabilityId, FileId, HandlerId, Level, MailTarget, MessageId, OutcomeId,
    OutcomeStatus, Resource, Timestamp,
};
use agency_store::{
    AgentRow, BlobId, CapOrigin, FileRow, HandlerRow, HandlerStatus, KbAction, KbAuditRow,
    KbCandidate, LogEntryRow, MessageRow, NewCapability, OutcomeEventRow, OutcomeRow,
    RevokeSelector, SqliteStore, StoreError, Tx, VersionRow, read, write,
};
use tempfile::TempDir;
use uuid::Uuid;

type R<T> = Result<T, StoreError>;

fn open() -> (TempDir, SqliteStore) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(&dir.path().join("agency.db")).expect("open store");
    (dir, store)
}

fn uuid(n: u128) -> Uuid {
    Uuid::from_u128(n)
}
fn hid(n: u128) -> HandlerId {
    HandlerId(uuid(n))
}
fn oid(n: u128) -> OutcomeId {
    OutcomeId(uuid(n))
}
fn fid(n: u128) -> FileId {
    FileId(uuid(n))
}

// Disjoint id ranges so that ids sort predictably: handlers / outcomes are
// small numbers, their state documents, audit logs and other files above.
const STATE: u128 = 0x1_0000;
const AUDIT: u128 = 0x2_0000;
const DOC: u128 = 0x3_0000;

fn file(id: FileId, kind: FileKind, description: &str, owner: Option<HandlerId>) -> FileRow {
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

fn outcome(id: OutcomeId, responsible: HandlerId) -> OutcomeRow {
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
fn add_outcome(tx: &mut dyn Tx, o: OutcomeRow) -> R<()> {
    tx.insert_file(&file(o.id.file(), FileKind::Outcome, &o.title, None))?;
    tx.insert_outcome(&o)
}

/// A handler numbered `n` (its root outcome is `oid(n)`), with its root
/// outcome (perpetual for the root handler), state document and audit log.
fn add_handler(tx: &mut dyn Tx, n: u128, boss: Option<HandlerId>) -> R<HandlerId> {
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

fn cap(
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

fn version(f: FileId, v: i64) -> VersionRow {
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

fn agent(id: u128, handler: HandlerId, started: i64) -> AgentRow {
    AgentRow {
        id: aid(id),
        handler,
        started_at: Timestamp(started),
        ended_at: None,
        end_reason: None,
    }
}

fn aid(n: u128) -> AgentId {
    AgentId(uuid(n))
}
fn mid(n: u128) -> MessageId {
    MessageId(uuid(n))
}

/// Run a read transaction; an error fails the test.
fn rd<T>(store: &SqliteStore, f: impl FnOnce(&mut dyn Tx) -> R<T>) -> T {
    read(store, f).unwrap_or_else(|e| panic!("read transaction failed: {e}"))
}

/// Run a write transaction; an error fails the test.
fn wr<T>(store: &SqliteStore, f: impl FnOnce(&mut dyn Tx) -> R<T>) -> T {
    write(store, f).unwrap_or_else(|e| panic!("write transaction failed: {e}"))
}

/// Run a write transaction that must fail, returning its error.
fn wr_err<T: std::fmt::Debug>(
    store: &SqliteStore,
    f: impl FnOnce(&mut dyn Tx) -> R<T>,
) -> StoreError {
    write(store, f).expect_err("the write transaction should fail")
}

// ---- persistence and migrations ---------------------------------------------

#[test]
fn data_survives_reopen_and_migrations_are_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agency.db");
    let (h, state) = (hid(1), fid(STATE + 1));
    let store = SqliteStore::open(&path).unwrap();
    wr(&store, |tx| {
        add_handler(tx, 1, None)?;
        tx.insert_version(&version(state, 1))?;
        let summary = "born".to_owned();
        tx.insert_log_entry(&LogEntryRow {
            handler: h,
            at: Timestamp(7),
            agent: None,
            summary,
        })
    });
    drop(store);
    // Reopen twice: the second and third opens find the schema current.
    for _ in 0..2 {
        let store = SqliteStore::open(&path).unwrap();
        rd(&store, |tx| {
            assert_eq!(tx.handler(h)?.unwrap().state_doc, state);
            assert_eq!(tx.file(state)?.unwrap().latest_version, 1);
            assert_eq!(tx.versions(state)?, [version(state, 1)]);
            assert_eq!(tx.log_entries(h)?[0].summary, "born");
            Ok(())
        });
        drop(store);
        let raw = rusqlite::Connection::open(&path).unwrap();
        let v: i64 = raw
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, SqliteStore::SCHEMA_VERSION);
        let mode: String = raw
            .query_row("PRAGMA journal_mode", [], |r| r.get(0))
            .unwrap();
        assert_eq!(mode, "wal");
    }
}

#[test]
fn newer_schema_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agency.db");
    drop(SqliteStore::open(&path).unwrap());
    let newer = SqliteStore::SCHEMA_VERSION + 3;
    let raw = rusqlite::Connection::open(&path).unwrap();
    raw.pragma_update(None, "user_version", newer).unwrap();
    let err = SqliteStore::open(&path).unwrap_err().to_string();
    let want = format!(
        "failed to open database {}: schema version {newer} is newer than this build supports ({})",
        path.display(),
        SqliteStore::SCHEMA_VERSION
    );
    assert_eq!(err, want);
}

#[test]
fn undecodable_values_are_reported_as_corrupt() {
    let (dir, store) = open();
    wr(&store, |tx| add_handler(tx, 1, None));
    let raw = rusqlite::Connection::open(dir.path().join("agency.db")).unwrap();
    raw.execute("UPDATE outcomes SET status = 'pondering'", [])
        .unwrap();
    let err = read(&store, |tx| tx.outcome(oid(1))).unwrap_err();
    let StoreError::Corrupt { what, value } = &err else {
        panic!("{err:?}")
    };
    assert_eq!((*what, value.as_str()), ("outcome status", "pondering"));
}

// ---- uniqueness and integrity ------------------------------------------------

#[test]
fn duplicate_version_is_unique_and_latest_version_follows_inserts() {
    let (_dir, store) = open();
    let f = fid(DOC + 1);
    wr(&store, |tx| {
        tx.insert_file(&file(f, FileKind::Document, "notes", None))?;
        tx.insert_version(&version(f, 1))
    });
    let err = wr_err(&store, |tx| tx.insert_version(&version(f, 1)));
    assert!(matches!(err, StoreError::Unique { .. }), "{err:?}");
    let prefix = format!("failed to insert version 1 of file {f}: ");
    assert!(err.to_string().starts_with(&prefix), "{err}");
    wr(&store, |tx| tx.insert_version(&version(f, 2)));
    rd(&store, |tx| {
        assert_eq!(tx.file(f)?.unwrap().latest_version, 2);
        assert_eq!(tx.version(f, 1)?, Some(version(f, 1)));
        assert_eq!(tx.version(f, 3)?, None);
        assert_eq!(tx.all_versions()?, [version(f, 1), version(f, 2)]);
        Ok(())
    });
    // A version of a missing file is refused rather than left dangling, and
    // so is an update of a missing row.
    let missing = fid(DOC + 9);
    let err = wr_err(&store, |tx| tx.insert_version(&version(missing, 1)));
    assert!(matches!(err, StoreError::Backend { .. }), "{err:?}");
    let err = wr_err(&store, |tx| tx.set_file_description(missing, "x"));
    assert_eq!(
        err.to_string(),
        format!("failed to set the description of file {missing}: no such row")
    );
}

#[test]
fn one_live_agent_per_handler() {
    let (_dir, store) = open();
    let h = wr(&store, |tx| add_handler(tx, 1, None));
    wr(&store, |tx| tx.insert_agent(&agent(100, h, 1)));
    let err = wr_err(&store, |tx| tx.insert_agent(&agent(101, h, 2)));
    let StoreError::Unique { op, message } = &err else {
        panic!("expected Unique: {err:?}")
    };
    assert_eq!(op, &format!("insert agent {} for handler {h}", aid(101)));
    assert_eq!(message, &format!("handler {h} already has a live agent"));

    assert!(wr(&store, |tx| tx.end_agent(
        aid(100),
        Timestamp(3),
        "exited"
    )));
    assert!(
        !wr(&store, |tx| tx.end_agent(aid(100), Timestamp(4), "again")),
        "no longer live"
    );
    wr(&store, |tx| tx.insert_agent(&agent(101, h, 5)));
    rd(&store, |tx| {
        let old = tx.agent(aid(100))?.unwrap();
        assert_eq!(
            (old.ended_at, old.end_reason.as_deref()),
            (Some(Timestamp(3)), Some("exited"))
        );
        assert_eq!(tx.live_agents()?, [agent(101, h, 5)]);
        assert_eq!(tx.live_agents_of(&[h, hid(9)])?, [agent(101, h, 5)]);
        assert_eq!(tx.live_agents_of(&[hid(9)])?, []);
        let recent: Vec<_> = tx.recent_agents(10)?.into_iter().map(|a| a.id).collect();
        assert_eq!(recent, [aid(101), aid(100)], "newest first");
        assert_eq!(tx.counts()?.agents_live, 1);
        Ok(())
    });
}

#[test]
fn dangling_foreign_key_fails_at_commit_and_persists_nothing() {
    let (_dir, store) = open();
    let err = wr_err(&store, |tx| tx.insert_agent(&agent(100, hid(42), 1)));
    assert!(err.to_string().contains("FOREIGN KEY"), "{err}");
    assert_eq!(rd(&store, |tx| tx.agent(aid(100))), None);
}

// ---- capabilities ------------------------------------------------------------

struct Chain {
    a: CapabilityId,
    b: CapabilityId,
    c: CapabilityId,
    d: CapabilityId,
    unrelated: CapabilityId,
    mail_h2: CapabilityId,
    mail_h2_derived: CapabilityId,
    mail_h3: CapabilityId,
}

/// h1 holds A; B (h2, scoped to outcome 50) derives from A; C (h3) from B;
/// D (h4) from C. Plus an unrelated capability and mail capabilities: to h2
/// (and one derived from it, held by h3) and to h3.
fn cap_chain(store: &SqliteStore) -> Chain {
    wr(store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        let h2 = add_handler(tx, 2, Some(h1))?;
        let h3 = add_handler(tx, 3, Some(h2))?;
        let h4 = add_handler(tx, 4, Some(h3))?;
        add_outcome(tx, outcome(oid(50), h2))?;
        let kb = Resource::Kb(fid(STATE + 1));
        let mut insert = |c: NewCapability| tx.insert_capability(&c);
        let a = insert(cap(h1, kb.clone(), Level::Write, None))?;
        let b = insert(NewCapability {
            scope: Some(oid(50)),
            ..cap(h2, kb.clone(), Level::Read, Some(a))
        })?;
        let c = insert(cap(h3, kb.clone(), Level::Read, Some(b)))?;
        let d = insert(cap(h4, kb, Level::None, Some(c)))?;
        let unrelated = insert(cap(h2, Resource::Repo("agency".into()), Level::Read, None))?;
        let mail = |to| Resource::Mail(MailTarget::Handler(to));
        let mail_h2 = insert(cap(h1, mail(h2), Level::Write, None))?;
        let mail_h2_derived = insert(cap(h3, mail(h2), Level::Write, Some(mail_h2)))?;
        let mail_h3 = insert(cap(h2, mail(h3), Level::Write, None))?;
        Ok(Chain {
            a,
            b,
            c,
            d,
            unrelated,
            mail_h2,
            mail_h2_derived,
            mail_h3,
        })
    })
}

/// Revoke, check the returned rows carry the time, return their ids.
fn revoke(store: &SqliteStore, selector: RevokeSelector) -> Vec<CapabilityId> {
    let rows = wr(store, |tx| tx.revoke(&selector, Timestamp(99)));
    assert!(
        rows.iter().all(|r| r.revoked_at == Some(Timestamp(99))),
        "{rows:?}"
    );
    rows.iter().map(|r| r.id).collect()
}

fn live(store: &SqliteStore, ids: &[CapabilityId]) -> Vec<bool> {
    rd(store, |tx| {
        ids.iter()
            .map(|id| {
                Ok(tx
                    .capability(*id)?
                    .expect("capability exists")
                    .revoked_at
                    .is_none())
            })
            .collect()
    })
}

#[test]
fn revoke_cascades_through_derived_from() {
    let (_d, store) = open();
    let k = cap_chain(&store);
    let all = [
        k.a,
        k.b,
        k.c,
        k.d,
        k.unrelated,
        k.mail_h2,
        k.mail_h2_derived,
        k.mail_h3,
    ];
    assert_eq!(
        revoke(&store, RevokeSelector::Ids(vec![k.a])),
        [k.a, k.b, k.c, k.d]
    );
    assert_eq!(
        live(&store, &all),
        [false, false, false, false, true, true, true, true]
    );
    assert_eq!(
        revoke(&store, RevokeSelector::Ids(vec![k.a, k.b])),
        [],
        "already revoked"
    );
    let mail = revoke(&store, RevokeSelector::MailTo(vec![hid(2)]));
    assert_eq!(mail, [k.mail_h2, k.mail_h2_derived]);
    assert_eq!(live(&store, &all[4..]), [true, false, false, true]);

    let (_d, store) = open();
    let k = cap_chain(&store);
    assert_eq!(
        revoke(&store, RevokeSelector::ScopedTo(oid(50))),
        [k.b, k.c, k.d]
    );
    assert_eq!(live(&store, &[k.a, k.unrelated, k.mail_h2]), [true; 3]);

    let (_d, store) = open();
    let k = cap_chain(&store);
    let held_by = revoke(&store, RevokeSelector::HeldBy(vec![hid(3), hid(9)]));
    assert_eq!(held_by, [k.c, k.d, k.mail_h2_derived]);
    assert_eq!(
        live(&store, &[k.a, k.b, k.unrelated, k.mail_h2, k.mail_h3]),
        [true; 5]
    );
    rd(&store, |tx| {
        let held: Vec<_> = tx
            .capabilities_held(hid(2))?
            .into_iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(held, [k.b, k.unrelated, k.mail_h3]);
        let on = tx.capabilities_on(hid(2), &Resource::Kb(fid(STATE + 1)))?;
        assert_eq!(on.len(), 1);
        assert_eq!(
            (on[0].id, on[0].level, on[0].scope),
            (k.b, Level::Read, Some(oid(50)))
        );
        assert_eq!(
            (on[0].derived_from, on[0].origin),
            (Some(k.a), CapOrigin::Grant)
        );
        assert_eq!(
            tx.capabilities_on(hid(3), &Resource::Kb(fid(STATE + 1)))?,
            []
        );
        Ok(())
    });
}

// ---- outcome DAG ---------------------------------------------------------------

/// The diamond 1 -> {2, 3} -> 4 -> 5, plus an unconnected outcome 6.
fn diamond(store: &SqliteStore) -> HandlerId {
    wr(store, |tx| {
        let h = add_handler(tx, 1, None)?;
        for n in 2..=6 {
            add_outcome(tx, outcome(oid(n), h))?;
        }
        for (p, c) in [(1, 3), (1, 2), (2, 4), (3, 4), (4, 5), (1, 2)] {
            tx.insert_edge(oid(p), oid(c))?; // (1, 2) twice: idempotent
        }
        Ok(h)
    })
}

fn edge(p: u128, c: u128) -> (OutcomeId, OutcomeId) {
    (oid(p), oid(c))
}

fn ids(rows: &[OutcomeRow]) -> Vec<OutcomeId> {
    rows.iter().map(|o| o.id).collect()
}

#[test]
fn dag_walks_on_a_diamond() {
    let (_d, store) = open();
    diamond(&store);
    rd(&store, |tx| {
        assert_eq!(tx.parents(oid(4))?, [oid(2), oid(3)]);
        assert_eq!(tx.children(oid(1))?, [oid(2), oid(3)]);
        let all = [edge(1, 2), edge(1, 3), edge(2, 4), edge(3, 4), edge(4, 5)];
        assert_eq!(
            tx.ancestor_edges(oid(5))?,
            all,
            "ordered by (child, parent)"
        );
        assert_eq!(tx.ancestor_edges(oid(2))?, [edge(1, 2)]);
        assert_eq!(tx.ancestor_edges(oid(1))?, []);
        for (node, ancestor, want) in [
            (5, 1, true),
            (4, 3, true),
            (3, 3, true),
            (1, 5, false),
            (3, 2, false),
            (6, 1, false),
        ] {
            assert_eq!(
                tx.is_descendant_or_self(oid(node), oid(ancestor))?,
                want,
                "{node} under {ancestor}"
            );
        }
        let (rows, edges) = tx.subtree(oid(1), 100)?;
        assert_eq!(
            ids(&rows),
            [1, 2, 3, 4, 5].map(oid),
            "breadth-first, each once"
        );
        assert_eq!(edges, all);
        let (rows, edges) = tx.subtree(oid(1), 3)?;
        assert_eq!(ids(&rows), [1, 2, 3].map(oid));
        assert_eq!(
            edges,
            [edge(1, 2), edge(1, 3)],
            "only edges among the returned rows"
        );
        let (rows, edges) = tx.subtree(oid(3), 10)?;
        assert_eq!(ids(&rows), [3, 4, 5].map(oid));
        assert_eq!(edges, [edge(3, 4), edge(4, 5)]);
        Ok(())
    });
    wr(&store, |tx| tx.delete_edge(oid(3), oid(4)));
    assert_eq!(rd(&store, |tx| tx.parents(oid(4))), [oid(2)]);
}

#[test]
fn reassignment_and_outcome_listings() {
    let (_d, store) = open();
    let h1 = diamond(&store);
    let (h7, h8) = wr(&store, |tx| {
        let h7 = add_handler(tx, 7, Some(h1))?;
        let h8 = add_handler(tx, 8, Some(h1))?;
        // Outcome 5 belongs to h7 already: reassigning h1's work below 3
        // must not take it along.
        tx.update_outcome(&OutcomeRow {
            priority: 3,
            ..outcome(oid(5), h7)
        })?;
        Ok((h7, h8))
    });
    assert_eq!(
        wr(&store, |tx| tx.reassign_subtree(
            oid(3),
            h1,
            h8,
            Timestamp(77)
        )),
        2
    );
    rd(&store, |tx| {
        for (o, who) in [(1, h1), (2, h1), (3, h8), (4, h8), (5, h7), (6, h1)] {
            assert_eq!(tx.outcome(oid(o))?.unwrap().responsible, who, "outcome {o}");
        }
        assert_eq!(tx.outcome(oid(3))?.unwrap().updated_at, Timestamp(77));
        assert_eq!(tx.outcome(oid(2))?.unwrap().updated_at, Timestamp(10));
        Ok(())
    });
    // 3, 4, 5 and the roots of 7 and 8.
    assert_eq!(
        wr(&store, |tx| tx.reassign_all(&[h8, h7], h1, Timestamp(78))),
        5
    );
    let mine = rd(&store, |tx| tx.outcomes_of(h1, 100));
    assert_eq!(mine.len(), 8);
    assert_eq!(mine[0].id, oid(5), "highest priority first");
    assert_eq!(
        ids(&mine[1..4]),
        [1, 2, 3].map(oid),
        "then oldest, then by id"
    );
    assert_eq!(rd(&store, |tx| tx.outcomes_of(h1, 2)).len(), 2);

    wr(&store, |tx| {
        let done = OutcomeRow {
            process_inbox: true,
            status: OutcomeStatus::Completed,
            ..outcome(oid(20), h1)
        };
        add_outcome(tx, done)?;
        add_outcome(
            tx,
            OutcomeRow {
                process_inbox: true,
                ..outcome(oid(21), h1)
            },
        )?;
        for (at, action) in [(3, "b"), (1, "a"), (3, "c")] {
            let (handler, action, detail) = (Some(h1), action.to_owned(), String::new());
            let at = Timestamp(at);
            tx.insert_outcome_event(&OutcomeEventRow {
                outcome: oid(21),
                at,
                handler,
                agent: None,
                action,
                detail,
            })?;
        }
        Ok(())
    });
    rd(&store, |tx| {
        assert_eq!(tx.open_process_inbox(h1)?, Some(oid(21)));
        assert_eq!(tx.open_process_inbox(h7)?, None);
        let actions: Vec<_> = tx
            .outcome_events(oid(21))?
            .into_iter()
            .map(|e| e.action)
            .collect();
        assert_eq!(
            actions,
            ["a", "b", "c"],
            "oldest first, then in insertion order"
        );
        Ok(())
    });
}

// ---- handlers --------------------------------------------------------------------

#[test]
fn handler_tree_and_work() {
    let (_d, store) = open();
    wr(&store, |tx| {
        let root = add_handler(tx, 1, None)?; // only its perpetual root: no work
        let h2 = add_handler(tx, 2, Some(root))?; // its root is open: work
        let h3 = add_handler(tx, 3, Some(root))?; // blocked root, finished/perpetual rest
        let h4 = add_handler(tx, 4, Some(h2))?; // deactivated, with open work
        add_handler(tx, 5, Some(h4))?; // open root: work
        tx.update_outcome(&OutcomeRow {
            status: OutcomeStatus::Blocked,
            ..outcome(h3.root(), h3)
        })?;
        add_outcome(
            tx,
            OutcomeRow {
                status: OutcomeStatus::Completed,
                ..outcome(oid(30), h3)
            },
        )?;
        add_outcome(
            tx,
            OutcomeRow {
                perpetual: true,
                ..outcome(oid(31), h3)
            },
        )?;
        let h4row = tx.handler(h4)?.unwrap();
        tx.update_handler(&HandlerRow {
            status: HandlerStatus::Deactivated,
            ..h4row
        })
    });
    rd(&store, |tx| {
        assert_eq!(tx.handlers_with_work(None, 10)?, [hid(2), hid(5)]);
        assert_eq!(tx.handlers_with_work(Some(hid(2)), 10)?, [hid(5)]);
        assert_eq!(tx.handlers_with_work(None, 1)?, [hid(2)]);
        let work = (1..=6)
            .map(|n| tx.has_work(hid(n)))
            .collect::<R<Vec<_>>>()?;
        assert_eq!(work, [false, true, false, false, true, false]);

        assert_eq!(tx.root_handler()?.unwrap().id, hid(1));
        let hids = |rows: Vec<HandlerRow>| rows.into_iter().map(|h| h.id).collect::<Vec<_>>();
        assert_eq!(hids(tx.handler_subtree(hid(2))?), [2, 4, 5].map(hid));
        assert_eq!(hids(tx.handler_subtree(hid(1))?), [1, 2, 3, 4, 5].map(hid));
        assert_eq!(hids(tx.underlings(hid(1))?), [2, 3].map(hid));
        assert_eq!(hids(tx.handlers(Some(hid(2)), 2)?), [3, 4].map(hid));
        assert_eq!(hids(tx.handlers(None, 100)?), [1, 2, 3, 4, 5].map(hid));
        let counts = tx.counts()?;
        assert_eq!(
            (
                counts.handlers_active,
                counts.outcomes_open,
                counts.agents_live
            ),
            (4, 5, 0)
        );
        assert_eq!(
            counts.files,
            5 * 3 + 2,
            "root outcome, state and audit log each, plus 30, 31"
        );
        Ok(())
    });
}

#[test]
fn hot_queries_use_indexes() {
    let (_d, store) = open();
    let plans = store.query_plans().unwrap();
    let plan = |name| {
        plans
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, p)| p.clone())
            .unwrap()
    };
    for name in ["has_work", "handlers_with_work"] {
        let p = plan(name);
        assert!(
            p.contains("USING INDEX") || p.contains("USING COVERING INDEX"),
            "{name}: {p}"
        );
        assert!(p.contains("outcomes_open_work"), "{name}: {p}");
        // The outcomes table is aliased `o` in these queries.
        assert!(
            !p.lines()
                .any(|l| l.starts_with("SCAN o") || l.starts_with("SCAN outcomes")),
            "{name}: {p}"
        );
    }
    for name in ["due_messages", "inbox"] {
        let p = plan(name);
        assert!(p.contains("USING INDEX messages_"), "{name}: {p}");
        assert!(
            !p.contains("TEMP B-TREE"),
            "{name} should not need a sort: {p}"
        );
    }
}

// ---- KB --------------------------------------------------------------------------

/// Handlers 1 (root) -> 2 (B, the caller) -> 3 (B's underling) -> 4, and
/// 1 -> 5 (B's sibling); the outcome DAG follows, plus B's own child 6.
/// Documents DOC+1.. with capabilities of B (one revoked) and of 5.
fn kb_fixture(store: &SqliteStore) {
    wr(store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        let b = add_handler(tx, 2, Some(h1))?;
        let u = add_handler(tx, 3, Some(b))?;
        add_handler(tx, 4, Some(u))?;
        add_handler(tx, 5, Some(h1))?;
        add_outcome(tx, outcome(oid(6), b))?;
        for (p, c) in [(1, 2), (2, 3), (3, 4), (1, 5), (2, 6)] {
            tx.insert_edge(oid(p), oid(c))?;
        }
        let docs = [
            (1, "Quarterly REPORT, 100% done"),
            (2, "snake_case naming guide"),
            (3, "snakeXcase decoy"),
            (4, "revoked report"),
            (5, "someone else's report"),
            (6, "back\\slash report"),
        ];
        for (n, d) in docs {
            tx.insert_file(&file(fid(DOC + n), FileKind::Document, d, None))?;
        }
        let kb = |n| Resource::Kb(fid(DOC + n));
        let mut grant = |holder, r, level| tx.insert_capability(&cap(holder, r, level, None));
        grant(b, kb(1), Level::None)?;
        grant(b, kb(1), Level::Write)?;
        grant(b, kb(2), Level::Read)?;
        grant(b, kb(3), Level::Read)?;
        let revoked = grant(b, kb(4), Level::Read)?;
        grant(hid(5), kb(5), Level::Read)?;
        grant(b, kb(6), Level::Read)?;
        // On B's own state document: merged with `owned` into one candidate.
        grant(b, Resource::Kb(fid(STATE + 2)), Level::Read)?;
        tx.revoke(&RevokeSelector::Ids(vec![revoked]), Timestamp(9))
            .map(drop)
    });
}

fn search(
    store: &SqliteStore,
    who: Option<HandlerId>,
    terms: &[&str],
    after: Option<FileId>,
    n: usize,
) -> Vec<KbCandidate> {
    let terms: Vec<String> = terms.iter().map(|t| t.to_string()).collect();
    rd(store, |tx| tx.kb_candidates(who, &terms, after, n))
}

#[test]
fn kb_candidates_follow_visibility_rules() {
    let (_d, store) = open();
    kb_fixture(&store);
    let b = Some(hid(2));
    let got = search(&store, b, &[], None, 100);
    let facts: Vec<_> = got
        .iter()
        .map(|c| (c.file.id, c.cap, c.owned, c.of_underling, c.outcome_in_area))
        .collect();
    let mut want = vec![
        // (c) outcomes in B's area: its ancestor 1, itself, and 3, 4, 6 below.
        (fid(1), None, false, false, true),
        (fid(2), None, false, false, true),
        (fid(3), None, false, false, true),
        (fid(4), None, false, false, true),
        (fid(6), None, false, false, true),
        // (b) its own state document (also capped) and audit log, and those
        // of its direct underling 3; not those of 4, of its boss or sibling.
        (fid(STATE + 2), Some(Level::Read), true, false, false),
        (fid(STATE + 3), None, false, true, false),
        (fid(AUDIT + 2), None, true, false, false),
        (fid(AUDIT + 3), None, false, true, false),
        // (a) live capabilities, the highest level per file.
        (fid(DOC + 1), Some(Level::Write), false, false, false),
        (fid(DOC + 2), Some(Level::Read), false, false, false),
        (fid(DOC + 3), Some(Level::Read), false, false, false),
        (fid(DOC + 6), Some(Level::Read), false, false, false),
    ];
    want.sort_by_key(|w| w.0);
    assert_eq!(facts, want);
    assert_eq!(
        (got[0].file.kind, got[0].file.description.as_str()),
        (
            FileKind::Outcome,
            "outcome 00000000-0000-0000-0000-000000000001"
        )
    );

    // The user sees every file, with no facts attached.
    let all = search(&store, None, &[], None, 1000);
    assert_eq!(
        all.len(),
        6 + 5 * 2 + 6,
        "outcome files, state documents and audit logs, documents"
    );
    assert!(all.windows(2).all(|w| w[0].file.id < w[1].file.id));
    assert!(
        all.iter()
            .all(|c| c.cap.is_none() && !c.owned && !c.of_underling && !c.outcome_in_area)
    );

    let page: Vec<_> = search(&store, b, &[], Some(fid(6)), 2)
        .into_iter()
        .map(|c| c.file.id)
        .collect();
    assert_eq!(page, [fid(STATE + 2), fid(STATE + 3)]);
}

#[test]
fn kb_candidate_terms_are_literal_case_insensitive_substrings() {
    let (_d, store) = open();
    kb_fixture(&store);
    let ids = |who, terms: &[&str]| -> Vec<FileId> {
        search(&store, who, terms, None, 100)
            .into_iter()
            .map(|c| c.file.id)
            .collect()
    };
    let doc = |n: u128| fid(DOC + n);
    let b = Some(hid(2));
    assert_eq!(
        ids(b, &["report"]),
        [doc(1), doc(6)],
        "revoked and foreign files excluded"
    );
    assert_eq!(ids(None, &["report"]), [1, 4, 5, 6].map(doc));
    assert_eq!(ids(None, &["%"]), [doc(1)], "% is literal");
    assert_eq!(ids(None, &["100%"]), [doc(1)]);
    assert_eq!(ids(None, &["snake_case"]), [doc(2)], "_ is literal");
    assert_eq!(ids(None, &["_"]), [doc(2)]);
    assert_eq!(ids(None, &["\\"]), [doc(6)], "backslash is literal");
    assert_eq!(
        ids(b, &["report", "quarterly"]),
        [doc(1)],
        "every term must match"
    );
    assert_eq!(ids(b, &["report", "nowhere"]), []);
    assert_eq!(ids(b, &["of 3"]), [fid(STATE + 3), fid(AUDIT + 3)]);
}

#[test]
fn kb_audit_is_oldest_first_and_limited() {
    let (_d, store) = open();
    let f = fid(DOC + 1);
    let entry = |at, action| KbAuditRow {
        file: f,
        at: Timestamp(at),
        handler: None,
        agent: None,
        action,
        version: 1,
    };
    wr(&store, |tx| {
        tx.insert_file(&file(f, FileKind::Document, "d", None))?;
        tx.insert_kb_audit(&[
            entry(5, KbAction::Read),
            entry(1, KbAction::Create),
            entry(5, KbAction::Write),
        ])
    });
    let log = rd(&store, |tx| tx.kb_audit(f, 10));
    assert_eq!(
        log,
        [
            entry(1, KbAction::Create),
            entry(5, KbAction::Read),
            entry(5, KbAction::Write)
        ]
    );
    assert_eq!(
        rd(&store, |tx| tx.kb_audit(f, 1)),
        [entry(1, KbAction::Create)]
    );
}

// ---- mail ------------------------------------------------------------------------

#[test]
fn mail_scheduling_inbox_and_outbox() {
    let (_d, store) = open();
    let h = wr(&store, |tx| add_handler(tx, 1, None));
    let to_h = MailTarget::Handler(h);
    let msg = |n: u128, deliver_at, created_at| MessageRow {
        id: mid(n),
        file: fid(DOC + n),
        from: MailTarget::User,
        to: to_h,
        subject: format!("message {n}"),
        created_at: Timestamp(created_at),
        deliver_at: Timestamp(deliver_at),
        delivered_at: None,
        acked_at: None,
        dropped_reason: None,
        in_reply_to: None,
        notice: false,
    };
    wr(&store, |tx| {
        let reply = MessageRow {
            from: to_h,
            to: MailTarget::User,
            in_reply_to: Some(mid(4)),
            notice: true,
            ..msg(5, 0, 9)
        };
        for m in [
            msg(4, 100, 1),
            msg(2, 50, 2),
            msg(3, 200, 3),
            msg(1, 100, 4),
            reply,
        ] {
            tx.insert_file(&file(m.file, FileKind::Message, "body", None))?;
            tx.insert_message(&m)?;
        }
        Ok(())
    });
    let mids = |rows: Vec<MessageRow>| rows.into_iter().map(|m| m.id).collect::<Vec<_>>();
    rd(&store, |tx| {
        assert_eq!(
            mids(tx.due_messages(Timestamp(150), 10)?),
            [5, 2, 1, 4].map(mid),
            "by (deliver_at, id)"
        );
        assert_eq!(mids(tx.due_messages(Timestamp(150), 2)?), [5, 2].map(mid));
        assert_eq!(tx.due_messages(Timestamp(-1), 10)?, []);
        assert_eq!(tx.next_due()?, Some(Timestamp(0)));
        assert_eq!(tx.inbox_count(to_h)?, 0, "nothing delivered yet");
        Ok(())
    });
    wr(&store, |tx| {
        for (n, at) in [(5, 1), (1, 160), (2, 160), (4, 155)] {
            tx.set_delivered(mid(n), Timestamp(at))?;
        }
        Ok(())
    });
    rd(&store, |tx| {
        assert_eq!(tx.next_due()?, Some(Timestamp(200)));
        assert_eq!(tx.due_messages(Timestamp(150), 10)?, []);
        assert_eq!(
            mids(tx.inbox(to_h, 10)?),
            [4, 1, 2].map(mid),
            "by (delivered_at, id)"
        );
        assert_eq!(mids(tx.inbox(MailTarget::User, 10)?), [mid(5)]);
        // The reply keeps the message it answers; others answer none.
        assert_eq!(tx.message(mid(5))?.unwrap().in_reply_to, Some(mid(4)));
        // A notice keeps its mark (migration 23); other mail has none.
        assert!(tx.message(mid(5))?.unwrap().notice);
        assert!(!tx.message(mid(4))?.unwrap().notice);
        assert_eq!(tx.message(mid(4))?.unwrap().in_reply_to, None);
        assert_eq!(
            mids(tx.outbox(MailTarget::User, 10)?),
            [1, 3, 2, 4].map(mid),
            "newest first"
        );
        assert_eq!(mids(tx.outbox(to_h, 10)?), [mid(5)]);
        Ok(())
    });
    wr(&store, |tx| tx.set_acked(mid(1), Timestamp(170)));
    rd(&store, |tx| {
        assert_eq!(tx.inbox_count(to_h)?, 2);
        assert_eq!(mids(tx.inbox(to_h, 1)?), [mid(4)]);
        let acked = tx.message(mid(1))?.unwrap();
        assert_eq!(
            (acked.delivered_at, acked.acked_at),
            (Some(Timestamp(160)), Some(Timestamp(170)))
        );
        assert_eq!(tx.message(mid(9))?, None);
        Ok(())
    });
    let err = wr_err(&store, |tx| tx.set_acked(mid(9), Timestamp(1)));
    assert_eq!(
        err.to_string(),
        format!(
            "failed to mark message {} acknowledged: no such row",
            mid(9)
        )
    );
}

// ---- transactions ----------------------------------------------------------------

#[derive(Debug)]
enum AppError {
    Store(StoreError),
    Refused,
}

impl From<StoreError> for AppError {
    fn from(e: StoreError) -> Self {
        AppError::Store(e)
    }
}

#[test]
fn closure_error_rolls_back_and_is_returned_unchanged() {
    let (_d, store) = open();
    let f = fid(DOC + 1);
    let mut calls = 0;
    let res: Result<(), AppError> = write(&store, |tx| {
        calls += 1;
        tx.insert_file(&file(f, FileKind::Document, "doomed", None))?;
        Err(AppError::Refused)
    });
    assert!(matches!(res, Err(AppError::Refused)), "{res:?}");
    assert_eq!(calls, 1, "the closure runs exactly once");
    assert_eq!(rd(&store, |tx| tx.file(f)), None, "nothing persisted");
    let res: Result<(), AppError> = write(&store, |tx| Ok(tx.set_file_description(f, "x")?));
    assert!(
        matches!(res, Err(AppError::Store(StoreError::Backend { .. }))),
        "{res:?}"
    );
}

#[test]
fn panicking_closures_leave_the_store_usable() {
    let (_d, store) = open();
    let f = fid(DOC + 1);
    let res = catch_unwind(AssertUnwindSafe(|| {
        write(&store, |tx| -> R<()> {
            tx.insert_file(&file(f, FileKind::Document, "half done", None))?;
            panic!("closure panicked mid-transaction");
        })
    }));
    assert!(res.is_err());
    let res = catch_unwind(AssertUnwindSafe(|| {
        read(&store, |_| -> R<()> { panic!("reader panicked") })
    }));
    assert!(res.is_err());
    assert_eq!(
        rd(&store, |tx| tx.file(f)),
        None,
        "the panicked write was rolled back"
    );
    wr(&store, |tx| {
        tx.insert_file(&file(f, FileKind::Document, "second try", None))
    });
    assert_eq!(
        rd(&store, |tx| tx.file(f)).unwrap().description,
        "second try"
    );
}

#[test]
fn concurrent_writers_are_serialized_and_readers_see_snapshots() {
    let (_d, store) = open();
    let store = Arc::new(store);
    let threads: Vec<_> = (0..8u128)
        .map(|t| {
            let store = Arc::clone(&store);
            std::thread::spawn(move || {
                for i in 0..50u128 {
                    let f = file(fid(DOC + t * 1000 + i), FileKind::Document, "x", None);
                    wr(&store, |tx| tx.insert_file(&f));
                    // Within one read the snapshot does not move, whatever
                    // the other threads commit meanwhile.
                    let (a, b) = rd(&store, |tx| Ok((tx.counts()?.files, tx.counts()?.files)));
                    assert_eq!(a, b);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_eq!(rd(&store, |tx| tx.counts()).files, 400);
}

/// Issue 15 item 2: with 8 idle readers kept, 16 concurrent KB writers
/// (each reads first) opened a fresh reader connection for two writes in
/// five: a schema parse and every statement prepared again each time.
#[test]
fn issue_15_sixteen_concurrent_reads_reuse_their_connections() {
    let (_dir, store) = open();
    let store = Arc::new(store);
    let n = 16;
    let round = || {
        // Every read holds its connection until all sixteen hold one.
        let barrier = Arc::new(std::sync::Barrier::new(n));
        let threads: Vec<_> = (0..n)
            .map(|_| {
                let (store, barrier) = (store.clone(), barrier.clone());
                std::thread::spawn(move || {
                    read(&*store, |tx| {
                        barrier.wait();
                        tx.root_handler()
                    })
                    .unwrap()
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    };
    round();
    let opened = store.readers_opened();
    assert_eq!(opened, n as u64, "the first round opens one reader each");
    round();
    round();
    assert_eq!(
        store.readers_opened(),
        opened,
        "later rounds reuse the idle readers"
    );
}
