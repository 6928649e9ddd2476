//! Typed calls made by pipeline stages: an `agent`
//! stage is a typed call from the run's handler to the named agent's
//! handler, with the stage's verb.
//!
//! Permission: when the user starts a run, every agent stage is checked
//! against the organisations that are up (`agency_org`'s
//! [`check_agent_stages`]: the agent exists, declares the verb, with the
//! stage's output schema), and the run's handler is granted exactly the
//! connections those calls need, both ways (the call, and the callee's
//! reply), scoped to the run's outcome: they are revoked with it. A run
//! whose stages do not fit is refused at start, naming each stage's
//! `file:line`.
//!
//! Durability: the call's id is derived from the run and the stage, so a
//! stage handed out again (a restart while it waited) finds the call it
//! made instead of making a second one; the store refuses an id twice,
//! so two engines racing cannot both send.

use agency_api::CallSent;
use agency_core::status::PipelineRunStatus;
use agency_core::{CallId, HandlerId, MailTarget, OutcomeId, Principal, Resource};
use agency_org::AgencyModel;
use agency_org::pipeline::{PipelineModel, StageKind, check_agent_stages};
use agency_store::{CallStatus, OrgAgentStatus, Tx};
use serde_json::Value;

use super::CallRequest;
use crate::Result;
use crate::error::ServiceError;
use crate::service::{Op, System};
use crate::tree::handlers::system_cap;

/// The id of the typed call stage `idx` of run `run` makes.
pub fn stage_call_id(run: HandlerId, idx: usize) -> CallId {
    let mut h = blake3::Hasher::new();
    h.update(b"agency pipeline stage call\0");
    h.update(run.uuid().as_bytes());
    h.update(&(idx as u64).to_le_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&h.finalize().as_bytes()[..16]);
    CallId(uuid::Builder::from_random_bytes(bytes).into_uuid())
}

/// An agent stage's call as the engine sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum StageCall {
    /// The run is no longer running at that stage (stopped, waiting or
    /// moved on): the engine leaves it.
    Gone,
    /// No call was made yet.
    NotSent,
    /// Sent, not answered; `waited_ms` since it was sent.
    Pending { waited_ms: i64 },
    /// The callee's output, already checked against the verb's output
    /// schema by `agent_reply`.
    Answered { output: Value },
    /// The callee answered with an error.
    Failed { error: String },
}

/// The agent stages of `model` checked against the organisations that are
/// up and resolved to their callees' handlers, in stage order; refused
/// with every problem at its stage's `file:line`.
pub(crate) fn resolve(tx: &mut dyn Tx, model: &PipelineModel) -> Result<Vec<HandlerId>> {
    if !model
        .stages
        .iter()
        .any(|s| matches!(s.kind, StageKind::Agent { .. }))
    {
        return Ok(Vec::new());
    }
    let mut orgs: Vec<(String, AgencyModel)> = Vec::new();
    for o in tx.orgs()? {
        if o.retired_at.is_some() {
            continue;
        }
        let m: AgencyModel = serde_json::from_str(&o.model_json).map_err(|e| {
            ServiceError::Store(agency_store::StoreError::corrupt(
                "organisation model",
                format!("organisation {}: {e}", o.name),
            ))
        })?;
        orgs.push((o.name, m));
    }
    let refs: Vec<(&str, &AgencyModel)> = orgs.iter().map(|(n, m)| (n.as_str(), m)).collect();
    let targets = check_agent_stages(model, &refs).map_err(|diags| {
        let lines: Vec<String> = diags.iter().map(ToString::to_string).collect();
        ServiceError::invalid(format!(
            "failed to call the agents of pipeline {:?}: its agent stages do not fit the organisations that are up:\n{}",
            model.name,
            lines.join("\n")
        ))
    })?;
    let mut out = Vec::new();
    for t in targets {
        let handler = tx
            .org_agents(&t.org)?
            .into_iter()
            .find(|a| a.agent == t.agent && a.status == OrgAgentStatus::Active)
            .map(|a| a.handler)
            .ok_or_else(|| {
                ServiceError::invalid(format!(
                    "failed to call the agents of pipeline {:?}: stage `{}` calls agent `{}` of organisation {}, which is not standing now",
                    model.name, model.stages[t.stage].name, t.agent, t.org
                ))
            })?;
        out.push(handler);
    }
    Ok(out)
}

/// Grant run `run` the connections its agent stages need, both ways,
/// scoped to the run's outcome `scope`.
pub(crate) fn grant(
    op: &mut Op<'_>,
    run: HandlerId,
    scope: OutcomeId,
    targets: &[HandlerId],
) -> Result<()> {
    let mut done: Vec<HandlerId> = Vec::new();
    for &callee in targets {
        if done.contains(&callee) {
            continue;
        }
        done.push(callee);
        system_cap(
            op,
            run,
            Resource::Mail(MailTarget::Handler(callee)),
            Some(scope),
        )?;
        system_cap(
            op,
            callee,
            Resource::Mail(MailTarget::Handler(run)),
            Some(scope),
        )?;
    }
    Ok(())
}

impl System {
    /// Daemon: the call of agent stage `idx` of `run`, as it stands.
    pub fn pipeline_stage_call(&self, run: HandlerId, idx: usize) -> Result<StageCall> {
        let id = stage_call_id(run, idx);
        let now = self.now();
        self.read(|tx| {
            let r = tx
                .pipeline_run(run)?
                .ok_or_else(|| ServiceError::not_found("pipeline run", run))?;
            if r.status != PipelineRunStatus::Running || r.stage as usize != idx {
                return Ok(StageCall::Gone);
            }
            let Some(c) = tx.call(id)?.filter(|c| c.caller == run) else {
                return Ok(StageCall::NotSent);
            };
            let reply: Value = c
                .reply
                .as_deref()
                .and_then(|r| serde_json::from_str(r).ok())
                .unwrap_or(Value::Null);
            Ok(match c.status {
                CallStatus::Pending => StageCall::Pending {
                    waited_ms: now.0.saturating_sub(c.created_at.0).max(0),
                },
                CallStatus::Answered => StageCall::Answered {
                    output: reply.get("output").cloned().unwrap_or(Value::Null),
                },
                _ => StageCall::Failed {
                    error: reply
                        .get("error")
                        .and_then(Value::as_str)
                        .unwrap_or("the call failed")
                        .to_owned(),
                },
            })
        })
    }

    /// Daemon: make agent stage `idx`'s call with `input`, as an agent of
    /// the run started for it and ended once the call is sent (the reply
    /// goes to the run's handler, which outlives it). Everything
    /// `agent_call` checks applies: the connection granted at start, the
    /// verb's input schema (a mismatch is a schema violation with its
    /// issues, and nothing is sent), budgets and hop limits. `None`: the
    /// call was made already (by an earlier hand-out of the stage).
    pub fn pipeline_stage_call_send(
        &self,
        run: HandlerId,
        idx: usize,
        input: &Value,
    ) -> Result<Option<CallSent>> {
        let id = stage_call_id(run, idx);
        let planned = self.read(|tx| {
            let r = tx
                .pipeline_run(run)?
                .ok_or_else(|| ServiceError::not_found("pipeline run", run))?;
            if r.status != PipelineRunStatus::Running || r.stage as usize != idx {
                return Err(ServiceError::invalid(format!(
                    "failed to call from stage {idx} of pipeline run {run}: the run is {} at stage {}",
                    r.status.as_str(),
                    r.stage
                )));
            }
            if tx.call(id)?.is_some() {
                return Ok(None);
            }
            let model = crate::pipelines::stored_model(&r)?;
            let Some(stage) = model.stages.get(idx).cloned() else {
                return Err(ServiceError::not_found("pipeline stage", idx));
            };
            let StageKind::Agent { verb, .. } = &stage.kind else {
                return Err(ServiceError::invalid(format!(
                    "failed to call from stage {}: it is not an agent stage",
                    stage.name
                )));
            };
            let verb = verb.clone();
            // Resolved again now: the organisation may have changed since
            // the run started (a callee retired, a verb changed).
            let one = PipelineModel {
                version: model.version.clone(),
                name: model.name.clone(),
                description: model.description.clone(),
                input_schema: model.input_schema.clone(),
                stages: vec![stage],
                source: model.source.clone(),
                source_hash: model.source_hash.clone(),
            };
            let resolved = resolve(tx, &one)?;
            let callee = resolved
                .first()
                .copied()
                .ok_or_else(|| ServiceError::not_found("pipeline stage", idx))?;
            Ok(Some((callee, verb)))
        })?;
        let Some((callee, verb)) = planned else {
            return Ok(None);
        };
        let minted = self.agent_start_with_token(run, None)?;
        let target = callee.to_string();
        let sent = self.agent_call_as(
            Principal::agent(run, minted.agent),
            &CallRequest {
                target: &target,
                verb: &verb,
                input,
                steps: None,
                within: None,
            },
            id,
        );
        if let Err(e) = self.agent_end(minted.agent, "pipeline_stage_call_sent") {
            tracing::warn!(%run, "failed to end the agent of an agent stage's call: {e}");
        }
        sent.map(Some)
    }
}
