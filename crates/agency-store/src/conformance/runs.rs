//! Agent runs: run records replaced and read back, captured output,
//! listings newest first, progress checks and stalls.

use agency_core::Timestamp;

use super::New;
use super::fixtures::*;
use crate::{AgentRunRow, BlobId, KbAction, KbAuditRow, LogEntryRow};

pub fn runs_logs_progress_and_stalls(new: &New) {
    let (_d, store) = new();
    let h = wr(&store, |tx| add_handler(tx, 1, None));
    let log = BlobId::of(b"captured output");
    wr(&store, |tx| {
        tx.insert_agent(&agent(100, h, 1))?;
        tx.put_agent_run(&AgentRunRow::spawned(aid(100), "claude", "p1"))?;
        tx.end_agent(aid(100), Timestamp(2), "exited")?;
        tx.insert_agent(&agent(101, h, 3))?;
        tx.put_agent_run(&AgentRunRow::spawned(aid(101), "codex", "p2"))?;
        tx.end_agent(aid(101), Timestamp(4), "exited")?;
        // A third agent without a run record (an attached client).
        tx.insert_agent(&agent(102, h, 5))?;
        // Replaced whole.
        tx.put_agent_run(&AgentRunRow {
            exit_status: Some(0),
            tool_calls: Some(3),
            ..AgentRunRow::spawned(aid(100), "claude", "p1")
        })
    });
    rd(&store, |tx| {
        let run = tx.agent_run(aid(100))?.unwrap();
        assert_eq!((run.exit_status, run.tool_calls), (Some(0), Some(3)));
        assert_eq!(tx.agent_run(aid(102))?, None);
        let listed: Vec<_> = tx
            .runs(None, None, 10)?
            .into_iter()
            .map(|r| (r.agent.id, r.run.is_some()))
            .collect();
        assert_eq!(
            listed,
            [(aid(102), false), (aid(101), true), (aid(100), true)],
            "newest first"
        );
        let page: Vec<_> = tx
            .runs(Some(&[h]), Some(Timestamp(3)), 10)?
            .into_iter()
            .map(|r| r.agent.id)
            .collect();
        assert_eq!(page, [aid(100)], "started before 3");
        assert!(tx.runs(Some(&[hid(9)]), None, 10)?.is_empty());
        let last = tx.last_ended_run(h)?.unwrap();
        assert_eq!(last.agent.id, aid(101));
        assert_eq!(last.run.unwrap().runtime, "codex");
        Ok(())
    });

    // Captured output: kept on a run record, refused without one.
    wr(&store, |tx| {
        assert!(tx.set_agent_run_log(aid(100), &log)?);
        assert!(!tx.set_agent_run_log(aid(102), &log)?);
        Ok(())
    });
    rd(&store, |tx| {
        assert_eq!(tx.agent_run_log(aid(100))?, Some(log.clone()));
        assert_eq!(tx.agent_run_log(aid(101))?, None);
        Ok(())
    });

    // What a run was told: kept on its record, refused without one.
    let (prompt, first) = (BlobId::of(b"prompt"), BlobId::of(b"first"));
    assert_eq!(rd(&store, |tx| tx.run_prompt(aid(100))), Some((None, None)));
    assert!(wr(&store, |tx| tx.set_run_prompt(
        aid(100),
        &prompt,
        &first
    )));
    assert!(!wr(&store, |tx| tx.set_run_prompt(
        aid(102),
        &prompt,
        &first
    )));
    assert_eq!(
        rd(&store, |tx| tx.run_prompt(aid(100))),
        Some((Some(prompt), Some(first)))
    );
    assert_eq!(rd(&store, |tx| tx.run_prompt(aid(102))), None);

    // Progress: a KB write or an outcome event by the agent; a log entry
    // is a summary, not progress.
    wr(&store, |tx| {
        tx.insert_kb_audit(&[KbAuditRow {
            file: fid(STATE + 1),
            at: Timestamp(2),
            handler: Some(h),
            agent: Some(aid(100)),
            action: KbAction::Write,
            version: 1,
        }])?;
        tx.insert_log_entry(&LogEntryRow {
            handler: h,
            at: Timestamp(4),
            agent: Some(aid(101)),
            summary: "nothing to do".into(),
        })
    });
    rd(&store, |tx| {
        assert!(tx.agent_made_progress(aid(100))?);
        assert!(!tx.agent_made_progress(aid(101))?);
        assert!(tx.agent_logged(aid(101))?);
        assert!(!tx.agent_logged(aid(100))?);
        Ok(())
    });

    // Stalls.
    wr(&store, |tx| tx.set_stalled(h, Timestamp(6), "no progress"));
    assert_eq!(
        rd(&store, |tx| tx.stalled(h)),
        Some((Timestamp(6), "no progress".to_owned()))
    );
    assert!(wr(&store, |tx| tx.clear_stalled(h)));
    assert!(!wr(&store, |tx| tx.clear_stalled(h)), "no longer stalled");
    assert_eq!(rd(&store, |tx| tx.stalled(h)), None);
}
