//! Who may call what: operations no caller asks for are methods of the
//! system handle only, so an interface given a `&Service` (MCP, handlers
//! acting for a caller) cannot reach them.

use agency_core::{AgentId, HandlerId, Principal};
use agency_service::{RunReport, Service};

use crate::support::{Env, T0};

/// What a probe returns when `Service` has no inherent method of the
/// probe's name.
#[derive(Debug, PartialEq)]
struct Absent;

/// Methods of the same names as caller-less operations. Method
/// resolution prefers an inherent method to a trait's, so if `Service`
/// had one of these, the calls below would resolve to it, return its
/// `Result`, and the `let _: Absent` would not compile.
trait CallerLess {
    fn bootstrap(&self) -> Absent {
        Absent
    }
    fn deliver_due(&self, _now: agency_core::Timestamp) -> Absent {
        Absent
    }
    fn token_authenticate(&self, _token: &str) -> Absent {
        Absent
    }
    fn agent_start(&self, _handler: HandlerId) -> Absent {
        Absent
    }
    fn agent_finish(&self, _agent: AgentId, _report: &RunReport) -> Absent {
        Absent
    }
    fn agents_reap(&self, _reason: &str) -> Absent {
        Absent
    }
    fn set_policy(&self, _policy: agency_core::policy::Policy) -> Absent {
        Absent
    }
    fn store(&self) -> Absent {
        Absent
    }
}

impl CallerLess for Service {}

#[test]
fn caller_less_operations_are_on_the_system_handle_only() {
    let env = Env::new();
    let svc: &Service = env.svc.service();
    assert_eq!(svc.bootstrap(), Absent);
    assert_eq!(svc.deliver_due(T0), Absent);
    assert_eq!(svc.token_authenticate("agt_x"), Absent);
    assert_eq!(svc.agent_start(env.root), Absent);
    assert_eq!(
        svc.agent_finish(AgentId(uuid::Uuid::nil()), &RunReport::default()),
        Absent
    );
    assert_eq!(svc.agents_reap("test"), Absent);
    assert_eq!(svc.set_policy(Default::default()), Absent);
    assert_eq!(svc.store(), Absent);

    // The system handle has them, and acts for callers too.
    assert_eq!(env.svc.bootstrap().unwrap(), env.root);
    assert!(env.svc.deliver_due(T0).unwrap().is_empty());
    assert!(env.svc.token_authenticate("agt_x").is_err());
    assert!(env.svc.handler_view(Principal::User, env.root).is_ok());
}
