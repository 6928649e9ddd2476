//! Knowledge Base: versions, KB search candidates and their visibility, access logs.

use agency_core::access::FileKind;
use agency_core::{FileId, HandlerId, Level, Resource, Timestamp};

use super::New;
use super::fixtures::*;
use crate::tx::R;
use crate::*;

pub fn duplicate_version_is_unique_and_latest_version_follows_inserts(new: &New) {
    let (_dir, store) = new();
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

/// Handlers 1 (root) -> 2 (B, the caller) -> 3 (B's underling) -> 4, and
/// 1 -> 5 (B's sibling); the outcome DAG follows, plus B's own child 6.
/// Documents DOC+1.. with capabilities of B (one revoked) and of 5.
fn kb_fixture(store: &dyn Store) {
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
    store: &dyn Store,
    who: Option<HandlerId>,
    terms: &[&str],
    after: Option<FileId>,
    n: usize,
) -> Vec<KbCandidate> {
    let terms: Vec<String> = terms.iter().map(|t| t.to_string()).collect();
    rd(store, |tx| tx.kb_candidates(who, &terms, after, n))
}

pub fn kb_candidates_follow_visibility_rules(new: &New) {
    let (_d, store) = new();
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

pub fn kb_candidate_terms_are_literal_case_insensitive_substrings(new: &New) {
    let (_d, store) = new();
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

pub fn kb_audit_is_oldest_first_and_limited(new: &New) {
    let (_d, store) = new();
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

pub fn pages_of_versions_and_bounded_counts_of_files(new: &New) {
    let (_d, store) = new();
    let h = wr(&store, |tx| add_handler(tx, 1, None));
    let f = fid(DOC + 1);
    wr(&store, |tx| {
        tx.insert_file(&FileRow {
            created_by: Some(h),
            ..file(f, FileKind::Document, "paged", None)
        })?;
        for v in 1..=5 {
            tx.insert_version(&version(f, v))?;
        }
        for n in 2..=4 {
            tx.insert_file(&FileRow {
                created_by: Some(h),
                ..file(fid(DOC + n), FileKind::Document, "more", None)
            })?;
        }
        Ok(())
    });
    rd(&store, |tx| {
        let page = |tx: &mut dyn Tx, after, n| -> R<Vec<i64>> {
            Ok(tx
                .versions_after(f, after, n)?
                .iter()
                .map(|v| v.version)
                .collect())
        };
        assert_eq!(page(tx, None, 2)?, [1, 2]);
        assert_eq!(page(tx, Some(2), 2)?, [3, 4]);
        assert_eq!(page(tx, Some(4), 2)?, [5]);
        assert_eq!(page(tx, Some(5), 2)?, Vec::<i64>::new());
        // Counts stop at the limit.
        assert_eq!(tx.files_created_by(h, FileKind::Document, 10)?, 4);
        assert_eq!(tx.files_created_by(h, FileKind::Document, 3)?, 3);
        assert_eq!(tx.files_created_by(h, FileKind::Message, 10)?, 0);
        assert_eq!(tx.files_created_by(hid(9), FileKind::Document, 10)?, 0);
        Ok(())
    });
}

pub fn work_product_and_file_deletion(new: &New) {
    let (_d, store) = new();
    let (h1, h2) = wr(&store, |tx| {
        let h1 = add_handler(tx, 1, None)?;
        Ok((h1, add_handler(tx, 2, Some(h1))?))
    });
    let (doc, other) = (fid(DOC + 1), fid(DOC + 2));
    wr(&store, |tx| {
        tx.insert_file(&FileRow {
            created_by: Some(h2),
            ..file(doc, FileKind::Document, "by h2", None)
        })?;
        tx.insert_file(&FileRow {
            created_by: Some(h1),
            ..file(other, FileKind::Document, "by h1", None)
        })?;
        tx.insert_version(&version(doc, 1))?;
        tx.insert_kb_audit(&[KbAuditRow {
            file: doc,
            at: Timestamp(3),
            handler: Some(h2),
            agent: None,
            action: KbAction::Create,
            version: 1,
        }])
    });
    // h2's work product: the document it created, its state document and
    // its audit log, ordered by id.
    let ids: Vec<FileId> = rd(&store, |tx| tx.work_product(&[h2]))
        .iter()
        .map(|f| f.id)
        .collect();
    assert_eq!(ids, [fid(STATE + 2), fid(AUDIT + 2), doc]);
    assert!(rd(&store, |tx| tx.work_product(&[])).is_empty());

    wr(&store, |tx| tx.delete_file(doc));
    rd(&store, |tx| {
        assert_eq!(tx.file(doc)?, None);
        assert!(tx.versions(doc)?.is_empty());
        assert!(tx.kb_audit(doc, 10)?.is_empty());
        assert!(tx.file(other)?.is_some(), "only that file goes");
        Ok(())
    });
    // Deleting a file that is not there is an error, not a silent no-op.
    let err = wr_err(&store, |tx| tx.delete_file(doc));
    assert!(matches!(err, StoreError::Backend { .. }), "{err:?}");
}
