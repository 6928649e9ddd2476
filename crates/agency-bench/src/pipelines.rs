//! Item 14: what the pipeline engine costs. A pipeline of
//! llm stages runs in the daemon against the scripted model server (every
//! stage one valid answer at the first try); its process CPU per stage is
//! compared with the process CPU of one bare model call through the same
//! gateway, made with the engine's own client and a request of the same
//! shape (system prompt with the schema, one user turn, the constraint).
//! The difference is the engine's own work per stage: taking the stage and
//! its context from the store, starting and ending the stage's agent,
//! rendering, validating, storing the artifact as a KB file, completing the
//! outcome and logging the events. The model server runs in this process
//! in both, so its CPU cancels out.
//!
//! Then the validation of one artifact of the seed's largest schema
//! (Gatekeeper's), against parsing the same artifact's JSON.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use agency_core::Principal;
use agency_core::status::PipelineRunStatus;
use agency_pipeline::{
    GatewayModel, Message, ModelClient, OutputContract, Role, StructuredRequest, Upstream, WireApi,
};
use agency_service::pipelines::PipelineStart;
use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::Cfg;
use crate::report::{Row, Section, ratio};
use crate::util::{fmt_dur, new_home, self_cpu};

const ANSWER: &str = r#"{"keywords":["bench","pipeline"]}"#;
/// The request every benchmark run is given.
const REQUEST: &str = "make the build faster";

/// A pipeline of `n` identical llm stages, each reading the input.
fn source(n: usize) -> String {
    let mut s = String::from("---\npipeline: bench\ndescription: identical stages\nstages:\n");
    let mut body = String::new();
    for i in 1..=n {
        s.push_str(&format!(
            "  - name: S{i}\n    kind: llm\n    system: You are stage {i} of a benchmark; list the request's keywords.\n    reads: [input]\n    output:\n      type: object\n      additionalProperties: false\n      required: [keywords]\n      properties:\n        keywords: {{type: array, items: {{type: string}}, minItems: 1}}\n"
        ));
        body.push_str(&format!("\n## S{i}\n\nRequest: {{{{input}}}}\n"));
    }
    s.push_str("---\n");
    s.push_str(&body);
    s
}

pub async fn run(cfg: Cfg) -> Result<Vec<Section>> {
    // AgencyCore's size: eleven stages a run.
    let stages = 11;
    let rounds = cfg.pick(20, 4);
    let script = agency_testkit::Script::from_json(
        &json!({"scenarios": [], "fallback": {"text": ANSWER}}).to_string(),
    )
    .context("failed to parse the benchmark's model script")?;
    let model = agency_testkit::ModelServer::start(script)
        .await
        .context("failed to start the scripted model server")?;
    let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
    let home = new_home(
        &dir.path().join("home"),
        &format!(
            "[models.up]\napi = \"anthropic\"\nbase_url = {:?}\nmodel = \"bench\"\n",
            model.base_url()
        ),
    )?;
    let daemon = agency_daemon::Daemon::start(&home)
        .await
        .context("failed to start the daemon")?;
    let sys = daemon.service().clone();
    let pipeline = agency_org::pipeline::compile_pipeline_str("bench.pipeline", &source(stages))
        .map_err(|e| anyhow::anyhow!("failed to compile the benchmark's pipeline: {e}"))?;
    // The baseline's client: the engine's own, as an agent of the root.
    let s2 = sys.clone();
    let token = tokio::task::spawn_blocking(move || {
        let root = s2
            .root_handler()?
            .context("failed to find the root handler")?;
        anyhow::Ok(s2.token_mint(Principal::User, root, None)?.token)
    })
    .await
    .context("failed to join the setup task")??;
    let upstreams = BTreeMap::from([(
        "up".to_owned(),
        Upstream {
            api: WireApi::Anthropic,
            model: "bench".to_owned(),
            constrained: true,
        },
    )]);
    let client = GatewayModel::new(
        &format!("http://{}", daemon.addr()),
        token,
        "up",
        upstreams,
        Duration::from_secs(60),
    )?;
    let stage = &pipeline.stages[0];
    let request = StructuredRequest {
        model: None,
        system: format!(
            "You are stage 1 of a benchmark; list the request's keywords.\n\nAnswer with one JSON object only, matching this JSON Schema:\n{}",
            stage.output_schema
        ),
        messages: vec![Message {
            role: Role::User,
            content: "Request: make the build faster".to_owned(),
        }],
        schema: stage.output_schema.clone(),
        schema_name: "S1".to_owned(),
        constrained: true,
        max_output_tokens: 8192,
    };
    // Warm both paths.
    for _ in 0..20 {
        client
            .call(&request)
            .await
            .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    }
    // Warm-up runs: besides warming the engine's paths, they fill the
    // blob store's 256 fan-out directories (each made at its first blob,
    // about 0.3 ms of CPU apiece here), as a daemon that has run a while
    // has them; otherwise a fresh store's directories would be counted in
    // the stages.
    let warm = cfg.pick(40, 4);
    for _ in 0..warm {
        run_once(&sys, &pipeline, REQUEST, Duration::from_secs(120)).await?;
    }
    let (mut bare_cpu, mut bare_wall, mut stage_cpu, mut stage_wall) = (
        Duration::ZERO,
        Duration::ZERO,
        Duration::ZERO,
        Duration::ZERO,
    );
    for _ in 0..rounds {
        let (c0, t0) = (self_cpu()?, Instant::now());
        for _ in 0..stages {
            client
                .call(&request)
                .await
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        }
        bare_cpu += self_cpu()? - c0;
        bare_wall += t0.elapsed();
        let (c0, t0) = (self_cpu()?, Instant::now());
        run_once(&sys, &pipeline, REQUEST, Duration::from_secs(300)).await?;
        stage_cpu += self_cpu()? - c0;
        stage_wall += t0.elapsed();
    }
    daemon.stop().await.context("failed to stop the daemon")?;
    model.shutdown().await;
    let n = u32::try_from(stages * rounds).unwrap_or(u32::MAX);
    let (bare, per_stage) = (bare_cpu / n, stage_cpu / n);
    let mut s = Section::new("14. Pipelines: the engine's CPU per stage vs a bare model call");
    s.rows.push(Row::times(
        "process CPU per llm stage",
        per_stage,
        ("per bare call through the gateway", bare),
    ));
    s.rows.push(Row::times(
        "wall time per llm stage",
        stage_wall / n,
        ("per bare call", bare_wall / n),
    ));
    let over = per_stage.saturating_sub(bare);
    s.shows = format!(
        "the engine's own work per stage (the stage and its context from the store, the stage's agent started and ended, the prompt rendered, the answer validated, the artifact stored as a KB file, the outcome completed, the events logged) costs {} of CPU above one bare model call through the gateway ({} vs {}); goal: under 1 ms above it — {}.",
        fmt_dur(over),
        fmt_dur(per_stage),
        fmt_dur(bare),
        if over < Duration::from_millis(1) {
            "met"
        } else {
            "missed"
        }
    );
    s.notes.push(format!(
        "{rounds} rounds of {stages} bare calls then one run of a {stages}-stage pipeline (AgencyCore's size; the run's start counted in its stages), interleaved, after {warm} warm-up runs (which also make the blob store's fan-out directories, once per home); process CPU from /proc/self/stat (clock ticks), the daemon and the scripted model server in this process; the bare call uses the engine's own gateway client with a request of a stage's shape."
    ));
    let mut sections = vec![s];
    sections.push(validation(cfg)?);
    Ok(sections)
}

/// Start one run of `pipeline` with `input` and wait until it is done (its
/// id is returned): woken by the completion of the
/// run's outcome (polling the run's view would add its own reads to the
/// stages' CPU), and, should that be missed, by a slow poll.
pub(crate) async fn run_once(
    sys: &std::sync::Arc<agency_service::System>,
    pipeline: &agency_org::pipeline::PipelineModel,
    input: &str,
    within: Duration,
) -> Result<agency_core::HandlerId> {
    // Subscribed before the start, so the run's end cannot be missed.
    let mut events = sys.subscribe();
    let (s, m, input) = (sys.clone(), pipeline.clone(), input.to_owned());
    let run = tokio::task::spawn_blocking(move || {
        s.pipeline_start(
            Principal::User,
            PipelineStart {
                model: m,
                input: json!(input),
                level: 0,
                live_tools: false,
            },
        )
    })
    .await
    .context("failed to join the start task")??
    .run
    .id;
    let deadline = Instant::now() + within;
    loop {
        let s = sys.clone();
        let v = tokio::task::spawn_blocking(move || s.pipeline_show(Principal::User, run))
            .await
            .context("failed to join the show task")??;
        match v.run.status {
            PipelineRunStatus::Done => return Ok(run),
            PipelineRunStatus::Running => {}
            other => bail!(
                "the benchmark's run ended {}: {:?}",
                other.as_str(),
                v.stages_detail
            ),
        }
        if Instant::now() > deadline {
            bail!("the benchmark's run did not finish within {within:?}");
        }
        let _ = tokio::time::timeout(Duration::from_millis(500), async {
            loop {
                match events.recv().await {
                    Ok(agency_service::Event::OutcomeStatusChanged { outcome, .. })
                        if outcome == run.root() =>
                    {
                        return;
                    }
                    Ok(_) => {}
                    Err(_) => return,
                }
            }
        })
        .await;
    }
}

/// Validation of Gatekeeper's artifact (the seed's largest schema) vs
/// parsing its JSON.
fn validation(cfg: Cfg) -> Result<Section> {
    let n = cfg.pick(20_000, 2_000);
    let seed = agency_org::pipeline::agencycore()
        .map_err(|e| anyhow::anyhow!("failed to compile AgencyCore: {e}"))?;
    let gatekeeper = seed
        .stages
        .iter()
        .max_by_key(|s| s.output_schema.to_string().len())
        .context("AgencyCore has no stages")?;
    let contract = OutputContract::compile(gatekeeper)
        .map_err(|e| anyhow::anyhow!("failed to compile {}'s schema: {e}", gatekeeper.name))?;
    let artifact = json!({
        "agent": "Gatekeeper",
        "scorecard": {"correctness": 5, "verification": 4, "safety": 5, "clarity": 4, "autonomy": 3},
        "totalScore": 21,
        "decision": {"approved": true, "promoteToPortfolio": true, "reason": "clean and tested"},
        "rationales": {
            "correctness": {"rationale": "The route matches the request.", "evidence": ["Implementor.actions[0]"]},
            "verification": {"rationale": "A qa task tests it.", "evidence": ["facts.plan.verifying"]},
            "safety": {"rationale": "Nothing was blocked.", "evidence": ["facts.safety.safe"]},
            "clarity": {"rationale": "Explained.", "evidence": ["Implementor.explanation"]},
            "autonomy": {"rationale": "No approval was needed.", "evidence": ["facts.safety.approvals"]}
        },
        "feedback": "Good.", "improvements": ["run the tests live"], "approvedLessons": ["test routes"],
        "rejectedLessons": [], "facts": agency_org::pipeline::empty_facts(), "capped": [],
        "rubric": "Gatekeeper@0123456789abcdef", "grader": "default/test-model",
        "timestamp": "2026-12-03T10:00:00Z"
    });
    contract
        .validate(&artifact)
        .map_err(|e| anyhow::anyhow!("the benchmark's artifact does not validate: {e:?}"))?;
    let text = artifact.to_string();
    let t = Instant::now();
    for _ in 0..n {
        std::hint::black_box(serde_json::from_str::<serde_json::Value>(
            std::hint::black_box(&text),
        )?);
    }
    let parse = t.elapsed() / u32::try_from(n).unwrap_or(1);
    let t = Instant::now();
    for _ in 0..n {
        let _ = std::hint::black_box(contract.validate(std::hint::black_box(&artifact)));
    }
    let validate = t.elapsed() / u32::try_from(n).unwrap_or(1);
    let mut s = Section::new("14b. Pipelines: validating one artifact");
    s.rows.push(Row::times(
        format!("validate {}'s artifact ({} B)", gatekeeper.name, text.len()),
        validate,
        ("parse the same JSON", parse),
    ));
    s.shows = format!(
        "checking an artifact against the seed's largest schema ({}: {} B of schema) takes {} ({} parsing it): negligible beside a model call.",
        gatekeeper.name,
        gatekeeper.output_schema.to_string().len(),
        fmt_dur(validate),
        ratio(validate.as_secs_f64(), parse.as_secs_f64())
    );
    s.notes.push(format!("{n} validations and {n} parses, compiled schema reused (as the engine does within a stage)."));
    Ok(s)
}
