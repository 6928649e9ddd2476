//! An `agent` stage: a typed call from the run's handler to the named
//! agent's verb, made and recorded by the service
//! (`System::pipeline_stage_call_send`), answered by the callee with
//! `agent_reply`.
//!
//! - The input is the object of the stage's reads, each under its name
//!   (its last field, else the stage's name), from the revalidated
//!   context; the service checks it against the verb's input schema
//!   before anything is sent, and a mismatch ends the stage
//!   `failed_validation` with the issues.
//! - The wait is for the service's mail-delivered event to the run's
//!   handler (no polling loop), bounded by `budget.timeout_seconds`
//!   (default [`DEFAULT_TIMEOUT`]) counted from when the call was sent,
//!   so a restart neither resets the bound nor sends a second call: the
//!   call's id is derived from the run and the stage.
//! - The answer, already checked against the verb's output schema, must
//!   also pass the stage's contract (stamps, checks) before it becomes
//!   the artifact; an error answer ends the stage `failed_infra` with the
//!   callee's message.

use std::sync::Arc;
use std::time::Duration;

use agency_core::MailTarget;
use agency_core::status::StageStatus as Stored;
use agency_org::pipeline::{StageModel, org_check::read_name};
use agency_service::pipelines::{NextStage, StageCall, StageEnd};
use agency_service::{Event, ServiceError, System};
use serde_json::{Map, Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::runner::{blocking, context_of, failed, succeeded};
use crate::validate::{OutputContract, Stamps};

/// How long an agent stage waits for its answer when its budget names no
/// `timeout_seconds`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// Run agent stage `next` (calling `verb` of `agent`). `None`: the run is
/// no longer running at this stage (the user stopped it), nothing to end.
pub(crate) async fn run(
    sys: &Arc<System>,
    next: &NextStage,
    stage: &StageModel,
    agent: &str,
    verb: &str,
) -> Option<StageEnd> {
    let contract = match OutputContract::cached(stage) {
        Ok(c) => c,
        Err(e) => return Some(failed(Stored::FailedInfra, e.to_string())),
    };
    let timeout = stage
        .budget
        .as_ref()
        .and_then(|b| b.timeout_seconds)
        .map_or(DEFAULT_TIMEOUT, Duration::from_secs);
    let (run, idx) = (next.run, next.idx);
    // Subscribed before the first look, so an answer in between is seen.
    let mut events = sys.subscribe();
    let mut sent = false;
    loop {
        let s = sys.clone();
        let state = match blocking(move || s.pipeline_stage_call(run, idx)).await {
            Ok(st) => st,
            Err(e) => {
                return Some(failed(
                    Stored::FailedInfra,
                    format!("failed to read the call of stage {}: {e}", stage.name),
                ));
            }
        };
        let waited = match state {
            StageCall::Gone => return None,
            StageCall::NotSent if sent => {
                return Some(failed(
                    Stored::FailedInfra,
                    format!(
                        "stage {}: the call was sent but is not recorded",
                        stage.name
                    ),
                ));
            }
            StageCall::NotSent => {
                if let Err(end) = send(sys, next, stage, agent, verb).await {
                    return Some(*end);
                }
                sent = true;
                continue;
            }
            StageCall::Answered { output } => return Some(accept(&contract, next, output)),
            StageCall::Failed { error } => {
                let mut end = failed(
                    Stored::FailedInfra,
                    format!(
                        "stage {}: agent {agent} answered verb {verb} with an error: {error}",
                        stage.name
                    ),
                );
                end.attempts = 1;
                return Some(end);
            }
            StageCall::Pending { waited_ms } => {
                Duration::from_millis(u64::try_from(waited_ms).unwrap_or(0))
            }
        };
        let Some(left) = timeout.checked_sub(waited).filter(|d| !d.is_zero()) else {
            let mut end = failed(
                Stored::FailedInfra,
                format!(
                    "stage {}: agent {agent} did not answer verb {verb} within {} s (budget.timeout_seconds)",
                    stage.name,
                    timeout.as_secs()
                ),
            );
            end.attempts = 1;
            return Some(end);
        };
        // Sleep until something concerning the run happens, or the bound.
        let woke = tokio::time::timeout(left, async {
            loop {
                match events.recv().await {
                    Ok(Event::MessageDelivered {
                        to: MailTarget::Handler(h),
                        ..
                    }) if h == run => return true,
                    Ok(Event::OutcomeStatusChanged { outcome, .. }) if outcome == run.root() => {
                        return true;
                    }
                    Ok(Event::PipelineRunReady { run: r }) if r == run => return true,
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => return true,
                    Err(RecvError::Closed) => return false,
                }
            }
        })
        .await;
        if woke == Ok(false) {
            // The service is shutting down: the stage is handed out again
            // at the next start, and finds its call.
            return None;
        }
    }
}

/// Send the call; `Err`: the stage's end (boxed: it is large).
async fn send(
    sys: &Arc<System>,
    next: &NextStage,
    stage: &StageModel,
    agent: &str,
    verb: &str,
) -> Result<(), Box<StageEnd>> {
    let input = input_of(next, stage).map_err(|e| Box::new(failed(Stored::FailedInfra, e)))?;
    let (s, run, idx) = (sys.clone(), next.run, next.idx);
    let sent = blocking(move || s.pipeline_stage_call_send(run, idx, &input)).await;
    match sent {
        Ok(_) => Ok(()),
        Err(ServiceError::SchemaViolation { message, issues }) => {
            let mut end = failed(
                Stored::FailedValidation,
                format!(
                    "stage {}: its input does not match the input schema of verb {verb} of agent {agent}: {message}",
                    stage.name
                ),
            );
            end.report = json!({ "input_issues": issues });
            Err(Box::new(end))
        }
        Err(e) => {
            let status = match e.kind() {
                "quota" => Stored::BudgetExhausted,
                "permission_denied" => Stored::BlockedPolicy,
                _ => Stored::FailedInfra,
            };
            Err(Box::new(failed(
                status,
                format!(
                    "stage {}: failed to call verb {verb} of agent {agent}: {e}",
                    stage.name
                ),
            )))
        }
    }
}

/// The stage's input: an object of its reads, each under its name.
fn input_of(next: &NextStage, stage: &StageModel) -> Result<Value, String> {
    let ctx = context_of(next)?;
    let mut out = Map::new();
    for r in &stage.reads {
        let fields: Vec<&str> = r.fields.iter().map(String::as_str).collect();
        let v = ctx.lookup(&r.stage, &fields).ok_or_else(|| {
            format!(
                "stage {} reads {}, which the run's context lacks",
                stage.name,
                std::iter::once(r.stage.as_str())
                    .chain(fields.iter().copied())
                    .collect::<Vec<_>>()
                    .join(".")
            )
        })?;
        out.insert(read_name(r).to_owned(), v.clone());
    }
    Ok(Value::Object(out))
}

/// The answer through the stage's contract: the artifact, or
/// `failed_validation` with the issues (the answer kept for diagnosis).
fn accept(contract: &OutputContract, next: &NextStage, output: Value) -> StageEnd {
    let stamps = Stamps::new(next.level, &next.context);
    match contract.accept(output.clone(), &stamps) {
        Ok(artifact) => StageEnd {
            attempts: 1,
            ..succeeded(artifact.into_value(), json!({ "call": "answered" }))
        },
        Err(issues) => {
            let mut end = failed(
                Stored::FailedValidation,
                format!(
                    "stage {}: the agent's answer does not pass the stage's output contract",
                    contract.stage()
                ),
            );
            end.attempts = 1;
            end.report = json!({ "issues": issues, "raw": output });
            end
        }
    }
}
