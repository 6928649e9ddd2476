//! Pipeline runs: a run and its stages round-trip, updates replace them,
//! lists come newest first and `unfinished` keeps only the runs the engine
//! carries on; a handler running a pipeline never counts as having work.

use agency_core::Timestamp;
use agency_core::access::FileKind;

use super::New;
use super::fixtures::*;
use crate::{
    LibraryEntryRow, LibraryKind, PipelineRunRow, PipelineRunStatus, PipelineStageRow, StageStatus,
};

fn run(n: u128, at: i64) -> PipelineRunRow {
    PipelineRunRow {
        id: hid(n),
        pipeline: "agencycore".to_owned(),
        model: "{\"stages\":[]}".to_owned(),
        input: "\"fix the bug\"".to_owned(),
        level: 0,
        live_tools: false,
        status: PipelineRunStatus::Running,
        stage: 0,
        created_at: Timestamp(at),
        updated_at: Timestamp(at),
        ended_at: None,
    }
}

fn stage(run: u128, idx: i64) -> PipelineStageRow {
    PipelineStageRow {
        run: hid(run),
        idx,
        name: format!("Stage{idx}"),
        outcome: oid(100 * run + idx as u128 + 1),
        status: StageStatus::Pending,
        attempts: 0,
        input_tokens: 0,
        output_tokens: 0,
        cost_micro_usd: 0,
        artifact: None,
        report: None,
        started_at: None,
        ended_at: None,
    }
}

pub fn pipeline_runs_and_stages_round_trip(new: &New) {
    let (_d, store) = new();
    wr(&store, |tx| {
        let root = add_handler(tx, 1, None)?;
        for n in [2, 3, 4] {
            add_handler(tx, n, Some(root))?;
            tx.insert_pipeline_run(&run(n, n as i64 * 10))?;
            for i in 0..3 {
                let s = stage(n, i);
                add_outcome(tx, outcome(s.outcome, hid(n)))?;
                tx.insert_pipeline_stage(&s)?;
            }
        }
        // An ordinary handler with open work, for contrast.
        let plain = add_handler(tx, 5, Some(root))?;
        add_outcome(tx, outcome(oid(900), plain))?;
        tx.insert_file(&file(
            fid(DOC + 1),
            FileKind::Document,
            "artifact",
            Some(hid(2)),
        ))
    });
    rd(&store, |tx| {
        assert_eq!(tx.pipeline_run(hid(2))?, Some(run(2, 20)));
        assert_eq!(tx.pipeline_run(hid(9))?, None);
        let ids = |rows: Vec<PipelineRunRow>| rows.into_iter().map(|r| r.id).collect::<Vec<_>>();
        assert_eq!(ids(tx.pipeline_runs(false, 10)?), [hid(4), hid(3), hid(2)]);
        assert_eq!(ids(tx.pipeline_runs(false, 2)?), [hid(4), hid(3)]);
        assert_eq!(
            tx.pipeline_stages(hid(3))?,
            (0..3).map(|i| stage(3, i)).collect::<Vec<_>>()
        );
        // The engine drives a pipeline's handler: no agent is spawned for it.
        assert!(!tx.has_work(hid(2))?);
        assert!(tx.has_work(hid(5))?);
        assert_eq!(tx.handlers_with_work(None, 10)?, [hid(5)]);
        Ok(())
    });
    let mut done = run(3, 30);
    done.status = PipelineRunStatus::Done;
    done.stage = 3;
    done.updated_at = Timestamp(99);
    done.ended_at = Some(Timestamp(99));
    let mut first = stage(2, 0);
    first.status = StageStatus::Repaired;
    first.attempts = 3;
    first.input_tokens = 120;
    first.output_tokens = 40;
    first.cost_micro_usd = 7;
    first.artifact = Some(fid(DOC + 1));
    first.report = Some("{\"attempts\":[]}".to_owned());
    first.started_at = Some(Timestamp(21));
    first.ended_at = Some(Timestamp(22));
    wr(&store, |tx| {
        tx.update_pipeline_run(&done)?;
        tx.update_pipeline_stage(&first)
    });
    rd(&store, |tx| {
        assert_eq!(tx.pipeline_run(hid(3))?, Some(done.clone()));
        assert_eq!(tx.pipeline_stages(hid(2))?[0], first);
        let unfinished: Vec<_> = tx
            .pipeline_runs(true, 10)?
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(unfinished, [hid(4), hid(2)]);
        Ok(())
    });
    // Updating a row that does not exist is an error, not a silent no-op.
    let mut ghost = run(8, 1);
    ghost.status = PipelineRunStatus::Failed;
    wr_err(&store, |tx| tx.update_pipeline_run(&ghost));
    wr_err(&store, |tx| tx.update_pipeline_stage(&stage(2, 7)));
}

fn entry(
    kind: LibraryKind,
    run: Option<u128>,
    text: &str,
    score: Option<i64>,
    at: i64,
) -> LibraryEntryRow {
    LibraryEntryRow {
        seq: 0,
        pipeline: "agencycore".to_owned(),
        kind,
        run: run.map(hid),
        title: text.split(' ').take(3).collect::<Vec<_>>().join(" "),
        text: text.to_owned(),
        score,
        data: "{}".to_owned(),
        created_at: Timestamp(at),
    }
}

/// A pipeline's library: entries are found by the words they share with
/// the query (more shared words rank higher), only of their pipeline and
/// kind, above a minimum score when asked; listed newest first; a run is
/// in a portfolio once; a query of punctuation finds nothing.
pub fn pipeline_library_is_searched_by_words_kind_and_score(new: &New) {
    let (_d, store) = new();
    let w = |ws: &[&str]| ws.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let mut seqs = Vec::new();
    wr(&store, |tx| {
        use LibraryKind::*;
        for e in [
            entry(
                Example,
                Some(2),
                "add a REST endpoint for invoices with tests",
                Some(20),
                10,
            ),
            entry(
                Example,
                Some(3),
                "fix the flaky login test in the QA suite",
                Some(22),
                20,
            ),
            entry(
                Example,
                Some(4),
                "add a REST endpoint for users",
                Some(9),
                30,
            ),
            entry(
                Lesson,
                None,
                "endpoints need integration tests before merge",
                None,
                40,
            ),
            entry(
                Playbook,
                None,
                "REST endpoint: route, handler, validation, tests",
                None,
                50,
            ),
        ] {
            seqs.push(tx.insert_library_entry(&e)?);
        }
        let mut other = entry(
            Example,
            Some(5),
            "add a REST endpoint for invoices",
            Some(25),
            60,
        );
        other.pipeline = "other".to_owned();
        tx.insert_library_entry(&other)?;
        Ok(())
    });
    assert!(seqs.windows(2).all(|p| p[0] < p[1]), "seq grows: {seqs:?}");
    rd(&store, |tx| {
        let runs = |found: Vec<(LibraryEntryRow, f64)>| {
            found.into_iter().map(|(e, _)| e.run).collect::<Vec<_>>()
        };
        // "invoices" and "endpoint" both match run 2; run 4 only "endpoint".
        let found = tx.search_library(
            "agencycore",
            LibraryKind::Example,
            &w(&["REST", "invoices", "endpoint"]),
            None,
            10,
        )?;
        assert!(found[0].1 > found[1].1, "scores: {found:?}");
        assert_eq!(runs(found), [Some(hid(2)), Some(hid(4))]);
        // A minimum score leaves run 4 (score 9) out.
        let found = tx.search_library(
            "agencycore",
            LibraryKind::Example,
            &w(&["endpoint"]),
            Some(15),
            10,
        )?;
        assert_eq!(runs(found), [Some(hid(2))]);
        // Stemmed: "tests" finds "test"; kinds are apart.
        let found =
            tx.search_library("agencycore", LibraryKind::Lesson, &w(&["test"]), None, 10)?;
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].0.text,
            "endpoints need integration tests before merge"
        );
        assert_eq!(found[0].0.kind, LibraryKind::Lesson);
        // Words are terms, never FTS syntax.
        let found = tx.search_library(
            "agencycore",
            LibraryKind::Example,
            &w(&["NEAR", "invoices\"", "OR"]),
            None,
            10,
        )?;
        assert_eq!(runs(found), [Some(hid(2))]);
        assert!(
            tx.search_library(
                "agencycore",
                LibraryKind::Example,
                &w(&["*", "(", "-"]),
                None,
                10
            )?
            .is_empty()
        );
        assert_eq!(
            tx.search_library("agencycore", LibraryKind::Example, &w(&["flaky"]), None, 10)?
                .len(),
            1
        );
        let newest: Vec<_> = tx
            .library_entries("agencycore", LibraryKind::Example, 2)?
            .into_iter()
            .map(|e| e.run)
            .collect();
        assert_eq!(newest, [Some(hid(4)), Some(hid(3))]);
        let all = tx.library_entries("agencycore", LibraryKind::Example, 10)?;
        assert_eq!(all.len(), 3);
        assert_eq!(all[2], {
            let mut e = entry(
                LibraryKind::Example,
                Some(2),
                "add a REST endpoint for invoices with tests",
                Some(20),
                10,
            );
            e.seq = seqs[0];
            e
        });
        Ok(())
    });
    // A run is in its pipeline's portfolio once.
    wr_err(&store, |tx| {
        tx.insert_library_entry(&entry(LibraryKind::Example, Some(2), "again", Some(1), 70))
            .map(drop)
    });
}
