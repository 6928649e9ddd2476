//! Approval gates: admitting an agent's tool call against
//! the policy, and the user's durable approval requests.
//!
//! [`Service::tool_call_admit`] classifies a call (`agency_core::policy`,
//! plus `each_use` capabilities). "Ask" is answered from the `approvals`
//! rows bound to (the caller's handler, the tool, the BLAKE3 hash of the
//! arguments' canonical JSON), in one write transaction: an approved
//! request is consumed by this call right there, so two racing identical
//! calls cannot both use it and a crash cannot lose or double it; an
//! `always` approval is used without being consumed; otherwise the one
//! pending request of that binding is found or created (the store's partial
//! unique index keeps it one) and mailed to the user. The agent is never
//! blocked: it is told "pending" and calls again after the user decided.
//!
//! Only the user decides ([`Service::approve`], [`Service::deny`]): an
//! agent's principal is refused, whatever the request. A decision wakes the
//! handler that asked: in the decision's transaction the user
//! mails it a notice (approved: call again with the same arguments; denied:
//! the tool, the arguments and the user's reason, so that no agent retries
//! it blindly), whose delivery gives it work, and
//! [`Event::ApprovalDecided`] lets the supervisor start its agent now rather
//! than after a backoff. Without both, the agent that was told "pending"
//! has usually ended, nothing would start another, and the approved call
//! would wait for unrelated mail.

use crate::event_log::Record;
use agency_api::EventKind;
use std::path::Path;
use std::sync::Arc;

use agency_core::policy::{ApprovalId, Decision, Policy, ToolCall, Verdict, canonical_json};
use agency_core::{CapabilityId, HandlerId, MailTarget, Principal, Resource};
use agency_store::{ApprovalRow, ApprovalStatus, HandlerStatus};

use crate::GrantRequest;
use crate::Result;
use crate::error::ServiceError;
use crate::events::Event;
use crate::service::{Caller, Op, Service, System, authenticate};
pub use agency_api::ToolCallRequest;

/// The answer to a tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Run it; `approval` is the approval it used, if it needed one.
    Allow { approval: Option<ApprovalId> },
    /// Do not run it now: request `approval` waits for the user.
    Pending {
        approval: ApprovalId,
        reason: String,
    },
    /// Do not run it.
    Denied { reason: String },
}

impl Admission {
    /// The text the agent reads as the tool's result (empty for Allow).
    pub fn message(&self) -> String {
        match self {
            Admission::Allow { .. } => String::new(),
            Admission::Pending { approval, reason } => format!(
                "pending approval {approval}: {reason}; go on with other work, and call again with the same arguments after the user approved"
            ),
            Admission::Denied { reason } => {
                format!(
                    "failed to run the tool: the policy denies it: {reason}; do the task another way"
                )
            }
        }
    }
}

/// An approval request as the user sees it.
pub type ApprovalView = agency_api::Approval;

/// The `approval` setting of a capability grant.
pub const EACH_USE: &str = "each_use";

/// Longest tool name accepted.
const MAX_TOOL_CHARS: usize = 200;
/// Largest arguments accepted, as canonical JSON bytes (a request stores
/// them whole, and the user must be able to read what they approve).
const MAX_ARGS_BYTES: usize = 256 * 1024;
/// Most rows `approvals_list` returns.
const MAX_LIST: usize = 500;
/// Most characters of the arguments a decision notice quotes: enough to
/// recognise the call; the request (`approval_get`) holds them whole.
const NOTICE_ARGS_CHARS: usize = 1000;

/// BLAKE3 of the canonical JSON, hex.
pub fn args_hash(canonical: &str) -> String {
    blake3::hash(canonical.as_bytes()).to_hex().to_string()
}

impl Service {
    fn policy(&self) -> Arc<Policy> {
        self.policy
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// How `policy.toml` (and the defaults) classify a call of `tool` with
    /// `args` in `workspace`, without admitting it: what the pipeline
    /// engine asks before ToolRunner runs a command, so that one approval
    /// covers all of a stage's commands that need one.
    pub fn classify_tool_call(
        &self,
        tool: &str,
        args: &serde_json::Value,
        workspace: Option<&Path>,
    ) -> Decision {
        self.policy().classify(&ToolCall {
            tool,
            args,
            workspace,
            read_only: None,
        })
    }

    /// Admit a tool call of an agent (workspace unknown: every absolute
    /// path counts as outside it). See the module doc.
    pub fn tool_call_admit(&self, who: Principal, call: ToolCallRequest) -> Result<Admission> {
        self.tool_call_admit_in(who, call, None)
    }

    /// [`Service::tool_call_admit`] with the agent's workspace, against
    /// which path arguments are resolved (the daemon passes the one bound
    /// to the caller's token).
    pub fn tool_call_admit_in(
        &self,
        who: Principal,
        call: ToolCallRequest,
        workspace: Option<&Path>,
    ) -> Result<Admission> {
        let (canonical, hash, decision) = self.prepare(&call, workspace)?;
        let now = self.clock.now();
        let charge = self.read(|tx| {
            let h = authenticate(tx, who)?
                .require_handler("check a tool call")?
                .id;
            crate::budgets::ledger::tool_call_charge_due(tx, h, now)
        })?;
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            let h = caller.require_handler("check a tool call")?.id;
            // Every tool call is charged to the budgets on the handler's
            // chain before it is admitted, so that a call a tool-call
            // limit refuses consumes no approval; the refusal is returned
            // inside `Ok` so that the pause it may cause commits.
            if charge && let Err(e) = crate::budgets::ledger::charge_tool_call(op, h)? {
                return Ok(Err(e));
            }
            admit_in(op, &caller, &call.tool, &hash, &canonical, decision.clone()).map(Ok)
        })?
    }

    /// Admit `call` inside one write transaction together with the
    /// operation it guards: `check` runs first (the operation's own
    /// permission check), then the admission, then — only if the call is
    /// allowed — `then`, in the same transaction, so an approval is consumed
    /// exactly when the operation is recorded. A pending request is
    /// committed (the transaction succeeds without `then`).
    pub(crate) fn admit_with(
        &self,
        call: &ToolCallRequest,
        workspace: Option<&Path>,
        check: impl Fn(&mut Op<'_>, &Caller) -> Result<()>,
        then: impl Fn(&mut Op<'_>, &Caller) -> Result<()>,
        who: Principal,
    ) -> Result<Admission> {
        self.admit_mode(call, workspace, check, then, who, Use::Consume)
    }

    /// [`Service::admit_with`] that leaves an approval it finds for a later
    /// call to consume: a call whose arguments are known before its work
    /// starts (`repo_push`'s commit) is refused or made to wait before
    /// that work, and the approval is consumed with the work's record.
    pub(crate) fn admit_peek(
        &self,
        call: &ToolCallRequest,
        check: impl Fn(&mut Op<'_>, &Caller) -> Result<()>,
        who: Principal,
    ) -> Result<Admission> {
        self.admit_mode(call, None, check, |_, _| Ok(()), who, Use::Peek)
    }

    fn admit_mode(
        &self,
        call: &ToolCallRequest,
        workspace: Option<&Path>,
        check: impl Fn(&mut Op<'_>, &Caller) -> Result<()>,
        then: impl Fn(&mut Op<'_>, &Caller) -> Result<()>,
        who: Principal,
        how: Use,
    ) -> Result<Admission> {
        let (canonical, hash, decision) = self.prepare(call, workspace)?;
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            check(op, &caller)?;
            let a = admit_use(
                op,
                &caller,
                (&call.tool, &hash, &canonical),
                decision.clone(),
                how,
            )?;
            if matches!(a, Admission::Allow { .. }) {
                then(op, &caller)?;
            }
            Ok(a)
        })
    }

    /// Validate a call and classify it: (canonical JSON, hash, decision).
    fn prepare(
        &self,
        call: &ToolCallRequest,
        workspace: Option<&Path>,
    ) -> Result<(String, String, Decision)> {
        if call.tool.is_empty()
            || call.tool.chars().count() > MAX_TOOL_CHARS
            || call.tool.chars().any(char::is_control)
        {
            return Err(ServiceError::invalid(format!(
                "failed to check tool call: the tool name must be 1-{MAX_TOOL_CHARS} printable characters"
            )));
        }
        let canonical = canonical_json(&call.args);
        if canonical.len() > MAX_ARGS_BYTES {
            return Err(ServiceError::invalid(format!(
                "failed to check a call of tool {}: its arguments are over {MAX_ARGS_BYTES} bytes",
                call.tool
            )));
        }
        let hash = args_hash(&canonical);
        let decision = self.policy().classify(&ToolCall {
            tool: &call.tool,
            args: &call.args,
            workspace,
            read_only: call.read_only,
        });
        Ok((canonical, hash, decision))
    }

    /// Approval requests: pending ones, or all with `all`, newest first.
    /// The user sees every handler's; an agent only its own handler's.
    pub fn approvals_list(&self, who: Principal, all: bool) -> Result<Vec<ApprovalView>> {
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            Ok(tx
                .approvals_list(all, caller.handler(), MAX_LIST)?
                .into_iter()
                .map(crate::wire::approval)
                .collect())
        })
    }

    /// One request (the user's, or the caller's own handler's).
    pub fn approval_get(&self, who: Principal, id: ApprovalId) -> Result<ApprovalView> {
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            match tx.approval(id)? {
                Some(a) if caller.is_user() || caller.handler() == Some(a.handler) => {
                    Ok(crate::wire::approval(a))
                }
                _ => Err(ServiceError::not_found("approval request", id)),
            }
        })
    }

    /// The user approves request `id`: the next identical call of that
    /// handler runs (once; every time with `always`).
    pub fn approve(&self, who: Principal, id: ApprovalId, always: bool) -> Result<ApprovalView> {
        self.decide(who, id, "approve", |a, now| {
            a.status = ApprovalStatus::Approved;
            a.always = always;
            a.decided_at = Some(now);
            a.decided_by = Some("user".into());
        })
    }

    /// The user denies request `id` with a reason, which the agent is told
    /// when it makes the same call again.
    pub fn deny(&self, who: Principal, id: ApprovalId, reason: &str) -> Result<ApprovalView> {
        let reason = reason.trim();
        if reason.is_empty() || reason.chars().count() > 2000 {
            return Err(ServiceError::invalid(
                "failed to deny the request: give a reason of 1-2000 characters (--reason)",
            ));
        }
        self.decide(who, id, "deny", |a, now| {
            a.status = ApprovalStatus::Denied;
            a.decided_at = Some(now);
            a.decided_by = Some("user".into());
            a.deny_reason = Some(reason.to_string());
        })
    }

    fn decide(
        &self,
        who: Principal,
        id: ApprovalId,
        verb: &str,
        change: impl Fn(&mut ApprovalRow, agency_core::Timestamp),
    ) -> Result<ApprovalView> {
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            if !caller.is_user() {
                // An agent never decides, not even on its own request: the
                // request exists because the user must.
                return Err(ServiceError::denied(format!(
                    "failed to {verb} approval request {id}: only the user decides approval requests"
                )));
            }
            let Some(mut a) = op.tx.approval(id)? else {
                return Err(ServiceError::not_found("approval request", id));
            };
            if a.status != ApprovalStatus::Pending {
                return Err(ServiceError::invalid(format!(
                    "failed to {verb} approval request {id}: it is already {}",
                    a.status.as_str()
                )));
            }
            change(&mut a, op.now);
            if !op.tx.update_approval(&a, ApprovalStatus::Pending)? {
                return Err(ServiceError::invalid(format!(
                    "failed to {verb} approval request {id}: it was decided meanwhile"
                )));
            }
            tell_decision(op, &caller, &a)?;
            Ok(crate::wire::approval(a))
        })
    }

    /// Grant like [`Service::grant_for`], with an approval requirement:
    /// `Some("each_use")` makes every call that uses the capability ask the
    /// user (whoever grants: a requirement only ever restricts). A grant
    /// derived from a marked capability is marked whatever `approval` says
    /// (`mark_derived`). One transaction.
    pub fn grant_with_approval(
        &self,
        who: Principal,
        grantee: HandlerId,
        req: &GrantRequest,
        outcome: Option<agency_core::OutcomeId>,
        approval: Option<&str>,
    ) -> Result<CapabilityId> {
        match approval {
            None => return self.grant_for(who, grantee, req, outcome),
            Some(EACH_USE) => {}
            Some(other) => {
                return Err(ServiceError::invalid(format!(
                    "failed to grant {}: unknown approval setting {other:?}; the only one is \"each_use\"",
                    req.resource
                )));
            }
        }
        self.check_declared(&req.resource, matches!(who, Principal::User))?;
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            let id = crate::permissions::grant_in(op, &caller, grantee, req, outcome)?;
            op.tx.set_capability_approval(id, EACH_USE)?;
            Ok(id)
        })
    }
}

/// An `each_use` capability on the MCP server a call uses makes it Ask,
/// whatever the policy said (a Deny stays a Deny).
fn each_use(op: &mut Op<'_>, h: HandlerId, tool: &str, d: Decision) -> Result<Decision> {
    if d.verdict == Verdict::Deny {
        return Ok(d);
    }
    let resource = if let Some(rest) = tool.strip_prefix("mcp:") {
        match rest.split_once('/') {
            Some((server, _)) => Resource::McpServer(server.to_string()),
            None => return Ok(d),
        }
    } else {
        return Ok(d);
    };
    for cap in op.tx.capabilities_on(h, &resource)? {
        if op.tx.capability_approval(cap.id)?.as_deref() == Some(EACH_USE) {
            return Ok(Decision::ask(format!(
                "the capability on {resource} was granted with approval = \"each_use\""
            )));
        }
    }
    Ok(d)
}

/// The admission of one call inside a write transaction (see the module
/// doc): `each_use` capabilities, then the verdict, then for "ask" the
/// approvals bound to the call.
pub(crate) fn admit_in(
    op: &mut Op<'_>,
    caller: &Caller,
    tool: &str,
    hash: &str,
    canonical: &str,
    decision: Decision,
) -> Result<Admission> {
    admit_use(op, caller, (tool, hash, canonical), decision, Use::Consume)
}

/// What an admission does with an approved (not `always`) request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Use {
    Consume,
    Peek,
}

fn admit_use(
    op: &mut Op<'_>,
    caller: &Caller,
    (tool, hash, canonical): (&str, &str, &str),
    decision: Decision,
    how: Use,
) -> Result<Admission> {
    let h = caller.require_handler("check a tool call")?.id;
    let decision = each_use(op, h, tool, decision)?;
    match decision.verdict {
        Verdict::Allow => Ok(Admission::Allow { approval: None }),
        Verdict::Deny => Ok(Admission::Denied {
            reason: decision.reason,
        }),
        Verdict::Ask => ask(op, caller, h, (tool, hash, canonical), decision, how),
    }
}

pub(crate) fn ask(
    op: &mut Op<'_>,
    caller: &Caller,
    h: HandlerId,
    (tool, hash, canonical): (&str, &str, &str),
    d: Decision,
    how: Use,
) -> Result<Admission> {
    let bound = op.tx.approvals_bound(h, tool, hash)?;
    // The text is compared too: a hash collision must not lend an approval.
    let same = |a: &&ApprovalRow| a.args == canonical;
    if let Some(a) = bound
        .iter()
        .filter(same)
        .find(|a| a.status == ApprovalStatus::Approved && a.always)
    {
        return Ok(Admission::Allow {
            approval: Some(a.id),
        });
    }
    if let Some(a) = bound
        .iter()
        .filter(same)
        .find(|a| a.status == ApprovalStatus::Approved)
    {
        if how == Use::Peek {
            return Ok(Admission::Allow {
                approval: Some(a.id),
            });
        }
        let mut used = a.clone();
        used.status = ApprovalStatus::Consumed;
        used.consumed_at = Some(op.now);
        if op.tx.update_approval(&used, ApprovalStatus::Approved)? {
            op.record(
                Record::new(
                    EventKind::ApprovalConsumed,
                    Some(a.handler),
                    format!("approval {} used by a call of {}", a.id, a.tool),
                )
                .agent(Some(a.agent))
                .data(serde_json::json!({ "approval": a.id, "tool": a.tool, "args_hash": a.args_hash })),
            );
            return Ok(Admission::Allow {
                approval: Some(a.id),
            });
        }
    }
    if let Some(a) = bound
        .iter()
        .filter(same)
        .find(|a| a.status == ApprovalStatus::Pending)
    {
        return Ok(Admission::Pending {
            approval: a.id,
            reason: a.reason.clone(),
        });
    }
    if let Some(a) = bound
        .iter()
        .filter(same)
        .rev()
        .find(|a| a.status == ApprovalStatus::Denied)
    {
        return Ok(Admission::Denied {
            reason: format!(
                "the user denied this exact call (request {}): {}",
                a.id,
                a.deny_reason.as_deref().unwrap_or("no reason given")
            ),
        });
    }
    let agent = caller
        .agent()
        .ok_or_else(|| ServiceError::invalid("failed to check a tool call: no agent"))?;
    let row = ApprovalRow {
        id: ApprovalId(0),
        handler: h,
        agent,
        tool: tool.to_string(),
        args_hash: hash.to_string(),
        args: canonical.to_string(),
        reason: d.reason.clone(),
        status: ApprovalStatus::Pending,
        always: false,
        created_at: op.now,
        decided_at: None,
        decided_by: None,
        deny_reason: None,
        consumed_at: None,
    };
    let id = op.tx.insert_approval(&row)?;
    op.record(
        Record::new(
            EventKind::ApprovalRequested,
            Some(h),
            format!("approval {id} needed: {tool} ({})", d.reason),
        )
        .agent(Some(agent))
        .data(serde_json::json!({ "approval": id, "tool": tool, "args_hash": hash, "reason": d.reason })),
    );
    let subject = format!("Approval needed: {tool} for handler {h} (request {id})");
    let body = format!(
        "Agent {agent} of handler {h} wants to call tool `{tool}`.\n\n\
         Why it was flagged: {reason}\n\n\
         The exact arguments (canonical JSON, BLAKE3 {hash}):\n\n```json\n{args}\n```\n\n\
         The agent was told the call is pending and goes on with other work; \
         it makes the same call again once you decided.\n\n\
         - approve this one call: `agency approve {id}`\n\
         - approve every identical call of this handler: `agency approve {id} --always`\n\
         - refuse: `agency deny {id} --reason \"…\"`\n\
         - see all pending requests: `agency approvals`\n",
        reason = d.reason,
        args = pretty(canonical),
    );
    op.notice(caller, MailTarget::User, &subject, &body);
    Ok(Admission::Pending {
        approval: id,
        reason: d.reason,
    })
}

/// Tell the handler that asked how the user decided (see the module doc),
/// in the decision's transaction: a decision is never recorded without its
/// notice. A handler stopped or retired meanwhile has no agent to tell.
fn tell_decision(op: &mut Op<'_>, caller: &Caller, a: &ApprovalRow) -> Result<()> {
    op.emit(Event::ApprovalDecided {
        approval: a.id,
        handler: a.handler,
        approved: a.status == ApprovalStatus::Approved,
    });
    // A pipeline run waiting for this decision goes on (its engine reads
    // the decision when it runs the stage again); it has no agent to mail.
    if crate::pipelines::approval_decided(op, a.handler)? {
        return Ok(());
    }
    let active = op
        .tx
        .handler(a.handler)?
        .is_some_and(|h| h.status == HandlerStatus::Active);
    if !active {
        return Ok(());
    }
    let (subject, body) = decision_notice(a);
    op.notice(caller, MailTarget::Handler(a.handler), &subject, &body);
    Ok(())
}

/// The notice of a decision: subject and body.
fn decision_notice(a: &ApprovalRow) -> (String, String) {
    let (id, tool) = (a.id, &a.tool);
    let args = clip_chars(&pretty(&a.args), NOTICE_ARGS_CHARS);
    let call =
        format!("your call of tool `{tool}` with these arguments:\n\n```json\n{args}\n```\n\n");
    if a.status == ApprovalStatus::Approved {
        let runs = if a.always {
            "it runs, and so does every identical call of this handler from now on"
        } else {
            "it runs once; a further identical call asks again"
        };
        (
            format!("Approved: {tool} (request {id})"),
            format!(
                "The user approved {call}\
                 Approved: call it again with the same arguments ({runs}). \
                 Acknowledge this message once you have."
            ),
        )
    } else {
        let reason = a.deny_reason.as_deref().unwrap_or("no reason given");
        (
            format!("Denied: {tool} (request {id})"),
            format!(
                "The user denied {call}\
                 The user's reason: {reason}\n\n\
                 Do not make this call again: the same arguments stay denied. \
                 Do the task another way, or tell your boss why it cannot be done, \
                 and acknowledge this message."
            ),
        )
    }
}

/// `s` cut to at most `max` characters, marked when cut.
fn clip_chars(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}… (cut here; the request holds them whole)", &s[..at]),
        None => s.to_string(),
    }
}

fn pretty(canonical: &str) -> String {
    serde_json::from_str::<serde_json::Value>(canonical)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| canonical.to_string())
}

impl System {
    /// Install the policy (the daemon reads `policy.toml` at start and at
    /// `agency reload`); calls admitted from now on are classified by it.
    /// Until then, and if never called, the documented defaults apply.
    pub fn set_policy(&self, policy: Policy) {
        *self.policy.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(policy);
    }

    /// The approval setting of a capability (`Some("each_use")` or `None`).
    pub fn capability_approval(&self, cap: CapabilityId) -> Result<Option<String>> {
        self.read(|tx| Ok(tx.capability_approval(cap)?))
    }
}
