//! The daemon's pipeline runner: drives every unfinished run, one stage
//! at a time, on the daemon's own tokio runtime. It asks the service for
//! the next stage and its (validated) context, runs the stage, and hands
//! back how it ended; the service decides what is stored. Nothing of a run
//! lives only here: stop the daemon mid-stage and the next start hands the
//! same stage out again (`System::pipeline_next`), finished stages never.
//!
//! An llm stage's calls go through the daemon's model gateway as an agent
//! of the run's handler, started for the stage and ended with it, so each
//! call is reserved, metered, budgeted and logged like any agent's.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agency_core::HandlerId;
use agency_core::policy::Verdict;
use agency_core::policy::plan::{PlanSeverity, scan_plan_text};
use agency_core::status::StageStatus as StoredStatus;
use agency_org::pipeline::{StageKind, StageModel};
use agency_service::pipelines::{NextStage, StageEnd};
use agency_service::{Event, ServiceError, System};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::{JoinHandle, JoinSet};

mod judge_gate;
mod replay;

use crate::code;
use crate::gateway::{GatewayModel, Upstream};
use crate::ladder::{Backoff, StageDeps, StageReport, SystemClock, TokioSleeper};
use crate::template::Context;
use crate::validate::OutputContract;

/// How the runner reaches models.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// The daemon's agents listener, `http://127.0.0.1:PORT`.
    pub base_url: String,
    /// The `[models.NAME]` a stage without `model` uses.
    pub default_upstream: String,
    pub upstreams: BTreeMap<String, Upstream>,
    /// One model call's deadline.
    pub timeout: Duration,
    pub backoff: Backoff,
    /// What ToolRunner's live mode runs commands with; `None`: a run
    /// started with live tools fails at that stage.
    pub live_tools: Option<crate::tool_runner::LiveTools>,
    /// On a store several daemons share: drive a run only while holding
    /// its lease (`None`: the store is this daemon's alone).
    pub lease: Option<RunnerLease>,
}

/// How the runner takes part when daemons share a store.
#[derive(Debug, Clone)]
pub struct RunnerLease {
    /// This daemon's lease owner and lease time.
    pub spec: agency_service::LeaseSpec,
    /// How often it looks for runs no daemon drives (a dead daemon's,
    /// once their lease lapsed).
    pub sweep: Duration,
    /// Whether the runner renews this daemon's leases on each sweep: when
    /// no supervisor does (no agent runtime).
    pub renew: bool,
}

/// The running runner; [`RunnerHandle::stop`] ends it with every stage in
/// flight (each is handed out again at the next start).
#[derive(Debug)]
pub struct RunnerHandle {
    main: JoinHandle<()>,
    runner: Arc<Runner>,
}

impl RunnerHandle {
    pub fn stop(&self) {
        self.main.abort();
        self.runner
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .abort_all();
    }
}

/// Start the runner: every run left `running` is carried on, and each run
/// the service says is ready is driven as it comes.
pub fn spawn(sys: Arc<System>, cfg: RunnerConfig) -> RunnerHandle {
    // One HTTP client for every stage: its pooled connections to the
    // gateway are reused (a client per stage cost a client and a connection
    // each). A client that cannot be built is tried again per stage, whose
    // failure then says why.
    let http = crate::gateway::http_client(cfg.timeout).ok();
    let runner = Arc::new(Runner {
        sys,
        cfg,
        http,
        active: Mutex::new(HashMap::new()),
        replaying: Mutex::new(std::collections::HashSet::new()),
        tasks: Mutex::new(JoinSet::new()),
    });
    let handle = runner.clone();
    let main = tokio::spawn(async move {
        // Subscribed before the scan, so no run started in between is missed.
        let mut events = runner.sys.subscribe();
        runner.clone().scan().await;
        // Without a shared store nothing is swept: the tick never fires.
        let period = runner
            .cfg
            .lease
            .as_ref()
            .map_or(Duration::from_secs(86_400 * 365), |l| l.sweep);
        let mut sweep = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                e = events.recv() => match e {
                    Ok(Event::PipelineRunReady { run }) => runner.clone().drive(run),
                    Ok(Event::LessonReplayReady { lesson }) => runner.clone().replay(lesson),
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => runner.clone().scan().await,
                    Err(RecvError::Closed) => return,
                },
                _ = sweep.tick(), if runner.cfg.lease.is_some() => runner.clone().sweep().await,
            }
        }
    });
    RunnerHandle {
        main,
        runner: handle,
    }
}

/// How a request for the user's approval ended.
#[derive(Debug)]
enum Asked {
    /// Approved now (the approval it used) or allowed without one.
    Approved(Option<agency_core::policy::ApprovalId>),
    /// Pending: the run waits for the decision.
    Waiting,
    Refused(String),
    Failed(String),
}

/// How a runner learns it lost a run's lease.
const STAGE_END_REFUSED: &str =
    "the end of a pipeline stage was refused: another daemon drives the run";

#[derive(Debug)]
struct Runner {
    sys: Arc<System>,
    cfg: RunnerConfig,
    /// The gateway client every stage's calls share (each with its own
    /// stage's token), if it could be built.
    http: Option<reqwest::Client>,
    /// Runs being driven now, one driver each, and whether it was woken
    /// again while at work.
    active: Mutex<HashMap<HandlerId, bool>>,
    /// Lessons whose replay runs now.
    replaying: Mutex<std::collections::HashSet<agency_core::LessonId>>,
    /// The drivers, aborted together at stop.
    tasks: Mutex<JoinSet<()>>,
}

impl Runner {
    async fn scan(self: Arc<Self>) {
        let sys = self.sys.clone();
        match tokio::task::spawn_blocking(move || sys.pipeline_unfinished()).await {
            Ok(Ok(runs)) => {
                for run in runs {
                    self.clone().drive(run);
                }
            }
            Ok(Err(e)) => tracing::error!("failed to list unfinished pipeline runs: {e}"),
            Err(e) => tracing::error!("failed to list unfinished pipeline runs: {e}"),
        }
        // Replays the daemon stopped in are run again from the start.
        let sys = self.sys.clone();
        match tokio::task::spawn_blocking(move || sys.lesson_replays_pending()).await {
            Ok(Ok(lessons)) => {
                for lesson in lessons {
                    self.clone().replay(lesson);
                }
            }
            Ok(Err(e)) => tracing::error!("failed to list lessons waiting for a replay: {e}"),
            Err(e) => tracing::error!("failed to list lessons waiting for a replay: {e}"),
        }
    }

    /// Shared store: renew when no supervisor does, then drive the
    /// unfinished runs no other daemon holds.
    async fn sweep(self: Arc<Self>) {
        let Some(lease) = self.cfg.lease.clone() else {
            return;
        };
        let sys = self.sys.clone();
        let found = blocking(move || {
            if lease.renew {
                sys.lease_renew(&lease.spec)?;
            }
            Ok::<_, ServiceError>((
                sys.pipeline_claimable(&lease.spec.owner)?,
                sys.lesson_replays_claimable(&lease.spec.owner)?,
            ))
        })
        .await;
        match found {
            Ok((runs, replays)) => {
                for run in runs {
                    self.clone().drive(run);
                }
                for lesson in replays {
                    self.clone().replay(lesson);
                }
            }
            Err(e) => tracing::warn!("failed to look for pipeline runs to drive: {e}"),
        }
    }

    /// Give a run's lease back: it waits for the user or is over, so any
    /// daemon may take it when it moves again.
    async fn release(&self, held: Option<agency_service::HeldLease>) {
        let (Some(held), Some(lease)) = (held, &self.cfg.lease) else {
            return;
        };
        let (sys, owner) = (self.sys.clone(), lease.spec.owner.clone());
        if let Err(e) = blocking(move || sys.lease_release(&owner, held)).await {
            tracing::warn!(run = %held.handler, "failed to give back the lease of pipeline run {}: {e}", held.handler);
        }
    }

    /// Log that this daemon found `held` taken over (`why`: how it learnt).
    async fn lost(&self, held: Option<agency_service::HeldLease>, why: &'static str) {
        if let (Some(held), Some(lease)) = (held, &self.cfg.lease) {
            let (sys, owner) = (self.sys.clone(), lease.spec.owner.clone());
            if let Err(e) = blocking(move || sys.lease_lost(&owner, held, why)).await {
                tracing::warn!(handler = %held.handler, "failed to log the loss of the lease of {}: {e}", held.handler);
            }
        }
    }

    fn drive(self: Arc<Self>, run: HandlerId) {
        {
            let mut active = self.active.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(again) = active.get_mut(&run) {
                // Its driver is at work: it looks once more before it
                // stops, so a wake-up that came meanwhile is not lost.
                *again = true;
                return;
            }
            active.insert(run, false);
        }
        let mut tasks = self.tasks.lock().unwrap_or_else(|p| p.into_inner());
        // Reap the drivers that ended, so the set stays small.
        while tasks.try_join_next().is_some() {}
        let this = self.clone();
        tasks.spawn(async move {
            loop {
                if let Err(e) = this.run_stages(run).await {
                    tracing::error!(%run, "failed to drive pipeline run {run}: {e}");
                }
                let mut active = this.active.lock().unwrap_or_else(|p| p.into_inner());
                match active.get_mut(&run) {
                    Some(again) if *again => *again = false,
                    _ => {
                        active.remove(&run);
                        return;
                    }
                }
            }
        });
    }

    async fn run_stages(&self, run: HandlerId) -> Result<(), ServiceError> {
        loop {
            let sys = self.sys.clone();
            let spec = self.cfg.lease.as_ref().map(|l| l.spec.clone());
            // `None` too when another daemon holds the run: it drives it.
            let next = blocking(move || sys.pipeline_next_as(run, spec.as_ref())).await?;
            let Some(next) = next else { return Ok(()) };
            let (idx, held) = (next.idx, next.lease);
            // `None`: the run waits for the user (an approval).
            let Some(end) = self.run_stage(&next).await else {
                self.release(held).await;
                return Ok(());
            };
            let sys = self.sys.clone();
            let token = held.map(|l| l.token);
            let status =
                match blocking(move || sys.pipeline_stage_end_as(run, idx, end, token)).await {
                    Ok(status) => status,
                    Err(e @ ServiceError::LeaseLost { .. }) => {
                        // Another daemon took the run over while this one
                        // was at the stage: its end is not recorded here.
                        tracing::warn!(%run, "{e}");
                        self.lost(held, STAGE_END_REFUSED).await;
                        return Ok(());
                    }
                    Err(e) => return Err(e),
                };
            if !matches!(status, agency_core::status::PipelineRunStatus::Running) {
                self.release(held).await;
                return Ok(());
            }
        }
    }

    async fn run_stage(&self, next: &NextStage) -> Option<StageEnd> {
        let stage = &next.model.stages[next.idx];
        Some(match &stage.kind {
            StageKind::Llm { .. } => match self.judge_gate(next, stage).await {
                judge_gate::Gate::Go => self.run_llm(next, stage).await,
                judge_gate::Gate::Wait => {
                    // The stage runs again once the user decided.
                    if let Some(Ok(m)) = &next.agent {
                        self.end_agent(m.agent).await;
                    }
                    return None;
                }
                judge_gate::Gate::End(end) => {
                    let mut end = *end;
                    // The stage's agent ends with the stage.
                    if let Some(Ok(m)) = &next.agent {
                        end.agent = Some(m.agent);
                    }
                    end
                }
            },
            // Runs commands: on the runner, off the code steps' sync path.
            StageKind::Code { step } if step == "tool_runner" && next.live_tools => {
                return self.run_live_tools(next, stage).await;
            }
            StageKind::Code { step } => match code::run(step, stage, next) {
                code::CodeEnd::Ended(end) => end,
                code::CodeEnd::NeedsApproval { output, reason } => {
                    return self.approve_plan(next, stage, output, &reason).await;
                }
            },
            StageKind::Agent { agent, verb } => {
                return crate::agent_stage::run(&self.sys, next, stage, agent, verb).await;
            }
        })
    }

    /// SafetyGuard's plan needs the user's approval: ask (one request per
    /// plan, bound to its hash) as an agent of the run. Approved: the stage
    /// ends `ok` with its output; denied: `blocked_policy`; pending: `None`,
    /// the run waits and the decision sets it running again.
    async fn approve_plan(
        &self,
        next: &NextStage,
        stage: &StageModel,
        output: Value,
        reason: &str,
    ) -> Option<StageEnd> {
        // The approval is bound to what was judged, not to when: the
        // stamped time differs each time the stage runs again.
        let mut plan = output.clone();
        if let Some(m) = plan.as_object_mut() {
            for f in &stage.stamped {
                if let agency_org::pipeline::StampedField::Timestamp { field } = f {
                    m.remove(field);
                }
            }
        }
        match self
            .ask_user(
                next,
                agency_service::pipelines::PLAN_APPROVAL_TOOL,
                plan,
                reason,
            )
            .await
        {
            Asked::Approved(approval) => Some(succeeded(
                output,
                json!({ "step": "safety_guard", "approval": approval }),
            )),
            Asked::Waiting => None,
            Asked::Refused(why) => {
                let mut end = failed(
                    StoredStatus::BlockedPolicy,
                    format!("stage {}: the plan was refused: {why}", stage.name),
                );
                end.report = json!({ "output": output });
                Some(end)
            }
            Asked::Failed(e) => Some(failed(StoredStatus::FailedInfra, e)),
        }
    }

    /// Ask the user to approve `what` for the run's current stage, as an
    /// agent of the run: one request, bound to the hash of `what`; while it
    /// is pending the run waits and the decision sets it running again.
    async fn ask_user(&self, next: &NextStage, tool: &str, what: Value, reason: &str) -> Asked {
        let (sys, run) = (self.sys.clone(), next.run);
        // An llm stage asks as its own agent (live for the stage); a code
        // stage as one started for the question.
        let own = match &next.agent {
            Some(Ok(m)) => Some(m.agent),
            _ => None,
        };
        let agent = match own {
            Some(a) => a,
            None => match blocking(move || sys.agent_start_with_token(run, None)).await {
                Ok(m) => m.agent,
                Err(e) => return Asked::Failed(format!("failed to start the stage's agent: {e}")),
            },
        };
        let principal = agency_core::Principal::agent(run, agent);
        let (sys, idx, why, tool) = (
            self.sys.clone(),
            next.idx,
            reason.to_owned(),
            tool.to_owned(),
        );
        let admitted =
            blocking(move || sys.pipeline_admit(principal, run, idx, &tool, &what, &why)).await;
        if own.is_none() {
            self.end_agent(agent).await;
        }
        match admitted {
            Ok(agency_service::Admission::Allow { approval }) => Asked::Approved(approval),
            Ok(agency_service::Admission::Pending { approval, .. }) => {
                tracing::info!(%run, "pipeline run {run} waits for approval {approval}");
                Asked::Waiting
            }
            Ok(agency_service::Admission::Denied { reason }) => Asked::Refused(reason),
            Err(e) => Asked::Failed(format!("failed to ask for the user's approval: {e}")),
        }
    }

    /// What refuses an answer's proposed actions (AgencyCore Implementor's
    /// `blocked`): the plan rules and the workspace, then `policy.toml`
    /// (and its defaults) as the tool call each action would be — a
    /// command as `bash`, a file written as `claude:Write`, one read as
    /// `claude:Read` — in the run's workspace. Refused is `deny`; an action
    /// that would need an approval is not refused here (ToolRunner asks).
    fn action_gate(&self, next: &NextStage) -> crate::validate::ActionGate {
        let sys = self.sys.clone();
        let workspace = self
            .cfg
            .live_tools
            .as_ref()
            .map(|t| crate::tool_runner::workspace_of(&t.root, next.run));
        crate::validate::ActionGate(Arc::new(move |a: &Value| {
            if let Some(why) = crate::validate::rules_gate(a) {
                return Some(why);
            }
            let (tool, args) = match a.get("type").and_then(Value::as_str)? {
                "runCommand" => ("bash", json!({ "command": a.get("command")? })),
                "createFile" | "editFile" => {
                    ("claude:Write", json!({ "file_path": a.get("path")? }))
                }
                "readFile" => ("claude:Read", json!({ "file_path": a.get("path")? })),
                _ => return None,
            };
            let d = sys.classify_tool_call(tool, &args, workspace.as_deref());
            (d.verdict == Verdict::Deny).then_some(d.reason)
        }))
    }

    /// Live ToolRunner: before any command runs, each is classified as a
    /// `bash` call in the run's workspace by `policy.toml` (and its
    /// defaults) and by the plan rules. Refused ones are skipped; those
    /// that need an approval are asked for together, once (SafetyGuard
    /// approved the Planner's plan, not the commands the Implementor
    /// wrote); nothing runs until the user decided.
    async fn run_live_tools(&self, next: &NextStage, stage: &StageModel) -> Option<StageEnd> {
        let (allowed, _) = crate::tool_runner::proposed(&next.context);
        let workspace = self
            .cfg
            .live_tools
            .as_ref()
            .map(|t| crate::tool_runner::workspace_of(&t.root, next.run));
        let mut refused = Vec::new();
        let mut asked = Vec::new();
        for command in allowed {
            let d = self.sys.classify_tool_call(
                "bash",
                &json!({ "command": command }),
                workspace.as_deref(),
            );
            let rules = scan_plan_text(&command)
                .into_iter()
                .find(|f| f.severity == PlanSeverity::NeedsApproval);
            match (d.verdict, rules) {
                (Verdict::Deny, _) => refused.push((command, d.reason)),
                (Verdict::Ask, _) => asked.push(json!({ "command": command, "why": d.reason })),
                (Verdict::Allow, Some(f)) => {
                    asked.push(json!({ "command": command, "why": f.reason }));
                }
                (Verdict::Allow, None) => {}
            }
        }
        let mut approval = None;
        if !asked.is_empty() {
            let reason = format!(
                "ToolRunner: {} command(s) the Implementor proposed need your approval before they run in the run's workspace",
                asked.len()
            );
            match self
                .ask_user(
                    next,
                    agency_service::pipelines::PLAN_APPROVAL_TOOL,
                    json!({ "commands": asked }),
                    &reason,
                )
                .await
            {
                Asked::Approved(a) => approval = Some(a),
                Asked::Waiting => return None,
                Asked::Refused(why) => {
                    return Some(failed(
                        StoredStatus::BlockedPolicy,
                        format!("stage {}: the commands were refused: {why}", stage.name),
                    ));
                }
                Asked::Failed(e) => return Some(failed(StoredStatus::FailedInfra, e)),
            }
        }
        let mut end =
            crate::tool_runner::live_stage(self.cfg.live_tools.as_ref(), stage, next, &refused)
                .await;
        if let (Some(Some(a)), Value::Object(m)) = (approval, &mut end.report) {
            m.insert("approval".to_owned(), json!(a));
        }
        Some(end)
    }

    async fn run_llm(&self, next: &NextStage, stage: &StageModel) -> StageEnd {
        // The stage's agent was started with the stage (one transaction);
        // it is ended with the stage's end, whatever happens here.
        let minted = match &next.agent {
            Some(Ok(m)) => m,
            Some(Err(e)) => {
                // A reached budget or limit refuses the agent itself.
                let status = if e.kind() == "quota" {
                    StoredStatus::BudgetExhausted
                } else {
                    StoredStatus::FailedInfra
                };
                return failed(status, format!("failed to start the stage's agent: {e}"));
            }
            None => {
                return failed(
                    StoredStatus::FailedInfra,
                    format!("stage {} was handed out without its agent", stage.name),
                );
            }
        };
        let mut end = self.call_model(next, stage, minted).await;
        end.agent = Some(minted.agent);
        end
    }

    async fn call_model(
        &self,
        next: &NextStage,
        stage: &StageModel,
        minted: &agency_service::MintedToken,
    ) -> StageEnd {
        let contract = match OutputContract::cached(stage) {
            Ok(c) => c,
            Err(e) => return failed(StoredStatus::FailedInfra, e.to_string()),
        };
        let context = match context_of(next) {
            Ok(c) => c,
            Err(e) => return failed(StoredStatus::FailedInfra, e),
        };
        if self.cfg.upstreams.is_empty() {
            return failed(
                StoredStatus::FailedInfra,
                format!(
                    "stage {} calls a model, and no model upstream is configured: declare one as [models.NAME] in agency.toml (docs/models.md), restart the daemon and start the run again",
                    stage.name
                ),
            );
        }
        let client = match &self.http {
            Some(http) => GatewayModel::with_client(
                http.clone(),
                &self.cfg.base_url,
                minted.token.clone(),
                &self.cfg.default_upstream,
                self.cfg.upstreams.clone(),
            ),
            None => GatewayModel::new(
                &self.cfg.base_url,
                minted.token.clone(),
                &self.cfg.default_upstream,
                self.cfg.upstreams.clone(),
                self.cfg.timeout,
            ),
        };
        let client = match client {
            Ok(c) => c,
            Err(e) => return failed(StoredStatus::FailedInfra, e.to_string()),
        };
        let deps = StageDeps {
            client: &client,
            clock: &SystemClock,
            sleeper: &TokioSleeper,
            backoff: self.cfg.backoff,
        };
        let stamps = crate::validate::Stamps::new(next.level, &next.context)
            .with_gate(self.action_gate(next));
        let report = crate::ladder::run_llm_stage(stage, &contract, &context, &stamps, &deps).await;
        let calls = report.as_ref().map_or(0, |r| r.totals.calls);
        let cost = self.cost_of(minted.agent, calls).await;
        match report {
            Ok(r) => end_of(r, cost),
            Err(e) => failed(StoredStatus::FailedInfra, e.to_string()),
        }
    }

    async fn end_agent(&self, agent: agency_core::AgentId) {
        let sys = self.sys.clone();
        if let Err(e) = blocking(move || sys.agent_end(agent, "pipeline_stage_ended")).await {
            tracing::warn!(%agent, "failed to end a pipeline stage's agent: {e}");
        }
    }

    /// What the gateway charged the stage's agent for its `calls` calls, in
    /// micro-dollars. The gateway settles a call when its body is dropped,
    /// a moment after the client read it: wait (briefly) for every call's
    /// record before summing. A settlement logs an event, so the calls are
    /// read again each time events were committed (not on a timer, which
    /// made each stage wait a tick and read more often).
    async fn cost_of(&self, agent: agency_core::AgentId, calls: u32) -> i64 {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
        // Subscribed before the first read: a settlement committed after
        // it wakes the next read.
        let mut committed = self.sys.events_committed();
        loop {
            committed.borrow_and_update();
            let sys = self.sys.clone();
            let rows = blocking(move || sys.model_calls_of(agency_core::Principal::User, agent))
                .await
                .unwrap_or_default();
            if rows.len() >= calls as usize || tokio::time::Instant::now() >= deadline {
                return rows.iter().map(|c| c.cost_micro_usd).sum();
            }
            // Woken by a commit, or at the latest after a short tick (a
            // settlement whose event record was lost still ends the wait).
            let tick = Duration::from_millis(20);
            let _ = tokio::time::timeout(tick, committed.changed()).await;
        }
    }
}

/// The stage's context: the input and the artifacts it reads, each
/// passed through its own stage's contract again.
pub(crate) fn context_of(next: &NextStage) -> Result<Context, String> {
    let input = next.context.get("input").cloned().unwrap_or(Value::Null);
    let mut ctx = Context::new(input);
    for (name, value) in &next.context {
        if name == "input" {
            continue;
        }
        if name == agency_org::pipeline::HISTORY {
            ctx.set_history(value.clone());
            continue;
        }
        if name == agency_org::pipeline::FACTS {
            ctx.set_facts(value.clone());
            continue;
        }
        let Some(spec) = next.model.stages.iter().find(|s| &s.name == name) else {
            return Err(format!(
                "the context names stage {name}, which the pipeline lacks"
            ));
        };
        let contract = OutputContract::cached(spec).map_err(|e| e.to_string())?;
        let artifact = contract.revalidate(value.clone()).map_err(|i| {
            format!(
                "the artifact of stage {name} no longer validates: {}",
                json!(i.items)
            )
        })?;
        ctx.insert(name.clone(), artifact);
    }
    Ok(ctx)
}

/// A stage's end as the service records it.
fn end_of(r: StageReport, cost: i64) -> StageEnd {
    let status = r.status;
    let report = serde_json::to_value(&r).unwrap_or(Value::Null);
    StageEnd {
        status,
        artifact: r.artifact.map(|a| a.into_value()),
        attempts: i64::from(r.totals.calls),
        input_tokens: i64::try_from(r.totals.input_tokens).unwrap_or(i64::MAX),
        output_tokens: i64::try_from(r.totals.output_tokens).unwrap_or(i64::MAX),
        cost_micro_usd: cost,
        report,
        error: r.error,
        agent: None,
    }
}

/// A stage that ended before any model call.
/// A stage that ended `ok` with `artifact` (validated by the caller) and
/// made no model call of its own.
pub(crate) fn succeeded(artifact: Value, report: Value) -> StageEnd {
    StageEnd {
        status: StoredStatus::Ok,
        artifact: Some(artifact),
        attempts: 0,
        input_tokens: 0,
        output_tokens: 0,
        cost_micro_usd: 0,
        report,
        error: None,
        agent: None,
    }
}

pub(crate) fn failed(status: StoredStatus, error: String) -> StageEnd {
    StageEnd {
        status,
        artifact: None,
        attempts: 0,
        input_tokens: 0,
        output_tokens: 0,
        cost_micro_usd: 0,
        report: json!({}),
        error: Some(error),
        agent: None,
    }
}

pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ServiceError> + Send + 'static,
) -> Result<T, ServiceError> {
    tokio::task::spawn_blocking(f).await.unwrap_or_else(|e| {
        Err(ServiceError::invalid(format!(
            "failed to run a store operation: {e}"
        )))
    })
}
