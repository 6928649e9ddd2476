//! Agent runs as records (issue 9 items 12 and 14): who may list and read
//! them, transcripts for the user only, and how the previous run ended,
//! decided from the store (so a reopen — a daemon restart — keeps it).

use agency_core::{Principal, prompt::PROMPT_VERSION};
use agency_service::{RunFollow, RunReport};

use crate::support::{Env, assert_kind};

fn report(reason: &str, normal: bool, status: Option<i64>) -> RunReport {
    RunReport {
        reason: reason.to_owned(),
        normal,
        exit_status: status,
        ..RunReport::default()
    }
}

#[test]
fn issue9_item12_runs_are_visible_to_own_handler_and_boss_only() {
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let a = env.outcome(env.root, "A", &[env.root.root()]);
    let b = env.outcome(env.root, "B", &[env.root.root()]);
    let ha = svc.delegate(r, a, &[]).unwrap().handler;
    let hb = svc.delegate(r, b, &[]).unwrap().handler;
    let a1 = env.outcome(ha, "A1", &[a]);
    let ha1 = svc.delegate(env.agent(ha), a1, &[]).unwrap().handler;
    let (pa, pb, pa1) = (env.agent(ha), env.agent(hb), env.agent(ha1));
    let run_a = pa.agent_id().unwrap();
    svc.agent_record_spawn(run_a, "command", "hash-a", PROMPT_VERSION)
        .unwrap();

    // Own handler (the default) and a direct underling's.
    let own = svc.runs(pa, None, None, None).unwrap();
    assert_eq!(own.len(), 1);
    assert_eq!(own[0].agent, run_a);
    assert_eq!(own[0].prompt_version, Some(i64::from(PROMPT_VERSION)));
    assert_eq!(own[0].prompt_hash.as_deref(), Some("hash-a"));
    assert!(own[0].live);
    assert_eq!(svc.runs(r, Some(ha), None, None).unwrap().len(), 1);
    assert_eq!(svc.run(r, run_a).unwrap().handler, ha);
    assert_eq!(svc.runs(pa, Some(ha1), None, None).unwrap().len(), 1);
    // The user sees everything.
    assert_eq!(
        svc.runs(Principal::User, None, None, None).unwrap().len(),
        4
    );

    // An attacker (a prompt-injected agent) probing sideways, upwards and
    // two levels down learns nothing, not even that the run exists.
    assert_kind(svc.runs(pb, Some(ha), None, None), "not_found");
    assert_kind(svc.run(pb, run_a), "not_found");
    assert_kind(svc.runs(pa1, Some(ha), None, None), "not_found");
    assert_kind(svc.run(pa1, run_a), "not_found");
    assert_kind(svc.runs(pa, Some(env.root), None, None), "not_found");
    assert_kind(svc.runs(r, Some(ha1), None, None), "not_found");
    assert_kind(svc.run(r, pa1.agent_id().unwrap()), "not_found");
    // Not even by naming no handler: an agent only ever gets its own.
    assert!(
        svc.runs(pb, None, None, None)
            .unwrap()
            .iter()
            .all(|v| v.handler == hb)
    );
}

#[test]
fn issue9_item12_transcripts_are_for_the_user_only() {
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let a = env.outcome(env.root, "A", &[env.root.root()]);
    let ha = svc.delegate(r, a, &[]).unwrap().handler;
    let pa = env.agent(ha);
    let run_a = pa.agent_id().unwrap();
    svc.agent_record_spawn(run_a, "builtin", "h", PROMPT_VERSION)
        .unwrap();
    let secret_line =
        b"{\"event\":\"tool_result\",\"content\":\"a file only ha may read\"}\n".to_vec();
    svc.agent_finish(
        run_a,
        &RunReport {
            transcript: Some(secret_line.clone()),
            ..report("completed", true, Some(0))
        },
    )
    .unwrap();
    assert_eq!(
        svc.run_transcript(Principal::User, run_a).unwrap(),
        secret_line
    );
    // The boss sees that a transcript exists, but not its content (it
    // holds what the underling could read); nor may the next agent of the
    // same handler (its capabilities may since have been revoked).
    assert!(svc.run(r, run_a).unwrap().transcript.is_some());
    assert_kind(svc.run_transcript(r, run_a), "permission_denied");
    let pa_next = env.agent(ha);
    assert_kind(svc.run_transcript(pa_next, run_a), "permission_denied");
    // A run without one says so.
    assert_kind(
        svc.run_transcript(Principal::User, pa_next.agent_id().unwrap()),
        "not_found",
    );
}

/// Issue 30 item 2: following a run (its transcript or its output, live)
/// is the user's alone: no agent may, not the run's own, not its boss.
#[test]
fn issue30_following_a_run_is_for_the_user_only() {
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let a = env.outcome(env.root, "A", &[env.root.root()]);
    let ha = svc.delegate(r, a, &[]).unwrap().handler;
    let pa = env.agent(ha);
    let run_a = pa.agent_id().unwrap();
    // A minted token's agent: attached, nothing of Agency's runs it.
    assert_eq!(
        svc.run_follow(Principal::User, run_a).unwrap(),
        RunFollow::Attached
    );
    for who in [pa, r] {
        assert_kind(svc.run_follow(who, run_a), "permission_denied");
        assert_kind(svc.run_transcript_stored(who, run_a), "permission_denied");
    }
    svc.agent_record_spawn(run_a, "builtin", "h", PROMPT_VERSION)
        .unwrap();
    assert_eq!(
        svc.run_follow(Principal::User, run_a).unwrap(),
        RunFollow::Live
    );
    assert_eq!(
        svc.run_transcript_stored(Principal::User, run_a).unwrap(),
        None
    );
    svc.agent_finish(
        run_a,
        &RunReport {
            transcript: Some(b"{\"event\":\"run_end\"}\n".to_vec()),
            ..report("completed", true, Some(0))
        },
    )
    .unwrap();
    assert_eq!(
        svc.run_follow(Principal::User, run_a).unwrap(),
        RunFollow::Ended
    );
    assert_eq!(
        svc.run_transcript_stored(Principal::User, run_a).unwrap(),
        Some(b"{\"event\":\"run_end\"}\n".to_vec())
    );
    let unknown = agency_core::AgentId(uuid::Uuid::new_v4());
    assert_kind(svc.run_follow(Principal::User, unknown), "not_found");
}

#[test]
fn issue9_item14_previous_abnormal_end_is_read_from_the_records() {
    let env = Env::new();
    let svc = &env.svc;
    let h = env.root;
    assert_eq!(svc.previous_run_abnormal(h).unwrap(), None);

    // Killed: the next agent is told.
    let a1 = svc.agent_start(h).unwrap();
    svc.agent_record_spawn(a1, "command", "x", PROMPT_VERSION)
        .unwrap();
    svc.agent_finish(a1, &report("killed", false, None))
        .unwrap();
    let p = svc.previous_run_abnormal(h).unwrap().unwrap();
    assert_eq!((p.agent, p.ended_how.as_str()), (a1, "killed"));
    let v = svc.run(Principal::User, a1).unwrap();
    assert_eq!(v.normal, Some(false));
    assert_eq!(v.ended_how.as_deref(), Some("killed"));

    // A normal end with progress: nothing to tell.
    let a2 = svc.agent_start(h).unwrap();
    svc.agent_record_spawn(a2, "command", "x", PROMPT_VERSION)
        .unwrap();
    svc.outcome_create(
        Principal::agent(h, a2),
        &agency_service::NewOutcome {
            title: "work".into(),
            parents: vec![h.root()],
            ..Default::default()
        },
    )
    .unwrap();
    svc.agent_finish(a2, &report("exited", true, Some(0)))
        .unwrap();
    assert_eq!(svc.previous_run_abnormal(h).unwrap(), None);
    assert_eq!(svc.run(Principal::User, a2).unwrap().normal, Some(true));

    // Exit 0 without progress while work remains: told too.
    let a3 = svc.agent_start(h).unwrap();
    svc.agent_record_spawn(a3, "command", "x", PROMPT_VERSION)
        .unwrap();
    svc.agent_finish(a3, &report("exited", true, Some(0)))
        .unwrap();
    let p = svc.previous_run_abnormal(h).unwrap().unwrap();
    assert!(p.ended_how.contains("without progress"), "{}", p.ended_how);

    // Crashed during a daemon restart: the live agent is reaped when the
    // daemon starts again, and a fresh service (nothing in memory) still
    // tells the next agent.
    let a4 = svc.agent_start(h).unwrap();
    svc.agent_record_spawn(a4, "command", "x", PROMPT_VERSION)
        .unwrap();
    let env = env.reopen();
    let reaped = env.svc.agents_reap("reaped: the daemon restarted").unwrap();
    assert_eq!(reaped.len(), 1);
    let p = env.svc.previous_run_abnormal(h).unwrap().unwrap();
    assert_eq!(p.agent, a4);
    assert_eq!(p.ended_how, "reaped: the daemon restarted");
    // A late report about the reaped agent does not rewrite how it ended.
    env.svc
        .agent_finish(a4, &report("exited", true, Some(0)))
        .unwrap();
    assert_eq!(
        env.svc.previous_run_abnormal(h).unwrap().unwrap().ended_how,
        "reaped: the daemon restarted"
    );
}

#[test]
fn issue9_item12_runs_page_newest_first() {
    let env = Env::new();
    let svc = &env.svc;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let a = svc.agent_start(env.root).unwrap();
        svc.agent_finish(a, &report("exited", true, Some(0)))
            .unwrap();
        ids.push(a);
        env.clock.advance_millis(1000);
    }
    let first = svc
        .runs(Principal::User, Some(env.root), None, Some(2))
        .unwrap();
    assert_eq!(
        first.iter().map(|r| r.agent).collect::<Vec<_>>(),
        vec![ids[2], ids[1]]
    );
    let next = svc
        .runs(
            Principal::User,
            Some(env.root),
            Some(first[1].started_at),
            Some(2),
        )
        .unwrap();
    assert_eq!(
        next.iter().map(|r| r.agent).collect::<Vec<_>>(),
        vec![ids[0]]
    );
}
