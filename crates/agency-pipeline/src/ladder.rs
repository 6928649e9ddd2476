//! The one retry ladder of an llm stage, with one counter: (i) ask, with
//! constrained output where the client says the upstream
//! has it; (ii) an answer that does not validate as it stands goes through
//! the lenient repair parse; (iii) at most `repair_attempts` re-asks;
//! (iv) optionally one escalation to `escalate_model`; (v) then the
//! terminal `failed_validation`.
//!
//! A re-ask (and the escalation) is the conversation: the original
//! prompt, the latest bad answer (as the assistant's turn) and the latest
//! failure's machine-readable issues (instance path, keyword, message) as
//! JSON. Nothing of earlier attempts: the request does not grow with the
//! ladder, and an old error the model already fixed cannot mislead it.
//!
//! Transport failures (5xx, 429 that is not a budget, timeouts, refused
//! connections) are retried on the same step after a jittered backoff:
//! they never consume a repair attempt and never reach the model's
//! context; when they persist the stage ends `failed_infra`. A budget
//! refusal ends it `budget_exhausted`, a policy refusal `blocked_policy`.
//! An upstream that refuses a constrained request as malformed (a schema
//! its constrained decoding does not support) is asked again, once for
//! the stage, without the constraint.

use std::time::Instant;

use agency_org::pipeline::{MAX_REPAIR_ATTEMPTS, StageKind, StageModel};
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::client::{
    Backoff, BoxFuture, CallError, Clock, Message, ModelAnswer, ModelClient, Role, Sleeper,
    StructuredRequest, SystemClock, TokioSleeper,
};
use crate::repair::repair;
use crate::template::{Context, TemplateError, render};
use crate::validate::{Artifact, Issue, Issues, OutputContract, Stamps};

/// Output tokens a call may use when the stage's budget sets no limit.
pub const DEFAULT_MAX_OUTPUT_TOKENS: u64 = 8192;

/// Most characters of the latest bad answer echoed back in a re-ask.
const MAX_ECHO_CHARS: usize = 32_000;

/// What a stage runs with, besides the stage itself.
#[derive(Clone, Copy)]
pub struct StageDeps<'a> {
    pub client: &'a dyn ModelClient,
    pub clock: &'a dyn Clock,
    pub sleeper: &'a dyn Sleeper,
    pub backoff: Backoff,
}

impl std::fmt::Debug for StageDeps<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StageDeps")
            .field("backoff", &self.backoff)
            .finish_non_exhaustive()
    }
}

/// A stage's state: the ladder ends every stage in one of the terminal
/// ones (`ok`: the first answer validated as it stood; `repaired`: an
/// artifact after a repair parse, a re-ask or the escalation). The store's
/// own type, so that what the engine reports is what is recorded.
pub use agency_core::status::StageStatus;

/// Which step of the ladder a call was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptKind {
    Initial,
    Reask,
    Escalation,
}

/// One call of the stage, kept for diagnosis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Attempt {
    pub kind: AttemptKind,
    pub model: Option<String>,
    pub constrained: bool,
    pub input_tokens: u64,
    pub output_tokens: u64,
    /// The answer's text, as received (never stored as an artifact).
    pub raw: Option<String>,
    pub stop_reason: Option<String>,
    /// Why the answer did not validate; `None` when it did or when there
    /// was no answer.
    pub issues: Option<Issues>,
    /// The answer needed the repair parse.
    pub repaired: bool,
    /// A transport failure, retried: it used no repair attempt.
    pub transport_retry: bool,
    /// Why the call brought no answer.
    pub error: Option<String>,
    pub duration_ms: u64,
}

/// The sums over a stage's attempts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    /// Every call, transport failures included.
    pub calls: u32,
    /// Calls that brought an answer (what the provider billed).
    pub answered: u32,
    pub transport_retries: u32,
    /// Re-asks made (the one counter; the escalation is not one).
    pub reasks: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub duration_ms: u64,
}

/// How a stage ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StageReport {
    pub stage: String,
    pub status: StageStatus,
    /// Only with `ok` and `repaired`.
    pub artifact: Option<Artifact>,
    pub attempts: Vec<Attempt>,
    pub totals: Totals,
    /// The latest failure's issues (with `failed_validation`).
    pub issues: Option<Issues>,
    /// Why the stage ended without an artifact, in a sentence.
    pub error: Option<String>,
}

/// A stage the ladder cannot run at all (a bug upstream of it, not a
/// model's failure).
#[derive(Debug, thiserror::Error)]
pub enum LadderError {
    #[error("failed to run stage {stage}: it is not an llm stage")]
    NotLlm { stage: String },
    #[error("failed to run stage {stage}: the contract given is stage {contract}'s")]
    WrongContract { stage: String, contract: String },
    #[error("failed to run stage {stage}: {source}")]
    Template {
        stage: String,
        source: TemplateError,
    },
}

/// Run an llm stage to its terminal state. `stamps`: what the engine
/// stamps on each answer where the stage says so (its `now` is each
/// answer's arrival).
pub async fn run_llm_stage(
    stage: &StageModel,
    contract: &OutputContract,
    context: &Context,
    stamps: &Stamps,
    deps: &StageDeps<'_>,
) -> Result<StageReport, LadderError> {
    let StageKind::Llm {
        model,
        system,
        prompt,
    } = &stage.kind
    else {
        return Err(LadderError::NotLlm {
            stage: stage.name.clone(),
        });
    };
    if contract.stage() != stage.name {
        return Err(LadderError::WrongContract {
            stage: stage.name.clone(),
            contract: contract.stage().to_owned(),
        });
    }
    let prompt = render(prompt, context).map_err(|source| LadderError::Template {
        stage: stage.name.clone(),
        source,
    })?;
    let mut plan = vec![(AttemptKind::Initial, model.clone())];
    let reasks = stage.retry.repair_attempts.min(MAX_REPAIR_ATTEMPTS);
    plan.extend((0..reasks).map(|_| (AttemptKind::Reask, model.clone())));
    if let Some(m) = &stage.retry.escalate_model {
        plan.push((AttemptKind::Escalation, Some(m.clone())));
    }
    let mut run = Run {
        stage,
        deps,
        system,
        prompt,
        constrain: true,
        report: StageReport {
            stage: stage.name.clone(),
            status: StageStatus::FailedValidation,
            artifact: None,
            attempts: Vec::new(),
            totals: Totals::default(),
            issues: None,
            error: None,
        },
    };
    // The latest bad answer and its issues: all a re-ask carries.
    let mut latest: Option<(String, Issues)> = None;
    for (step, (kind, model)) in plan.into_iter().enumerate() {
        if kind == AttemptKind::Reask {
            run.report.totals.reasks += 1;
        }
        let answer = match run.ask(kind, model.as_deref(), latest.as_ref()).await {
            Ok(a) => a,
            Err((status, error)) => return Ok(run.end(status, error)),
        };
        // The grader stamped is the model that gave this answer (an
        // escalation's is another).
        let stamps = Stamps {
            now: deps.clock.now(),
            grader: Some(deps.client.model_name(model.as_deref())),
            ..stamps.clone()
        };
        let (result, repaired) = evaluate(contract, &answer.text, &stamps);
        if let Some(last) = run.report.attempts.last_mut() {
            last.repaired = repaired;
            last.issues = result.as_ref().err().cloned();
        }
        match result {
            Ok(artifact) => {
                run.report.status = if step == 0 && !repaired {
                    StageStatus::Ok
                } else {
                    StageStatus::Repaired
                };
                run.report.artifact = Some(artifact);
                return Ok(run.report);
            }
            Err(issues) => latest = Some((answer.text, issues)),
        }
    }
    let (_, issues) = latest.unzip();
    let mut report = run.end(
        StageStatus::FailedValidation,
        "no answer validated against the stage's output schema".to_owned(),
    );
    report.issues = issues;
    Ok(report)
}

/// Parse (leniently) and accept one answer: the artifact or its issues,
/// and whether the repair parse was needed.
fn evaluate(
    contract: &OutputContract,
    text: &str,
    stamps: &Stamps,
) -> (Result<Artifact, Issues>, bool) {
    match repair(text) {
        Some(r) => (contract.accept(r.value, stamps), r.repaired),
        None => {
            let why = serde_json::from_str::<Value>(text.trim())
                .err()
                .map_or_else(|| "no JSON object found".to_owned(), |e| e.to_string());
            let issue = Issue::new("", "json", format!("the answer is not JSON: {why}"));
            (Err(Issues::one(issue)), false)
        }
    }
}

/// The re-ask turn: the latest issues, as JSON, and what to do.
pub fn reask_text(issues: &Issues) -> String {
    let list = serde_json::to_string_pretty(&issues.items).unwrap_or_default();
    let more = if issues.omitted > 0 {
        format!("\n({} more issues not listed.)", issues.omitted)
    } else {
        String::new()
    };
    format!(
        "Your answer above does not validate against the required JSON Schema. \
         Its issues (instancePath, keyword, message):\n{list}{more}\n\
         Answer again with the corrected JSON object only, no prose."
    )
}

/// One stage's ladder in progress.
struct Run<'a> {
    stage: &'a StageModel,
    deps: &'a StageDeps<'a>,
    system: &'a str,
    prompt: String,
    /// Cleared when an upstream refused a constrained request as invalid.
    constrain: bool,
    report: StageReport,
}

impl Run<'_> {
    fn end(mut self, status: StageStatus, error: String) -> StageReport {
        self.report.status = status;
        self.report.error = Some(error);
        self.report
    }

    fn request(
        &self,
        model: Option<&str>,
        latest: Option<&(String, Issues)>,
        max_output_tokens: u64,
    ) -> StructuredRequest {
        let constrained = self.constrain && self.deps.client.constrained(model);
        // The schema travels in the prompt also when the output is
        // constrained: the constraint sent is reduced to what the provider
        // decodes (`wire::constrain` drops ranges and lengths), and the
        // model should know the bounds its answer is judged by.
        let schema = serde_json::to_string_pretty(&self.stage.output_schema).unwrap_or_default();
        let mut system = self.system.to_owned();
        if !system.is_empty() {
            system.push_str("\n\n");
        }
        system.push_str(
            "Answer with a single JSON object and nothing else (no prose, no code fence). \
             It must validate against this JSON Schema:\n",
        );
        system.push_str(&schema);
        let mut messages = vec![Message {
            role: Role::User,
            content: self.prompt.clone(),
        }];
        if let Some((bad, issues)) = latest {
            let mut echo: String = bad.chars().take(MAX_ECHO_CHARS).collect();
            if echo.trim().is_empty() {
                // Providers refuse an empty assistant turn.
                echo = "(an empty answer)".to_owned();
            }
            messages.push(Message {
                role: Role::Assistant,
                content: echo,
            });
            messages.push(Message {
                role: Role::User,
                content: reask_text(issues),
            });
        }
        StructuredRequest {
            model: model.map(str::to_owned),
            system,
            messages,
            schema: self.stage.output_schema.clone(),
            schema_name: schema_name(&self.stage.name),
            constrained,
            max_output_tokens,
        }
    }

    /// One step of the ladder: calls until an answer, retrying transport
    /// failures; every call is recorded. `Err`: the stage's end.
    async fn ask(
        &mut self,
        kind: AttemptKind,
        model: Option<&str>,
        latest: Option<&(String, Issues)>,
    ) -> Result<ModelAnswer, (StageStatus, String)> {
        let mut failures = 0u32;
        loop {
            let budget = self.stage.budget.as_ref();
            let used = self.report.totals.input_tokens + self.report.totals.output_tokens;
            let mut max_out = budget
                .and_then(|b| b.max_output_tokens_per_call)
                .unwrap_or(DEFAULT_MAX_OUTPUT_TOKENS);
            if let Some(max) = budget.and_then(|b| b.max_tokens) {
                if used >= max {
                    return Err((
                        StageStatus::BudgetExhausted,
                        format!("the stage's budget of {max} tokens is spent ({used} used)"),
                    ));
                }
                max_out = max_out.min(max - used);
            }
            let req = self.request(model, latest, max_out);
            let started = Instant::now();
            let result = self.deps.client.call(&req).await;
            let duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
            let mut attempt = Attempt {
                kind,
                model: model.map(str::to_owned),
                constrained: req.constrained,
                input_tokens: 0,
                output_tokens: 0,
                raw: None,
                stop_reason: None,
                issues: None,
                repaired: false,
                transport_retry: false,
                error: None,
                duration_ms,
            };
            let t = &mut self.report.totals;
            t.calls += 1;
            t.duration_ms += duration_ms;
            let err = match result {
                Ok(a) => {
                    t.answered += 1;
                    t.input_tokens += a.input_tokens;
                    t.output_tokens += a.output_tokens;
                    attempt.input_tokens = a.input_tokens;
                    attempt.output_tokens = a.output_tokens;
                    attempt.raw = Some(a.text.clone());
                    attempt.stop_reason.clone_from(&a.stop_reason);
                    self.report.attempts.push(attempt);
                    return Ok(a);
                }
                Err(e) => e,
            };
            attempt.error = Some(err.to_string());
            match err {
                CallError::Transport { retry_after, .. } => {
                    attempt.transport_retry = true;
                    t.transport_retries += 1;
                    self.report.attempts.push(attempt);
                    failures += 1;
                    if failures >= self.deps.backoff.max_tries.max(1) {
                        return Err((
                            StageStatus::FailedInfra,
                            format!("the model stayed unreachable after {failures} tries: {err}"),
                        ));
                    }
                    let d = self.deps.backoff.delay(failures - 1, retry_after);
                    self.deps.sleeper.sleep(d).await;
                }
                CallError::Budget(_) => {
                    self.report.attempts.push(attempt);
                    return Err((StageStatus::BudgetExhausted, err.to_string()));
                }
                CallError::Policy(_) => {
                    self.report.attempts.push(attempt);
                    return Err((StageStatus::BlockedPolicy, err.to_string()));
                }
                CallError::Invalid(_) if req.constrained => {
                    // Once per stage: the same step, unconstrained.
                    self.report.attempts.push(attempt);
                    self.constrain = false;
                }
                CallError::Invalid(_) => {
                    self.report.attempts.push(attempt);
                    return Err((StageStatus::FailedInfra, err.to_string()));
                }
            }
        }
    }
}

/// A stage name as a schema name: `[A-Za-z0-9_-]`, 1 to 64 characters.
fn schema_name(stage: &str) -> String {
    let s: String = stage
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if s.is_empty() { "output".to_owned() } else { s }
}

#[cfg(test)]
pub(crate) mod tests;
