//! Lessons: a lesson round-trips and updates replace it; one per
//! normalised title in a pipeline; listings filter by pipeline and state,
//! most recently changed first; the full-text search finds only admitted
//! lessons of its pipeline, by title, trigger or advice; the history
//! keeps its order and is found by run.

use agency_core::{LessonId, Timestamp};

use super::New;
use super::fixtures::*;
use crate::{JudgeCheckRow, LessonFilter, LessonLogRow, LessonRow, LessonState};

fn lid(n: u128) -> LessonId {
    LessonId(uuid::Uuid::from_u128(0x1E55_0000 + n))
}

fn lesson(n: u128, key: &str, advice: &str, state: LessonState, at: i64) -> LessonRow {
    LessonRow {
        id: lid(n),
        pipeline: "agencycore".to_owned(),
        key: key.to_owned(),
        title: key.replace('-', " "),
        scope_kind: "pipeline".to_owned(),
        scope: "agencycore".to_owned(),
        trigger: format!("when the request is about {key}"),
        advice: advice.to_owned(),
        counterexample: None,
        state,
        reason: None,
        version: 1,
        recalled: 0,
        used: 0,
        helpful: 0,
        harmful: 0,
        created_at: Timestamp(at),
        updated_at: Timestamp(at),
    }
}

fn log(n: u128, action: &str, run: Option<u128>, at: i64) -> LessonLogRow {
    LessonLogRow {
        seq: 0,
        lesson: lid(n),
        action: action.to_owned(),
        run: run.map(hid),
        version: 1,
        detail: "{}".to_owned(),
        at: Timestamp(at),
    }
}

pub fn lessons_round_trip_search_and_history(new: &New) {
    let (_d, store) = new();
    let w = |ws: &[&str]| ws.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    use LessonState::*;
    wr(&store, |tx| {
        tx.insert_lesson(&lesson(
            1,
            "endpoint-tests",
            "write integration tests for every endpoint",
            Admitted,
            10,
        ))?;
        tx.insert_lesson(&lesson(
            2,
            "flaky-login",
            "retry the login test only after fixing its clock",
            Proposed,
            20,
        ))?;
        tx.insert_lesson(&lesson(
            3,
            "migrations",
            "run migrations in a transaction",
            Admitted,
            30,
        ))?;
        tx.insert_lesson(&lesson(
            4,
            "old-endpoint",
            "endpoint tests are optional",
            Retired,
            40,
        ))?;
        let mut other = lesson(
            5,
            "endpoint-tests",
            "endpoint tests elsewhere",
            Admitted,
            50,
        );
        other.pipeline = "other".to_owned();
        tx.insert_lesson(&other)?;
        Ok(())
    });
    // One lesson per title in a pipeline.
    wr_err(&store, |tx| {
        tx.insert_lesson(&lesson(6, "endpoint-tests", "again", Proposed, 60))
    });
    rd(&store, |tx| {
        assert_eq!(
            tx.lesson(lid(1))?,
            Some(lesson(
                1,
                "endpoint-tests",
                "write integration tests for every endpoint",
                Admitted,
                10
            ))
        );
        assert_eq!(tx.lesson(lid(9))?, None);
        assert_eq!(
            tx.lesson_by_key("agencycore", "migrations")?.map(|l| l.id),
            Some(lid(3))
        );
        assert_eq!(tx.lesson_by_key("agencycore", "nope")?, None);
        let ids = |rows: Vec<LessonRow>| rows.into_iter().map(|l| l.id).collect::<Vec<_>>();
        assert_eq!(
            ids(tx.lessons(&LessonFilter::default(), 10)?),
            [lid(5), lid(4), lid(3), lid(2), lid(1)]
        );
        let core = LessonFilter {
            pipeline: Some("agencycore".to_owned()),
            states: vec![Admitted, Proposed],
        };
        assert_eq!(ids(tx.lessons(&core, 10)?), [lid(3), lid(2), lid(1)]);
        assert_eq!(ids(tx.lessons(&core, 2)?), [lid(3), lid(2)]);
        // Only admitted lessons of the pipeline; by advice, title or trigger.
        let found = tx.search_lessons("agencycore", &w(&["endpoint", "tests"]), 10)?;
        assert_eq!(
            ids(found.iter().map(|(l, _)| l.clone()).collect()),
            [lid(1)]
        );
        assert!(found[0].1 > 0.0, "{found:?}");
        let by_title = tx.search_lessons("agencycore", &w(&["migrations"]), 10)?;
        assert_eq!(by_title.len(), 1);
        assert!(
            tx.search_lessons("agencycore", &w(&["login"]), 10)?
                .is_empty()
        );
        assert!(
            tx.search_lessons("agencycore", &w(&["\"*", ")"]), 10)?
                .is_empty()
        );
        Ok(())
    });
    // An update replaces the row and re-indexes its words.
    let mut changed = lesson(
        1,
        "endpoint-tests",
        "write contract tests for every route",
        Admitted,
        10,
    );
    changed.version = 3;
    changed.helpful = 2;
    changed.harmful = 1;
    changed.recalled = 4;
    changed.used = 3;
    changed.reason = Some("edited".to_owned());
    changed.counterexample = Some("a static page".to_owned());
    changed.updated_at = Timestamp(70);
    wr(&store, |tx| tx.update_lesson(&changed));
    rd(&store, |tx| {
        assert_eq!(tx.lesson(lid(1))?, Some(changed.clone()));
        assert!(
            tx.search_lessons("agencycore", &w(&["integration"]), 10)?
                .is_empty()
        );
        assert_eq!(
            tx.search_lessons("agencycore", &w(&["contract"]), 10)?
                .len(),
            1
        );
        Ok(())
    });
    wr_err(&store, |tx| {
        tx.update_lesson(&lesson(8, "ghost", "x", Proposed, 1))
    });
    // History: in order, bounded to the newest, found by run and action.
    wr(&store, |tx| {
        for (i, (action, run)) in [
            ("proposed", Some(2)),
            ("proposed", Some(3)),
            ("admitted", None),
            ("recalled", Some(4)),
        ]
        .into_iter()
        .enumerate()
        {
            let seq = tx.append_lesson_log(&log(1, action, run, 100 + i as i64))?;
            assert!(seq > 0);
        }
        tx.append_lesson_log(&log(3, "recalled", Some(4), 200))?;
        Ok(())
    });
    rd(&store, |tx| {
        let all = tx.lesson_log(lid(1), 10)?;
        let actions: Vec<_> = all.iter().map(|e| e.action.as_str()).collect();
        assert_eq!(actions, ["proposed", "proposed", "admitted", "recalled"]);
        assert!(all.windows(2).all(|p| p[0].seq < p[1].seq));
        assert_eq!(all[0].run, Some(hid(2)));
        let newest: Vec<_> = tx
            .lesson_log(lid(1), 2)?
            .into_iter()
            .map(|e| e.action)
            .collect();
        assert_eq!(newest, ["admitted", "recalled"]);
        let recalled: Vec<_> = tx
            .lesson_log_of_run(hid(4), "recalled")?
            .into_iter()
            .map(|e| e.lesson)
            .collect();
        assert_eq!(recalled, [lid(1), lid(3)]);
        assert!(tx.lesson_log_of_run(hid(4), "proposed")?.is_empty());
        Ok(())
    });
    // Judge checks: one per pipeline, rubric and grader; a later record
    // replaces it; listed newest first.
    let check = |grader: &str, state: &str, at: i64| JudgeCheckRow {
        pipeline: "agencycore".to_owned(),
        rubric: "Gatekeeper@1".to_owned(),
        grader: grader.to_owned(),
        state: state.to_owned(),
        detail: "{}".to_owned(),
        at: Timestamp(at),
    };
    wr(&store, |tx| {
        tx.put_judge_check(&check("default/a", "passed", 1))?;
        tx.put_judge_check(&check("default/b", "flagged", 2))?;
        tx.put_judge_check(&check("default/b", "accepted", 3))
    });
    rd(&store, |tx| {
        assert_eq!(
            tx.judge_check("agencycore", "Gatekeeper@1", "default/b")?,
            Some(check("default/b", "accepted", 3))
        );
        assert_eq!(
            tx.judge_check("agencycore", "Gatekeeper@2", "default/b")?,
            None
        );
        let all: Vec<_> = tx.judge_checks(10)?.into_iter().map(|c| c.grader).collect();
        assert_eq!(all, ["default/b", "default/a"]);
        Ok(())
    });
}
