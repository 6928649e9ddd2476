//! Pipeline runs: a run and its stages round-trip, updates replace them,
//! lists come newest first and `unfinished` keeps only the runs the engine
//! carries on; a handler running a pipeline never counts as having work.

use agency_core::Timestamp;
use agency_core::access::FileKind;

use super::New;
use super::fixtures::*;
use crate::{PipelineRunRow, PipelineRunStatus, PipelineStageRow, StageStatus};

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
