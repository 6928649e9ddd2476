//! Typed calls between agents (seeds 003 and 004): an
//! agent calls a verb of another organisation agent with `agent_call`,
//! and the callee answers once with `agent_reply`.
//!
//! A call is mail: the request and the reply go through the mail send
//! path (`mail/`), so connections, capabilities, budgets, hop limits and
//! the policy apply to them exactly as to any message, and the caller may
//! simply continue and read the reply from its inbox, or wait for it with
//! `mail_wait` keyed by the conversation. What is added: the input is
//! checked against the verb's input schema before anything is sent, the
//! answer against its output schema before anything is delivered (a
//! refused answer leaves the call open, so the callee may try again), and
//! each call is recorded with its envelope (`agent_calls`) in the same
//! transaction as its mail, which is how a reply is matched to its request
//! and delivered once.
//!
//! Bounded loops (seed 003): a call made while the caller serves another
//! (`within`, else the newest call still open to it) is nested: it joins
//! that call's conversation, adds one hop, and spends one step of the
//! budget the conversation's top-level call was given (`steps`), which
//! every call of the tree shares; a nested call once that budget is spent,
//! or a chain longer than `[limits] max_handoffs`, is refused before
//! anything is sent.

pub(crate) mod contract;
mod envelope;
pub(crate) mod stage;

use std::collections::BTreeSet;

use agency_api::{CallReplied, CallSent, CallView, MailHeader};
use agency_core::{CallId, ConversationId, HandlerId, MailTarget, MessageId, Principal};
use agency_store::{CallRow, CallStatus, Tx};
use serde_json::Value;

use crate::Result;
use crate::error::ServiceError;
use crate::mail::check_may_send;
use crate::service::{Caller, Service, authenticate};

use self::envelope::Answer;

/// Nested calls a top-level call allows when the caller names none.
pub const DEFAULT_STEPS: u32 = 8;
/// The largest step budget a caller may give.
pub const MAX_STEPS: u32 = 64;
/// Most characters of a callee's error answer.
const MAX_ERROR_CHARS: usize = 4000;
/// Most calls of one conversation `mail_wait` looks through.
const MAX_CONVERSATION_CALLS: usize = 1000;

/// What `agent_call` asks.
#[derive(Debug, Clone, Copy)]
pub struct CallRequest<'a> {
    /// The callee: an agent name of the caller's organisation, or a
    /// handler id.
    pub target: &'a str,
    pub verb: &'a str,
    pub input: &'a Value,
    /// The step budget of a top-level call: how many nested calls its
    /// whole tree may make (default [`DEFAULT_STEPS`], at most
    /// [`MAX_STEPS`]). A nested call shares its top-level call's budget,
    /// so it is ignored there.
    pub steps: Option<u32>,
    /// The call the caller is serving, if it names one (else the newest
    /// call still open to it, if any).
    pub within: Option<CallId>,
}

/// What `agent_reply` answers.
#[derive(Debug, Clone, Copy)]
pub enum CallAnswer<'a> {
    /// An output, checked against the verb's output schema.
    Output(&'a Value),
    /// Why the callee cannot do it.
    Error(&'a str),
}

/// A checked request, ready to send.
struct Planned {
    callee: HandlerId,
    contract: contract::Contract,
    caller_name: Option<String>,
    parent: Option<CallRow>,
    /// The conversation's top-level call, whose budget a nested call spends.
    root: Option<CallId>,
    conversation: ConversationId,
    hops: u32,
    steps_left: u32,
}

impl Service {
    /// Call `req.verb` of `req.target` as the calling agent: check that it
    /// may mail the target, that the target offers the verb, that the
    /// input matches the verb's input schema, and the step budget and hop
    /// count; then send the request as mail and record the call, together.
    pub fn agent_call(&self, who: Principal, req: &CallRequest<'_>) -> Result<CallSent> {
        self.agent_call_as(who, req, CallId::new_random())
    }

    /// [`Service::agent_call`] with the call's id chosen by the caller (a
    /// pipeline stage derives it, so a stage handed out again finds its
    /// call instead of making a second): the store refuses an id twice.
    pub(crate) fn agent_call_as(
        &self,
        who: Principal,
        req: &CallRequest<'_>,
        id: CallId,
    ) -> Result<CallSent> {
        if let Err(e) = agency_org::verbs::check_verb_name(req.verb) {
            return Err(ServiceError::invalid(format!("failed to call a verb: {e}")));
        }
        if let Some(s) = req.steps
            && s > MAX_STEPS
        {
            return Err(ServiceError::invalid(format!(
                "failed to call verb `{}`: `steps` is {s}, at most {MAX_STEPS} nested calls may be allowed",
                req.verb
            )));
        }
        let plan = self.read(|tx| self.plan_call(tx, who, req))?;
        let Principal::Agent {
            agent: caller_agent,
            handler: caller,
        } = who
        else {
            return Err(ServiceError::invalid(
                "failed to call a verb: only an agent acting for a handler can call one",
            ));
        };
        let body = envelope::request(&envelope::Request {
            id,
            conversation: plan.conversation,
            parent: plan.parent.as_ref().map(|p| p.id),
            caller,
            caller_agent,
            caller_name: plan.caller_name.as_deref(),
            verb: &plan.contract.verb,
            input: req.input,
            hops: plan.hops,
            steps_left: plan.steps_left,
        });
        let parent = plan.parent.as_ref().map(|p| p.id);
        let row = |message| CallRow {
            id,
            conversation: plan.conversation,
            parent,
            caller,
            caller_agent,
            callee: plan.callee,
            org: plan.contract.agent.org.clone(),
            agent: plan.contract.agent.agent.clone(),
            verb: plan.contract.verb.name.clone(),
            hops: plan.hops,
            steps_left: plan.steps_left,
            request_message: message,
            reply_message: None,
            reply: None,
            status: CallStatus::Pending,
            created_at: self.now(),
            answered_at: None,
        };
        let spent_to = std::cell::Cell::new(plan.steps_left);
        let message = self.send_then(
            who,
            MailTarget::Handler(plan.callee),
            &body,
            None,
            None,
            &|op, _, message| {
                // The parent may have been answered since the check: a
                // nested call then has no budget to spend.
                if let Some(p) = parent
                    && op.tx.call(p)?.is_none_or(|p| p.status != CallStatus::Pending)
                {
                    return Err(ServiceError::invalid(format!(
                        "failed to call verb `{}`: call {p}, which you were serving, has been answered meanwhile",
                        req.verb
                    )));
                }
                let mut r = row(message);
                r.created_at = op.now;
                // Spend the step here, in the transaction that sends: two
                // nested calls at once cannot both take the last step.
                if let Some(root) = plan.root {
                    let Some(left) = op.tx.spend_call_step(root)? else {
                        return Err(ServiceError::Quota(format!(
                            "failed to call verb `{}`: the call tree of conversation {} has no step budget left; answer with what you have",
                            req.verb, plan.conversation
                        )));
                    };
                    r.steps_left = left;
                    spent_to.set(left);
                }
                op.tx.insert_call(&r)?;
                Ok(())
            },
        )?;
        Ok(CallSent {
            request_id: id,
            conversation_id: plan.conversation,
            message,
            callee: plan.callee,
            hops: plan.hops,
            steps_left: spent_to.get(),
        })
    }

    fn plan_call(&self, tx: &mut dyn Tx, who: Principal, req: &CallRequest<'_>) -> Result<Planned> {
        let caller = authenticate(tx, who)?;
        let me = caller
            .require_handler(&format!("call verb `{}`", req.verb))?
            .id;
        let callee = resolve_target(tx, me, req.target, req.verb)?;
        if callee == me {
            return Err(ServiceError::invalid(format!(
                "failed to call verb `{}`: the target is your own handler; do the work yourself",
                req.verb
            )));
        }
        // Permission first, exactly as mail: a caller that may not write to
        // the target learns nothing about its verbs.
        check_may_send(tx, &caller, MailTarget::Handler(callee))?;
        let contract = contract::contract(tx, callee, req.verb)?;
        contract::check(&contract.verb.input, req.input).map_err(|issues| {
            ServiceError::SchemaViolation {
                message: format!(
                    "failed to call verb `{}` of {}: the input does not match the verb's input schema, so nothing was sent; fix the input and call again",
                    req.verb, contract.agent.agent
                ),
                issues,
            }
        })?;
        let parent = match req.within {
            Some(p) => {
                let row = tx
                    .call(p)?
                    .filter(|r| r.callee == me)
                    .ok_or_else(|| ServiceError::not_found("call", p))?;
                if row.status != CallStatus::Pending {
                    return Err(ServiceError::invalid(format!(
                        "failed to call verb `{}` within call {p}: that call is already answered",
                        req.verb
                    )));
                }
                Some(row)
            }
            None => tx.newest_open_call_to(me)?,
        };
        let max_hops = u32::try_from(self.cfg.limits.max_handoffs).unwrap_or(u32::MAX);
        let (conversation, root, hops, steps_left) = match &parent {
            None => (
                ConversationId::new_random(),
                None,
                1,
                req.steps.unwrap_or(DEFAULT_STEPS),
            ),
            Some(p) => {
                let root = tx
                    .calls_in_conversation(p.conversation, 1)?
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| p.clone());
                if root.steps_left == 0 {
                    return Err(out_of_steps(req.verb, &root));
                }
                (
                    p.conversation,
                    Some(root.id),
                    p.hops.saturating_add(1),
                    root.steps_left - 1,
                )
            }
        };
        if hops > max_hops {
            return Err(ServiceError::Quota(format!(
                "failed to call verb `{}`: this chain of calls would be {hops} calls long \
                 (limit limits.max_handoffs = {max_hops} in agency.toml); answer with what you have",
                req.verb
            )));
        }
        let caller_name = tx.org_agent_by_handler(me)?.map(|r| r.agent);
        Ok(Planned {
            callee,
            contract,
            caller_name,
            parent,
            root,
            conversation,
            hops,
            steps_left,
        })
    }

    /// Answer call `id` as its callee: an output is checked against the
    /// verb's output schema (refused with its issues, the call staying
    /// open, so the callee may try again); the answer goes to the caller as
    /// mail in the call's conversation, and the call is closed with it, in
    /// one transaction: a call is answered once.
    pub fn agent_reply(
        &self,
        who: Principal,
        id: CallId,
        answer: CallAnswer<'_>,
    ) -> Result<CallReplied> {
        let answer = match answer {
            CallAnswer::Output(v) => Answer::Output(v),
            CallAnswer::Error(e) => {
                if e.trim().is_empty() {
                    return Err(ServiceError::invalid(format!(
                        "failed to answer call {id}: the error is empty; say why the call cannot be done"
                    )));
                }
                if e.chars().count() > MAX_ERROR_CHARS {
                    return Err(ServiceError::invalid(format!(
                        "failed to answer call {id}: the error is longer than {MAX_ERROR_CHARS} characters"
                    )));
                }
                Answer::Error(e)
            }
        };
        let row = self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let me = caller.require_handler("answer a call")?.id;
            // Only the callee may answer; others learn nothing of the call.
            let row = tx
                .call(id)?
                .filter(|r| r.callee == me)
                .ok_or_else(|| ServiceError::not_found("call", id))?;
            if row.status != CallStatus::Pending {
                return Err(already_answered(&row));
            }
            if let Answer::Output(v) = &answer {
                let c = contract::contract(tx, row.callee, &row.verb)?;
                contract::check(&c.verb.output, v).map_err(|issues| {
                    ServiceError::SchemaViolation {
                        message: format!(
                            "failed to answer call {id} (verb `{}`): the output does not match the verb's output schema, so nothing was sent; fix it and call agent_reply again",
                            row.verb
                        ),
                        issues,
                    }
                })?;
            }
            Ok(row)
        })?;
        let callee_agent = who.agent_id();
        let body = envelope::reply(&row, callee_agent, &answer);
        let status = match answer {
            Answer::Output(_) => CallStatus::Answered,
            Answer::Error(_) => CallStatus::Failed,
        };
        let stored = answer.json().to_string();
        let message = self.send_then(
            who,
            MailTarget::Handler(row.caller),
            &body,
            None,
            Some(row.request_message),
            &|op, _, message| {
                if op.tx.answer_call(id, status, message, &stored, op.now)? {
                    Ok(())
                } else {
                    Err(already_answered(&row))
                }
            },
        )?;
        Ok(CallReplied {
            request_id: id,
            conversation_id: row.conversation,
            message,
            kind: answer.kind().to_owned(),
        })
    }

    /// Call `id` as its caller or callee sees it, with the answer once
    /// there is one.
    pub fn call_view(&self, who: Principal, id: CallId) -> Result<CallView> {
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let me = caller.handler();
            let row = tx
                .call(id)?
                .filter(|r| Some(r.caller) == me || Some(r.callee) == me)
                .ok_or_else(|| ServiceError::not_found("call", id))?;
            let reply: Option<Value> = row
                .reply
                .as_deref()
                .and_then(|r| serde_json::from_str(r).ok());
            let field = |k: &str| reply.as_ref().and_then(|r| r.get(k)).cloned();
            Ok(CallView {
                request_id: row.id,
                conversation_id: row.conversation,
                verb: row.verb,
                agent: row.agent,
                status: row.status.as_str().to_owned(),
                output: field("output"),
                error: field("error").and_then(|e| e.as_str().map(str::to_owned)),
                reply_message: row.reply_message,
            })
        })
    }

    /// [`Service::mail_waiting`] narrowed to one conversation of typed
    /// calls: the delivered, unacknowledged requests and replies of it
    /// addressed to the caller, oldest first. Empty for a conversation the
    /// caller takes no part in.
    pub fn mail_waiting_in(
        &self,
        who: Principal,
        conversation: ConversationId,
        known: &[MessageId],
        limit: usize,
    ) -> Result<Vec<MailHeader>> {
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            let Caller::Handler { row: me, .. } = &caller else {
                return Ok(Vec::new());
            };
            let mut ids = BTreeSet::new();
            let mut ordered = Vec::new();
            for c in tx.calls_in_conversation(conversation, MAX_CONVERSATION_CALLS)? {
                let mine = [
                    (c.callee == me.id).then_some(c.request_message),
                    (c.caller == me.id).then_some(c.reply_message).flatten(),
                ];
                for m in mine.into_iter().flatten() {
                    if !known.contains(&m) && ids.insert(m) {
                        ordered.push(m);
                    }
                }
            }
            let mut out = Vec::new();
            for id in ordered {
                if out.len() >= limit {
                    break;
                }
                if let Some(m) = tx.message(id)?.filter(|m| {
                    m.to == MailTarget::Handler(me.id)
                        && m.delivered_at.is_some()
                        && m.acked_at.is_none()
                        && m.dropped_reason.is_none()
                }) {
                    out.push(MailHeader {
                        id: m.id,
                        from: m.from,
                        subject: m.subject,
                    });
                }
            }
            Ok(out)
        })
    }
}

fn out_of_steps(verb: &str, root: &CallRow) -> ServiceError {
    ServiceError::Quota(format!(
        "failed to call verb `{verb}`: the calls of conversation {} have no step budget left \
         (call {} allowed no more nested calls); answer the call you serve with what you have",
        root.conversation, root.id
    ))
}

fn already_answered(row: &CallRow) -> ServiceError {
    ServiceError::invalid(format!(
        "failed to answer call {}: it is already answered (a call is answered once)",
        row.id
    ))
}

/// The handler `target` names: a handler id, or an agent of the caller's
/// organisation by name.
fn resolve_target(tx: &mut dyn Tx, me: HandlerId, target: &str, verb: &str) -> Result<HandlerId> {
    if let Ok(h) = target.parse::<HandlerId>() {
        return Ok(h);
    }
    let Some(mine) = tx.org_agent_by_handler(me)? else {
        return Err(ServiceError::invalid(format!(
            "failed to call verb `{verb}` of `{target}`: you are no organisation's agent, so name the target by its handler id"
        )));
    };
    tx.org_agents(&mine.org)?
        .into_iter()
        .find(|a| a.agent == target && a.status == agency_store::OrgAgentStatus::Active)
        .map(|a| a.handler)
        .ok_or_else(|| {
            ServiceError::not_found("agent", format!("{target} in organisation {}", mine.org))
        })
}
