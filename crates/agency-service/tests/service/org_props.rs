//! Property: random organisations under random agent operations (KB
//! create / read / write, grant, delegate, outcome create / block / unblock
//! / complete / close / request completion / reopen, mail with and without
//! an attached file, force-stop, grant for a named outcome, and the subtree
//! and "why?" chains a handler is shown), each by a random handler's agent,
//! are allowed exactly when an independent model of seed 000's rules allows
//! them; mail-derived Read, the handover at retirement and outcome-scoped
//! grants (issue 9 items 2-4) are checked against the model too. Checked op
//! by op; at the end every (handler, file) read is checked
//! against the model's level.
//!
//! The model below is written from the seed (and the decisions recorded in
//! ARCHITECTURE.md), not from agency-core's rule functions. It follows the
//! service only where the rules leave a free choice: which of several
//! eligible capabilities a grant derives from is read back from the store,
//! and checked to be eligible. grant_props.rs checks the capability table's
//! invariants under grants (and its check runs at the end of every case
//! here too); this file checks what agents may *do*.

use std::collections::BTreeSet;

use agency_core::{CapabilityId, HandlerId, Level, MailTarget, OutcomeStatus, Resource};
use agency_service::{
    GrantRequest, HandlerStatus, MailBody, NewOutcome, OutcomeUpdate, ServiceError,
};
use agency_store::Tx;
use proptest::prelude::*;

use crate::org_model::{MCap, MFile, MHandler, MOutcome, Model, St};
use crate::support::Env;

// Issue 9 items 2-4: the runner's checks of outcome-scoped grants and the
// retirement handover, and a fixed story through them.
#[path = "org_props_issue9.rs"]
mod issue9;
mod walks;

#[derive(Debug, Clone)]
enum Op {
    KbCreate {
        h: usize,
    },
    KbRead {
        h: usize,
        f: usize,
    },
    KbWrite {
        h: usize,
        f: usize,
    },
    Grant {
        h: usize,
        u: usize,
        f: usize,
        level: u8,
        delegatable: bool,
    },
    Delegate {
        h: usize,
        o: usize,
        grant: Option<(usize, u8, bool)>,
    },
    Create {
        h: usize,
        p: usize,
        p2: Option<usize>,
    },
    SetStatus {
        h: usize,
        o: usize,
        blocked: bool,
    },
    Finish {
        h: usize,
        o: usize,
        close: bool,
    },
    RequestCompletion {
        h: usize,
    },
    Mail {
        h: usize,
        t: usize,
        attach: Option<usize>,
    },
    Stop {
        h: usize,
        t: usize,
    },
    /// Issue 9 item 4: a grant for a named outcome.
    GrantFor {
        h: usize,
        u: usize,
        f: usize,
        level: u8,
        delegatable: bool,
        o: usize,
    },
    // Issue 9 items 1 and 13 (walks.rs).
    Subtree {
        h: usize,
        o: usize,
    },
    Ancestors {
        h: usize,
        o: usize,
    },
    Reopen {
        h: usize,
        o: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let i = || 0usize..64;
    let lvl = || 0u8..3;
    prop_oneof![
        2 => i().prop_map(|h| Op::KbCreate { h }),
        3 => (i(), i()).prop_map(|(h, f)| Op::KbRead { h, f }),
        3 => (i(), i()).prop_map(|(h, f)| Op::KbWrite { h, f }),
        3 => (i(), i(), i(), lvl(), any::<bool>())
            .prop_map(|(h, u, f, level, delegatable)| Op::Grant { h, u, f, level, delegatable }),
        3 => (i(), i(), proptest::option::of((i(), lvl(), any::<bool>())))
            .prop_map(|(h, o, grant)| Op::Delegate { h, o, grant }),
        4 => (i(), i(), proptest::option::of(i())).prop_map(|(h, p, p2)| Op::Create { h, p, p2 }),
        2 => (i(), i(), any::<bool>()).prop_map(|(h, o, blocked)| Op::SetStatus { h, o, blocked }),
        2 => (i(), i(), any::<bool>()).prop_map(|(h, o, close)| Op::Finish { h, o, close }),
        1 => i().prop_map(|h| Op::RequestCompletion { h }),
        3 => (i(), i(), proptest::option::of(i())).prop_map(|(h, t, attach)| Op::Mail { h, t, attach }),
        1 => (i(), i()).prop_map(|(h, t)| Op::Stop { h, t }),
        3 => (i(), i(), i(), lvl(), any::<bool>(), i())
            .prop_map(|(h, u, f, level, delegatable, o)| Op::GrantFor { h, u, f, level, delegatable, o }),
        2 => (i(), i()).prop_map(|(h, o)| Op::Subtree { h, o }),
        2 => (i(), i()).prop_map(|(h, o)| Op::Ancestors { h, o }),
        2 => (i(), i()).prop_map(|(h, o)| Op::Reopen { h, o }),
    ]
}

fn level(l: u8) -> Level {
    Level::from_i64(i64::from(l)).unwrap()
}

/// Tallies, so that a run can show it exercised both answers.
#[derive(Debug, Default)]
struct Stats {
    allowed: usize,
    denied: usize,
}

struct Run {
    env: Env,
    m: Model,
    stats: Stats,
}

impl Run {
    fn new() -> Run {
        let env = Env::new();
        let mut m = Model::default();
        m.outcomes.push(MOutcome {
            id: env.root.root(),
            parents: Vec::new(),
            responsible: 0,
            status: St::Open,
            perpetual: true,
        });
        m.handlers.push(MHandler {
            id: env.root,
            boss: None,
            active: true,
            root: 0,
        });
        Run {
            env,
            m,
            stats: Stats::default(),
        }
    }

    fn cap_row(&self, id: CapabilityId) -> agency_service::CapabilityRow {
        agency_store::read(&**self.env.svc.store(), |tx: &mut dyn Tx| tx.capability(id))
            .unwrap()
            .unwrap()
    }

    /// Live capabilities of handler `h` on file `f`, from the store.
    fn caps_on(&self, h: usize, f: usize) -> Vec<agency_service::CapabilityRow> {
        let (holder, file) = (self.m.handlers[h].id, self.m.files[f].id);
        agency_store::read(&**self.env.svc.store(), |tx: &mut dyn Tx| {
            tx.capabilities_on(holder, &Resource::Kb(file))
        })
        .unwrap()
    }

    /// Record capabilities of (h, f) the store has and the model does not.
    fn adopt_new_caps(&mut self, h: usize, f: usize) -> Vec<CapabilityId> {
        let known: BTreeSet<CapabilityId> = self.m.caps.iter().map(|c| c.id).collect();
        let mut added = Vec::new();
        for row in self.caps_on(h, f) {
            if known.contains(&row.id) {
                continue;
            }
            let scope = row
                .scope
                .and_then(|s| self.m.outcomes.iter().position(|o| o.id == s))
                .expect("a KB capability is scoped to an outcome");
            self.m.caps.push(MCap {
                id: row.id,
                holder: h,
                file: f,
                level: row.level,
                delegatable: row.delegatable,
                scope,
                derived_from: row.derived_from,
                live: true,
            });
            added.push(row.id);
        }
        added
    }

    /// Compare the service's answer with the model's.
    fn check<T: std::fmt::Debug>(
        &mut self,
        op: &Op,
        allowed: bool,
        r: &Result<T, ServiceError>,
    ) -> Result<(), TestCaseError> {
        match (allowed, r) {
            (true, Ok(_)) => self.stats.allowed += 1,
            (false, Err(_)) => self.stats.denied += 1,
            (false, Ok(v)) => {
                return Err(TestCaseError::fail(format!(
                    "{op:?} succeeded ({v:?}) but the rules forbid it\nmodel: {:#?}",
                    self.m
                )));
            }
            (true, Err(e)) => {
                return Err(TestCaseError::fail(format!(
                    "{op:?} was refused ({e}) but the rules allow it\nmodel: {:#?}",
                    self.m
                )));
            }
        }
        Ok(())
    }

    /// An active handler for index `i`, or `None` to skip the op.
    fn actor(&self, i: usize) -> Option<usize> {
        let h = i % self.m.handlers.len();
        self.m.handlers[h].active.then_some(h)
    }

    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let svc = self.env.svc.clone();
        let nh = self.m.handlers.len();
        let no = self.m.outcomes.len();
        let nf = self.m.files.len();
        match *op {
            Op::KbCreate { h } => {
                let Some(h) = self.actor(h) else {
                    return Ok(());
                };
                let content = format!("file {nf}").into_bytes();
                let r = svc.kb_create(self.env.agent(self.m.handlers[h].id), "doc", &content);
                self.check(op, true, &r)?;
                self.m.files.push(MFile {
                    id: r.unwrap(),
                    creator: h,
                    version: 1,
                    content,
                });
                // The creator's delegatable Write, scoped to its root.
                let added = self.adopt_new_caps(h, nf);
                prop_assert_eq!(added.len(), 1);
                let c = self.m.caps.last().unwrap();
                prop_assert!(c.level == Level::Write && c.delegatable);
                prop_assert_eq!(c.scope, self.m.handlers[h].root);
            }
            Op::KbRead { h, f } => {
                let Some(h) = self.actor(h) else {
                    return Ok(());
                };
                if nf == 0 {
                    return Ok(());
                }
                let f = f % nf;
                let allowed = self.m.level(h, f).is_some_and(|l| l >= Level::Read);
                let r = svc.kb_read(self.env.agent(self.m.handlers[h].id), self.m.files[f].id);
                self.check(op, allowed, &r)?;
                if let Ok(c) = r {
                    prop_assert_eq!(c.version, self.m.files[f].version);
                    prop_assert_eq!(&c.content, &self.m.files[f].content);
                }
            }
            Op::KbWrite { h, f } => {
                let Some(h) = self.actor(h) else {
                    return Ok(());
                };
                if nf == 0 {
                    return Ok(());
                }
                let f = f % nf;
                let allowed = self.m.level(h, f) == Some(Level::Write);
                let (id, version) = (self.m.files[f].id, self.m.files[f].version);
                let content = format!("v{} by {h}", version + 1).into_bytes();
                let base = agency_store::BlobId::of(&self.m.files[f].content);
                let r = svc.kb_write(
                    self.env.agent(self.m.handlers[h].id),
                    id,
                    &content,
                    version,
                    base.as_str(),
                );
                self.check(op, allowed, &r)?;
                if r.is_ok() {
                    let file = &mut self.m.files[f];
                    file.version += 1;
                    file.content = content;
                }
            }
            Op::Grant {
                h,
                u,
                f,
                level: l,
                delegatable,
            } => {
                let Some(h) = self.actor(h) else {
                    return Ok(());
                };
                if nf == 0 {
                    return Ok(());
                }
                let (u, f, wanted) = (u % nh, f % nf, level(l));
                let sources = self.m.grant_sources(h, f, wanted);
                let allowed = self.m.handlers[u].active
                    && self.m.handlers[u].boss == Some(h)
                    && !sources.is_empty();
                let req = GrantRequest {
                    resource: Resource::Kb(self.m.files[f].id),
                    level: wanted,
                    delegatable,
                };
                let r = svc.grant(
                    self.env.agent(self.m.handlers[h].id),
                    self.m.handlers[u].id,
                    &req,
                );
                self.check(op, allowed, &r)?;
                if let Ok(id) = r {
                    let row = self.cap_row(id);
                    prop_assert!(
                        row.derived_from.is_some_and(|d| sources.contains(&d)),
                        "{:?}",
                        row
                    );
                    self.adopt_new_caps(u, f);
                }
            }
            Op::Delegate { h, o, grant } => {
                let Some(h) = self.actor(h) else {
                    return Ok(());
                };
                let o = o % no;
                let out = self.m.outcomes[o].clone();
                let mut allowed = self.m.handlers[h].root != o
                    && out.responsible == h
                    && matches!(out.status, St::Open | St::Blocked);
                let mut sources = Vec::new();
                let grant = grant
                    .filter(|_| nf > 0)
                    .map(|(f, l, d)| (f % nf, level(l), d));
                if let Some((f, wanted, _)) = grant {
                    sources = self.m.grant_sources(h, f, wanted);
                    allowed &= !sources.is_empty();
                }
                let grants: Vec<GrantRequest> = grant
                    .iter()
                    .map(|&(f, level, delegatable)| GrantRequest {
                        resource: Resource::Kb(self.m.files[f].id),
                        level,
                        delegatable,
                    })
                    .collect();
                let r = svc.delegate(self.env.agent(self.m.handlers[h].id), out.id, &grants);
                self.check(op, allowed, &r)?;
                let Ok(d) = r else { return Ok(()) };
                prop_assert_eq!(d.handler, HandlerId::from_root(out.id));
                let u = match self.m.handler_of_root(o) {
                    Some(u) => {
                        self.m.handlers[u].active = true;
                        self.m.handlers[u].boss = Some(h);
                        u
                    }
                    None => {
                        self.m.handlers.push(MHandler {
                            id: d.handler,
                            boss: Some(h),
                            active: true,
                            root: o,
                        });
                        nh
                    }
                };
                // The delegated outcome and what below it the boss owned.
                for x in self.m.descendants_or_self(o) {
                    if self.m.outcomes[x].responsible == h {
                        self.m.outcomes[x].responsible = u;
                    }
                }
                if let Some((f, _, _)) = grant {
                    let row = self.cap_row(d.capabilities[0]);
                    prop_assert!(
                        row.derived_from.is_some_and(|s| sources.contains(&s)),
                        "{:?}",
                        row
                    );
                    self.adopt_new_caps(u, f);
                }
            }
            Op::Create { h, p, p2 } => {
                let Some(h) = self.actor(h) else {
                    return Ok(());
                };
                let mut parents = vec![p % no];
                parents.extend(p2.map(|p| p % no));
                parents.sort_unstable();
                parents.dedup();
                let allowed = parents.iter().all(|&p| {
                    self.m.outcomes[p].responsible == h && !self.m.outcomes[p].status.finished()
                });
                let new = NewOutcome {
                    title: format!("o{no}"),
                    parents: parents.iter().map(|&p| self.m.outcomes[p].id).collect(),
                    ..Default::default()
                };
                let r = svc.outcome_create(self.env.agent(self.m.handlers[h].id), &new);
                self.check(op, allowed, &r)?;
                if let Ok(id) = r {
                    self.m.outcomes.push(MOutcome {
                        id,
                        parents,
                        responsible: h,
                        status: St::Open,
                        perpetual: false,
                    });
                }
            }
            Op::SetStatus { h, o, blocked } => {
                let Some(h) = self.actor(h) else {
                    return Ok(());
                };
                let o = o % no;
                let out = self.m.outcomes[o].clone();
                let legal = !(out.status.finished() || (out.perpetual && blocked));
                // A handler may block and unblock its own root while it is
                // open or blocked; anything else needs Write.
                let allowed = if self.m.handlers[h].root == o {
                    legal && matches!(out.status, St::Open | St::Blocked)
                } else {
                    legal && self.m.may_write_outcome(h, o)
                };
                let upd = OutcomeUpdate {
                    status: Some(if blocked {
                        OutcomeStatus::Blocked
                    } else {
                        OutcomeStatus::Open
                    }),
                    reason: blocked.then(|| "waiting".to_owned()),
                    ..Default::default()
                };
                let r = svc.outcome_update(self.env.agent(self.m.handlers[h].id), out.id, &upd);
                self.check(op, allowed, &r)?;
                if r.is_ok() {
                    self.m.outcomes[o].status = if blocked { St::Blocked } else { St::Open };
                }
            }
            Op::Finish { h, o, close } => {
                let Some(h) = self.actor(h) else {
                    return Ok(());
                };
                let o = o % no;
                let out = self.m.outcomes[o].clone();
                let allowed =
                    self.m.may_write_outcome(h, o) && !out.status.finished() && !out.perpetual;
                let who = self.env.agent(self.m.handlers[h].id);
                let r = if close {
                    svc.outcome_close(who, out.id, "disproven")
                } else {
                    svc.outcome_complete(who, out.id, "done")
                };
                self.check(op, allowed, &r)?;
                if r.is_ok() {
                    let retiring = self
                        .m
                        .handler_of_root(o)
                        .filter(|&u| self.m.handlers[u].active);
                    self.m.finish(o, close);
                    if let Some(u) = retiring {
                        self.check_handover(u)?;
                    }
                }
            }
            Op::RequestCompletion { h } => {
                let Some(h) = self.actor(h) else {
                    return Ok(());
                };
                let root = self.m.outcomes[self.m.handlers[h].root].clone();
                let allowed = !root.perpetual && matches!(root.status, St::Open | St::Blocked);
                let r =
                    svc.outcome_request_completion(self.env.agent(self.m.handlers[h].id), "done?");
                self.check(op, allowed, &r)?;
                if r.is_ok() {
                    let root = self.m.handlers[h].root;
                    self.m.outcomes[root].status = St::Awaiting;
                }
            }
            Op::Mail { h, t, attach } => {
                let Some(h) = self.actor(h) else {
                    return Ok(());
                };
                let t = t % nh;
                let attach = attach.filter(|_| nf > 0).map(|f| f % nf);
                let mut allowed = self.m.may_mail(h, t);
                let mut sources = Vec::new();
                if let Some(f) = attach {
                    match self.m.attach(h, t, f) {
                        Some(s) => sources = s,
                        None => allowed = false,
                    }
                }
                let body = match attach {
                    Some(f) => MailBody::File {
                        file: self.m.files[f].id,
                        subject: Some("see this".into()),
                    },
                    None => MailBody::Text {
                        subject: None,
                        text: "hello".into(),
                    },
                };
                let r = svc.mail_send(
                    self.env.agent(self.m.handlers[h].id),
                    MailTarget::Handler(self.m.handlers[t].id),
                    &body,
                );
                self.check(op, allowed, &r)?;
                if r.is_ok()
                    && let Some(f) = attach
                {
                    // The recipient may now read what it was sent.
                    let could_read = self.m.level(t, f).is_some_and(|l| l >= Level::Read);
                    let added = self.adopt_new_caps(t, f);
                    prop_assert_eq!(added.len(), usize::from(!could_read));
                    if let Some(c) = self.m.caps.iter().find(|c| added.contains(&c.id)) {
                        // Item 2: derived from a capability the sender
                        // could delegate, so it ends when that one does.
                        prop_assert!(c.level == Level::Read && !c.delegatable);
                        prop_assert!(c.derived_from.is_some_and(|d| sources.contains(&d)));
                        prop_assert_eq!(c.scope, self.m.handlers[t].root);
                    }
                }
            }
            Op::Stop { h, t } => {
                let Some(h) = self.actor(h) else {
                    return Ok(());
                };
                let t = t % nh;
                let allowed = self.m.handlers[t].boss == Some(h) && self.m.handlers[t].active;
                let r =
                    svc.force_stop(self.env.agent(self.m.handlers[h].id), self.m.handlers[t].id);
                self.check(op, allowed, &r)?;
                if r.is_ok() {
                    let retired = self.m.retire(t);
                    // The boss re-owns what the stopped handlers owned.
                    for o in self.m.outcomes.iter_mut() {
                        if retired.contains(&o.responsible) {
                            o.responsible = h;
                        }
                    }
                    self.check_handover(t)?;
                }
            }
            Op::GrantFor {
                h,
                u,
                f,
                level: l,
                delegatable,
                o,
            } => self.grant_for(op, h, u, f, level(l), delegatable, o)?,
            Op::Subtree { h, o } => self.step_subtree(op, h, o)?,
            Op::Ancestors { h, o } => self.step_ancestors(op, h, o)?,
            Op::Reopen { h, o } => self.step_reopen(op, h, o)?,
        }
        Ok(())
    }

    /// The end state: handler statuses, outcome statuses and owners, and
    /// every active handler's read of every file, against the model.
    fn check_final(&mut self) -> Result<(), TestCaseError> {
        let svc = self.env.svc.clone();
        let user = agency_core::Principal::User;
        for h in &self.m.handlers {
            let status = svc.handler_view(user, h.id).unwrap().status;
            prop_assert_eq!(status == HandlerStatus::Active, h.active, "{:?}", h);
        }
        for o in &self.m.outcomes {
            let v = svc.outcome_view(user, o.id).unwrap().outcome;
            prop_assert_eq!(v.responsible, self.m.handlers[o.responsible].id);
            let st = match v.status {
                OutcomeStatus::Open => St::Open,
                OutcomeStatus::Blocked => St::Blocked,
                OutcomeStatus::AwaitingVerification => St::Awaiting,
                OutcomeStatus::Completed => St::Completed,
                OutcomeStatus::Closed => St::Closed,
            };
            prop_assert_eq!(st, o.status, "{:?}", o);
        }
        // And the capability table's own invariants (grant_props.rs).
        crate::grant_props::check_invariants(&self.env)?;
        for h in 0..self.m.handlers.len() {
            if !self.m.handlers[h].active {
                continue;
            }
            for f in 0..self.m.files.len() {
                self.step(&Op::KbRead { h, f })?;
            }
        }
        Ok(())
    }
}

fn run(ops: &[Op]) -> Result<Stats, TestCaseError> {
    let mut run = Run::new();
    for op in ops {
        run.step(op)?;
    }
    run.check_final()?;
    Ok(run.stats)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: crate::support::proptest_cases(24), ..ProptestConfig::default() })]

    #[test]
    fn agent_operations_follow_the_rules(ops in proptest::collection::vec(op(), 1..80)) {
        run(&ops)?;
    }
}

/// A fixed story through the same runner, so that the property cannot pass
/// by refusing everything: delegation two levels deep, grants and their
/// attenuation, skip-level mail and writes refused, a force-stop and a
/// completion revoking what was derived.
#[test]
fn the_org_model_sees_both_answers() {
    use Op::*;
    let ops = [
        KbCreate { h: 0 }, // f0 by root
        Create {
            h: 0,
            p: 0,
            p2: None,
        }, // o1
        Create {
            h: 0,
            p: 0,
            p2: None,
        }, // o2
        Delegate {
            h: 0,
            o: 1,
            grant: Some((0, 2, true)),
        }, // h1, Write delegatable
        Delegate {
            h: 0,
            o: 2,
            grant: Some((0, 1, false)),
        }, // h2, Read
        KbWrite { h: 1, f: 0 }, // allowed
        KbWrite { h: 2, f: 0 }, // refused: Read only
        KbRead { h: 2, f: 0 }, // allowed
        Create {
            h: 1,
            p: 1,
            p2: None,
        }, // o3 under h1's root
        Delegate {
            h: 1,
            o: 3,
            grant: Some((0, 1, false)),
        }, // h3 under h1
        Mail {
            h: 0,
            t: 3,
            attach: None,
        }, // skip level: refused
        Mail {
            h: 3,
            t: 1,
            attach: Some(0),
        }, // to its boss: allowed
        Mail {
            h: 2,
            t: 1,
            attach: None,
        }, // sibling: refused
        Grant {
            h: 2,
            u: 3,
            f: 0,
            level: 1,
            delegatable: false,
        }, // not its underling
        Finish {
            h: 0,
            o: 3,
            close: false,
        }, // root may not reach into h1's subtree
        Create {
            h: 0,
            p: 3,
            p2: None,
        }, // nor add under it
        Stop { h: 0, t: 1 }, // retires h1 and h3
        KbRead { h: 0, f: 0 },
        Finish {
            h: 0,
            o: 2,
            close: false,
        }, // retires h2
        KbCreate { h: 2 }, // skipped: inactive
        Finish {
            h: 0,
            o: 0,
            close: true,
        }, // the perpetual root: refused
        Delegate {
            h: 0,
            o: 1,
            grant: None,
        }, // h1 reactivated
        KbRead { h: 1, f: 0 }, // its old grant was revoked
    ];
    let stats = run(&ops).unwrap();
    assert!(stats.allowed >= 12 && stats.denied >= 8, "{stats:?}");
}

/// Issue 9 items 1 and 13 through the same runner: a sibling's work stays
/// out of every walk, a second parent outside the area hides its chain,
/// and reopening follows who could finish, handing a retired handler's
/// root back to its boss.
#[test]
fn the_org_model_decides_walks_and_reopening() {
    use Op::*;
    let c = |h, p, p2| Create { h, p, p2 };
    let ops = [
        c(0, 0, None),    // o1
        c(0, 0, None),    // o2
        c(0, 1, Some(2)), // o3 below both
        Delegate {
            h: 0,
            o: 1,
            grant: None,
        }, // h1: o1 and o3 (o3's second parent o2 stays the root's)
        Delegate {
            h: 0,
            o: 2,
            grant: None,
        }, // h2: o2 (o3 is below it too)
        c(1, 1, None),    // o4, h1's
        c(2, 2, None),    // o5, h2's
        Subtree { h: 1, o: 0 },
        Subtree { h: 2, o: 0 },
        Ancestors { h: 1, o: 3 },
        Ancestors { h: 2, o: 3 },
        Subtree { h: 1, o: 5 },   // not_found
        Ancestors { h: 1, o: 5 }, // not_found
        Finish {
            h: 1,
            o: 4,
            close: false,
        },
        Reopen { h: 0, o: 4 }, // not the root handler's to reopen
        Reopen { h: 1, o: 4 }, // h1's own work
        Reopen { h: 1, o: 4 }, // open already
        Finish {
            h: 0,
            o: 1,
            close: true,
        }, // retires h1
        Reopen { h: 2, o: 1 }, // not h2's
        Reopen { h: 0, o: 1 }, // the boss: responsible again for o1, o3, o4
        Subtree { h: 0, o: 1 },
        Reopen { h: 0, o: 0 }, // the perpetual root was never finished
    ];
    let stats = run(&ops).unwrap();
    assert!(stats.allowed >= 14 && stats.denied >= 6, "{stats:?}");
}
