//! Issue 9 item 16: an agent run's captured output is kept with its run
//! record; the user reads any run's, an agent only its own handler's.

use agency_core::Principal;
use agency_service::RunReport;

use crate::support::{Env, assert_kind};

#[test]
fn issue9_item16_run_logs_are_kept_and_readable_only_by_the_user_and_the_own_handler() {
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let a = env.outcome(env.root, "A", &[env.root.root()]);
    let b = env.outcome(env.root, "B", &[env.root.root()]);
    let ha = svc.delegate(r, a, &[]).unwrap().handler;
    let hb = svc.delegate(r, b, &[]).unwrap().handler;

    // A finished run of `ha`, with its output.
    let first = svc.agent_start(ha).unwrap();
    svc.agent_record_spawn(
        first,
        "command",
        "hash",
        agency_core::prompt::PROMPT_VERSION,
    )
    .unwrap();
    let report = RunReport {
        reason: "exited".into(),
        exit_status: Some(1),
        log: Some(b"stderr: boom\n".to_vec()),
        ..RunReport::default()
    };
    svc.agent_finish(first, &report).unwrap();

    let log = svc.agent_run_log(Principal::User, first).unwrap();
    assert!(log.captured);
    assert_eq!((log.agent, log.handler), (first, ha));
    assert_eq!(log.text, "stderr: boom\n");

    // The handler's next agent reads how its predecessor ended.
    let own = env.agent(ha);
    assert_eq!(
        svc.agent_run_log(own, first).unwrap().text,
        "stderr: boom\n"
    );

    // A prompt-injected agent of another handler — a sibling, or even the
    // boss — learns nothing, not even that the run exists.
    let missing = agency_core::AgentId(uuid::Uuid::new_v4());
    let not_found = assert_kind(svc.agent_run_log(env.agent(hb), first), "not_found");
    let unknown = assert_kind(svc.agent_run_log(env.agent(hb), missing), "not_found");
    assert_eq!(
        not_found.to_string().replace(&first.to_string(), "ID"),
        unknown.to_string().replace(&missing.to_string(), "ID")
    );
    assert_kind(svc.agent_run_log(r, first), "not_found");
    // An agent that has ended is no one.
    assert_kind(
        svc.agent_run_log(Principal::agent(ha, first), first),
        "permission_denied",
    );

    // A run without captured output (e.g. reaped) says so.
    let live = own;
    let Principal::Agent { agent, .. } = live else {
        unreachable!()
    };
    svc.agents_reap("reaped: the daemon restarted").unwrap();
    let reaped = svc.agent_run_log(Principal::User, agent).unwrap();
    assert!(!reaped.captured && reaped.text.is_empty());
}
