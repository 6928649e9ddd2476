//! Issue 9 items 2-4 in the random-organisation property (`org_props.rs`):
//! grants naming the outcome they are for, the handover of created files
//! to the boss that retires a subtree, and a fixed story through the
//! runner that shows mail-derived Read, scoped escalation and handover.

use agency_core::{Level, Resource};
use agency_service::GrantRequest;
use proptest::prelude::*;

use super::{Op, Run, run};

impl Run {
    /// Issue 9 item 4: a grant naming the outcome it is for.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn grant_for(
        &mut self,
        op: &Op,
        h: usize,
        u: usize,
        f: usize,
        wanted: Level,
        delegatable: bool,
        o: usize,
    ) -> Result<(), TestCaseError> {
        let Some(h) = self.actor(h) else {
            return Ok(());
        };
        if self.m.files.is_empty() {
            return Ok(());
        }
        let (u, f) = (u % self.m.handlers.len(), f % self.m.files.len());
        let o = o % self.m.outcomes.len();
        let sources = self.m.grant_sources(h, f, wanted);
        let allowed = self.m.handlers[u].active
            && self.m.handlers[u].boss == Some(h)
            && !sources.is_empty()
            && self.m.may_scope_grant(u, o);
        let req = GrantRequest {
            resource: Resource::Kb(self.m.files[f].id),
            level: wanted,
            delegatable,
        };
        let r = self.env.svc.grant_for(
            self.env.agent(self.m.handlers[h].id),
            self.m.handlers[u].id,
            &req,
            Some(self.m.outcomes[o].id),
        );
        self.check(op, allowed, &r)?;
        if let Ok(id) = r {
            let row = self.cap_row(id);
            prop_assert!(row.derived_from.is_some_and(|d| sources.contains(&d)));
            let added = self.adopt_new_caps(u, f);
            prop_assert_eq!(added, vec![id]);
            prop_assert_eq!(self.m.caps.last().unwrap().scope, o);
        }
        Ok(())
    }

    /// Issue 9 item 3: after `top`'s subtree retired, its boss gained
    /// exactly the capabilities the model hands over, and nothing else.
    pub(super) fn check_handover(&mut self, top: usize) -> Result<(), TestCaseError> {
        let Some((boss, files)) = self.m.handover(top) else {
            return Ok(());
        };
        for f in 0..self.m.files.len() {
            let added = self.adopt_new_caps(boss, f);
            prop_assert_eq!(
                added.len(),
                usize::from(files.contains(&f)),
                "handover of file {} to handler {}",
                f,
                boss
            );
            if let Some(c) = self.m.caps.iter().find(|c| added.contains(&c.id)) {
                prop_assert!(c.level == Level::Write && c.delegatable);
                prop_assert!(c.derived_from.is_none());
                prop_assert_eq!(c.scope, self.m.handlers[boss].root);
            }
        }
        Ok(())
    }
}

/// Issue 9 items 2-4 through the same runner: mail may pass on only what
/// the sender may delegate, an escalated grant for an underling's outcome
/// ends at both levels with it, and retirement hands created files up.
#[test]
fn issue9_items_2_to_4_in_the_org_model() {
    use Op::*;
    let c = |h, p| Create { h, p, p2: None };
    let ops = [
        KbCreate { h: 0 }, // f0 by root
        c(0, 0),           // o1
        Delegate {
            h: 0,
            o: 1,
            grant: Some((0, 1, false)),
        }, // h1: Read on f0, not delegatable
        c(1, 1),           // o2
        Delegate {
            h: 1,
            o: 2,
            grant: None,
        }, // h2
        c(1, 1),           // o3
        Delegate {
            h: 1,
            o: 3,
            grant: None,
        }, // h3
        Mail {
            h: 1,
            t: 2,
            attach: Some(0),
        }, // refused: h1 may not pass f0 on
        Mail {
            h: 1,
            t: 0,
            attach: Some(0),
        }, // allowed: the root reads f0 already
        GrantFor {
            h: 0,
            u: 1,
            f: 0,
            level: 1,
            delegatable: true,
            o: 0,
        }, // refused: the root outcome is outside h1's area
        GrantFor {
            h: 0,
            u: 1,
            f: 0,
            level: 1,
            delegatable: true,
            o: 2,
        }, // escalation for h2's outcome
        Grant {
            h: 1,
            u: 2,
            f: 0,
            level: 1,
            delegatable: false,
        }, // passed down
        KbRead { h: 2, f: 0 },
        KbCreate { h: 2 }, // f1 by h2
        Mail {
            h: 2,
            t: 1,
            attach: Some(1),
        }, // h1 reads f1 through h2's Write
        Finish {
            h: 1,
            o: 2,
            close: false,
        }, // retires h2: escalation revoked at both levels, f1 handed to h1
        KbWrite { h: 1, f: 1 }, // allowed: handed over
        Grant {
            h: 1,
            u: 3,
            f: 0,
            level: 1,
            delegatable: false,
        }, // refused: the escalated source is gone
        KbRead { h: 1, f: 0 }, // its own Read remains
        Stop { h: 0, t: 1 }, // retires h1 and h3: f1 climbs to the root
        KbWrite { h: 0, f: 1 },
    ];
    let stats = run(&ops).unwrap();
    assert!(stats.allowed >= 15 && stats.denied >= 3, "{stats:?}");
}
