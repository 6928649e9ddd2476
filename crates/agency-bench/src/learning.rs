//! Item 15: what the learning loop costs. First the replay gate: AgencyCore
//! runs in the daemon against the scripted model server, in pairs; both
//! runs of a pair propose the same lesson (a title of that pair's own), so
//! the second sends it through the replay gate (its stages Guide to
//! Gatekeeper re-run on both runs, with and without it: 16 model calls, by
//! an agent of the replay's own handler), which admits it. Each admission
//! is weighed against the pair's first run, the same AgencyCore run
//! without a replay after it (11 stages, 8 model calls): process CPU,
//! model calls, model cost and wall time. Then the Retriever's ranking of
//! lessons at 100 and 10,000 (`retriever.rs`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use agency_core::status::LessonState;
use agency_core::{HandlerId, LessonId, Principal};
use agency_org::pipeline::PipelineModel;
use agency_service::System;
use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::Cfg;
use crate::pipelines::run_once;
use crate::report::{Row, Section, ratio};
use crate::util::{fmt_dur, new_home};

/// The demo's scripted answers of AgencyCore's eight model stages.
pub(crate) const DEMO_SCRIPT: &str = include_str!("../../agency-cli/src/demo_pipeline_script.json");
/// The demo's request; each pair's adds its own marker word.
const REQUEST: &str = "Add a /health endpoint to our web API";
/// Quiet time after each measured run or replay, inside its window: what
/// the daemon still does once the run's end is seen (its agent ended, the
/// events fanned out) is counted, equally for both.
const QUIET: Duration = Duration::from_millis(100);
const PIPELINE: &str = "agencycore";

/// CPU time of this process, all threads (`CLOCK_PROCESS_CPUTIME_ID`,
/// nanosecond resolution; `/proc`'s clock ticks are 10 ms, too coarse for
/// one run).
pub(crate) fn process_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    Duration::new(
        u64::try_from(t.tv_sec).unwrap_or(0),
        u32::try_from(t.tv_nsec).unwrap_or(0),
    )
}

/// The marker word of pair `k`'s request (and its Observer's answer).
fn input_mark(k: usize) -> String {
    format!("zq{k:03}in")
}

/// The marker word of pair `k`'s lesson: only a prompt quoting the lesson
/// holds it.
fn advice_mark(k: usize) -> String {
    format!("zq{k:03}adv")
}

/// The demo's answer of `stage`.
fn demo_answer(doc: &Value, stage: &str) -> Result<Value> {
    let s = doc["scenarios"]
        .as_array()
        .and_then(|a| {
            a.iter()
                .find(|s| s["name"] == format!("AgencyCore {stage}"))
        })
        .with_context(|| format!("failed to find {stage} in the demo's model script"))?;
    let text = s["turns"][0]["text"]
        .as_str()
        .with_context(|| format!("failed to read {stage}'s answer in the demo's model script"))?;
    serde_json::from_str(text)
        .with_context(|| format!("failed to parse {stage}'s answer in the demo's model script"))
}

fn scenario(name: &str, stage: &str, when: &str, answer: &Value) -> Value {
    json!({
        "name": name,
        "match": {"system_contains": format!("You are the {stage} "), "user_contains": when},
        "turns": [{"text": answer.to_string()}]
    })
}

/// The demo's script, its Learner proposing nothing, with three scenarios
/// per pair `k` tried first: the Observer of a request with `k`'s marker
/// repeats it; a Learner that sees it proposes `k`'s lesson; a Gatekeeper
/// whose prompt quotes that lesson finds the run clearer (the replay's
/// evidence: clarity 4 → 5, nothing else changed).
fn script(pairs: usize) -> Result<agency_testkit::Script> {
    let mut doc: Value =
        serde_json::from_str(DEMO_SCRIPT).context("failed to parse the demo's model script")?;
    let observer = demo_answer(&doc, "Observer")?;
    let mut clearer = demo_answer(&doc, "Gatekeeper")?;
    clearer["scorecard"]["clarity"] = json!(5);
    let total: i64 = clearer["scorecard"]
        .as_object()
        .context("failed to read the demo Gatekeeper's scorecard")?
        .values()
        .filter_map(Value::as_i64)
        .sum();
    clearer["totalScore"] = json!(total);
    let all = doc["scenarios"]
        .as_array_mut()
        .context("failed to read the demo's scenarios")?;
    let learner = all
        .iter_mut()
        .find(|s| s["name"] == "AgencyCore Learner")
        .context("failed to find the demo's Learner")?;
    learner["turns"][0]["text"] = json!(learner_answer(json!([])).to_string());
    let mut extra = Vec::new();
    for k in 0..pairs {
        let (mark, adv) = (input_mark(k), advice_mark(k));
        let mut o = observer.clone();
        o["rawInput"] = json!(format!("{REQUEST} ({mark})"));
        o["keywords"]
            .as_array_mut()
            .context("failed to read the demo Observer's keywords")?
            .push(json!(mark));
        extra.push(scenario(&format!("Observer {k}"), "Observer", &mark, &o));
        let lesson = json!([{"title": format!("Keep {adv} notes"),
            "lesson": format!("Keep {adv} notes beside every change."), "tags": ["notes"]}]);
        extra.push(scenario(
            &format!("Learner {k}"),
            "Learner",
            &mark,
            &learner_answer(lesson),
        ));
        extra.push(scenario(
            &format!("Gatekeeper {k}"),
            "Gatekeeper",
            &adv,
            &clearer,
        ));
    }
    for (i, s) in extra.into_iter().enumerate() {
        all.insert(i, s);
    }
    agency_testkit::Script::from_json(&doc.to_string())
        .context("failed to parse the benchmark's model script")
}

fn learner_answer(lessons: Value) -> Value {
    json!({"reflection": "r", "candidateLessons": lessons, "growthAreas": [],
           "currentLevel": 0, "questionsForNextTime": []})
}

/// What one pair measured.
#[derive(Debug, Default, Clone, Copy)]
struct Pair {
    run_cpu: Duration,
    run_wall: Duration,
    /// The second run from its start to the lesson's admission.
    with_replay_cpu: Duration,
    /// From the second run's end seen to the admission.
    window_cpu: Duration,
    window_wall: Duration,
    calls: i64,
    served: usize,
    /// Reads of the lesson's state while waiting for its admission.
    reads: usize,
    /// What the replay's history entry says it cost.
    reported_cost: i64,
    /// What the gateway metered for the replay's handler.
    cost: i64,
    run_cost: i64,
}

/// Run `sys` in a blocking thread.
async fn blocking<T: Send + 'static>(
    sys: &Arc<System>,
    f: impl FnOnce(&System) -> Result<T> + Send + 'static,
) -> Result<T> {
    let s = sys.clone();
    tokio::task::spawn_blocking(move || f(&s))
        .await
        .context("failed to join a blocking task")?
}

/// The lesson of `pipeline` titled `title`.
async fn lesson_titled(sys: &Arc<System>, title: &str) -> Result<LessonId> {
    let title = title.to_owned();
    blocking(sys, move |s| {
        let all = s.lessons(Principal::User, Some(PIPELINE), &[], Some(1000))?;
        all.iter()
            .find(|l| l.title == title)
            .map(|l| l.id)
            .with_context(|| format!("failed to find the proposed lesson {title:?}"))
    })
    .await
}

/// Wait until `lesson` has left the replay: its state read again at each
/// commit to the event log (the replay's end is one; no domain event says
/// so), and, should a wake-up be missed, after a slow tick. Returns the
/// state and how many times it was read.
async fn settled(
    sys: &Arc<System>,
    committed: &mut tokio::sync::watch::Receiver<i64>,
    lesson: LessonId,
) -> Result<(LessonState, usize)> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut reads = 0;
    loop {
        committed.borrow_and_update();
        reads += 1;
        if !replaying(sys, lesson).await? {
            let d = blocking(sys, move |s| Ok(s.lesson_show(Principal::User, lesson)?)).await?;
            return Ok((d.lesson.state, reads));
        }
        if Instant::now() > deadline {
            bail!("lesson {lesson} was still replaying after 120 s");
        }
        let _ = tokio::time::timeout(Duration::from_millis(500), committed.changed()).await;
    }
}

/// Whether `lesson` is in its replay.
async fn replaying(sys: &Arc<System>, lesson: LessonId) -> Result<bool> {
    blocking(sys, move |s| {
        Ok(s.lessons(
            Principal::User,
            Some(PIPELINE),
            &[LessonState::Replaying],
            Some(1000),
        )?
        .iter()
        .any(|l| l.id == lesson))
    })
    .await
}

/// The model cost the gateway metered for handler `h` and its subtree
/// (a run's stages, a replay's calls).
async fn metered(sys: &Arc<System>, h: HandlerId) -> Result<i64> {
    let t = blocking(sys, move |s| Ok(s.cost_tree(Principal::User, Some(h))?)).await?;
    Ok(t.subtree.cost_micro_usd)
}

/// One pair: a run proposing lesson `k`, then a run proposing it again
/// and its replay, each measured.
async fn pair(
    sys: &Arc<System>,
    model: &agency_testkit::ModelServer,
    pipeline: &PipelineModel,
    k: usize,
) -> Result<Pair> {
    let input = format!("{REQUEST} ({})", input_mark(k));
    let within = Duration::from_secs(300);
    let mut p = Pair::default();
    let (c0, t0) = (process_cpu(), Instant::now());
    let first = run_once(sys, pipeline, &input, within).await?;
    p.run_wall = t0.elapsed();
    tokio::time::sleep(QUIET).await;
    p.run_cpu = process_cpu() - c0;
    p.run_cost = metered(sys, first).await?;
    let lesson = lesson_titled(sys, &format!("Keep {} notes", advice_mark(k))).await?;
    let served = model.requests().len();

    let mut committed = sys.events_committed();
    let c0 = process_cpu();
    run_once(sys, pipeline, &input, within).await?;
    let (c1, t1) = (process_cpu(), Instant::now());
    let (state, reads) = settled(sys, &mut committed, lesson).await?;
    p.reads = reads;
    p.window_wall = t1.elapsed();
    tokio::time::sleep(QUIET).await;
    let c2 = process_cpu();
    p.with_replay_cpu = c2 - c0;
    p.window_cpu = c2 - c1;
    p.served = model.requests().len().saturating_sub(served + 8);

    let d = blocking(sys, move |s| Ok(s.lesson_show(Principal::User, lesson)?)).await?;
    if state != LessonState::Admitted {
        bail!(
            "lesson {lesson} ended {} instead of admitted: {}",
            state.as_str(),
            d.lesson.reason.unwrap_or_default()
        );
    }
    let replayed = d
        .history
        .iter()
        .rfind(|e| e.action == "replayed")
        .with_context(|| format!("lesson {lesson} was admitted without a replayed entry"))?;
    p.calls = replayed.detail["calls"].as_i64().unwrap_or(0);
    p.reported_cost = replayed.detail["cost_micro_usd"].as_i64().unwrap_or(0);
    let handler = d
        .history
        .iter()
        .rfind(|e| e.action == "replay_started")
        .and_then(|e| serde_json::from_value::<HandlerId>(e.detail["handler"].clone()).ok())
        .with_context(|| format!("failed to find the replay handler of lesson {lesson}"))?;
    p.cost = metered(sys, handler).await?;
    Ok(p)
}

fn mean(xs: impl Iterator<Item = Duration>, n: usize) -> Duration {
    xs.sum::<Duration>() / u32::try_from(n.max(1)).unwrap_or(u32::MAX)
}

pub async fn run(cfg: Cfg) -> Result<Vec<Section>> {
    let pairs = cfg.pick(10, 3);
    // The first pair warms the replay's own paths and is not counted.
    let model = agency_testkit::ModelServer::start(script(pairs + 1)?)
        .await
        .context("failed to start the scripted model server")?;
    let dir = tempfile::tempdir().context("failed to create a temporary directory")?;
    let home = new_home(
        &dir.path().join("home"),
        &format!(
            "[models.default]\napi = \"anthropic\"\nbase_url = {:?}\nmodel = \"bench\"\ndefault_price = {{ input = 1.0, output = 2.0 }}\n",
            model.base_url()
        ),
    )?;
    let daemon = agency_daemon::Daemon::start(&home)
        .await
        .context("failed to start the daemon")?;
    let sys = daemon.service().clone();
    let pipeline = agency_org::pipeline::agencycore()
        .map_err(|e| anyhow::anyhow!("failed to compile AgencyCore: {e}"))?;
    // Warm-up runs (their Learner proposes nothing): they also make the
    // blob store's fan-out directories, as a daemon that has run a while
    // has them (item 14).
    let warm = cfg.pick(40, 4);
    for _ in 0..warm {
        run_once(&sys, &pipeline, REQUEST, Duration::from_secs(120)).await?;
    }
    // What the daemon spends idle, for reading the quiet time.
    let c0 = process_cpu();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let idle = process_cpu() - c0;
    let mut measured = Vec::new();
    for k in 0..=pairs {
        let p = pair(&sys, &model, &pipeline, k).await?;
        if k > 0 {
            measured.push(p);
        }
    }
    // What one of the waiting's reads costs (no lesson replays now).
    let probe = LessonId::new_random();
    let c0 = process_cpu();
    for _ in 0..100 {
        replaying(&sys, probe).await?;
    }
    let read_cpu = (process_cpu() - c0) / 100;
    daemon.stop().await.context("failed to stop the daemon")?;
    model.shutdown().await;

    let n = measured.len();
    let run_cpu = mean(measured.iter().map(|p| p.run_cpu), n);
    let with = mean(measured.iter().map(|p| p.with_replay_cpu), n);
    let replay = with.saturating_sub(run_cpu);
    let window = mean(measured.iter().map(|p| p.window_cpu), n);
    let run_wall = mean(measured.iter().map(|p| p.run_wall), n);
    let replay_wall = mean(measured.iter().map(|p| p.window_wall), n);
    let calls: i64 = measured.iter().map(|p| p.calls).sum();
    let served: usize = measured.iter().map(|p| p.served).sum();
    let reads: usize = measured.iter().map(|p| p.reads).sum();
    let cost: i64 = measured.iter().map(|p| p.cost).sum();
    let reported: i64 = measured.iter().map(|p| p.reported_cost).sum();
    let run_cost: i64 = measured.iter().map(|p| p.run_cost).sum();
    let per = |x: i64| x as f64 / n.max(1) as f64;

    let mut s = Section::new(format!(
        "15. Learning loop: the cost of admitting a lesson through the replay gate ({n} lessons) vs one AgencyCore run"
    ));
    s.rows.push(Row::new(
        "model calls per admitted lesson (the replay's own count)",
        format!("{:.1}", per(calls)),
        "8 (one AgencyCore run's llm stages)",
        ratio(per(calls), 8.0),
    ));
    s.rows.push(Row::times(
        "process CPU per admission (run that triggers it through its admission, minus the same run without a replay)",
        replay,
        ("process CPU of one AgencyCore run", run_cpu),
    ));
    s.rows.push(Row::times(
        "process CPU from the run's end to the admission (+100 ms quiet)",
        window,
        ("process CPU of one AgencyCore run (+100 ms quiet)", run_cpu),
    ));
    s.rows.push(Row::times(
        "wall time of a replay (run's end seen → admitted)",
        replay_wall,
        ("wall time of one AgencyCore run", run_wall),
    ));
    s.rows.push(Row::new(
        "model cost per admission (metered by the gateway for the replay's handler)",
        format!("{:.0} µ$", per(cost)),
        format!("{:.0} µ$ (one AgencyCore run)", per(run_cost)),
        ratio(per(cost), per(run_cost)),
    ));
    s.shows = format!(
        "what one admitted lesson costs: its replay makes {:.0} model calls ({} a run's 8) and costs the daemon {} of CPU, {} one AgencyCore run ({}); it is paid once per lesson, by the replay's own budget, not by the run that proposed it.",
        per(calls),
        ratio(per(calls), 8.0),
        fmt_dur(replay),
        ratio(replay.as_secs_f64(), run_cpu.as_secs_f64()),
        fmt_dur(run_cpu),
    );
    s.notes.push(format!(
        "{n} pairs of AgencyCore runs after {warm} warm-up runs and one warm-up pair, in one daemon in this process (`Daemon::start`) with the scripted model server (the demo's answers, `crates/agency-cli/src/demo_pipeline_script.json`); each pair's request carries a marker word its Observer repeats, its Learner then proposes a lesson of its own title (nothing otherwise), so the pair's second run sends that lesson through the replay gate; a Gatekeeper whose prompt quotes that lesson scores clarity 5 instead of 4, so every replay improves a dimension and admits. Each lesson was admitted; the model server received {served} replay calls in all ({:.1} per lesson).",
        served as f64 / n.max(1) as f64
    ));
    s.notes.push(format!(
        "process CPU: `CLOCK_PROCESS_CPUTIME_ID`, all threads of this process: the daemon, the model server (its CPU per call is in both sides), and this benchmark's waiting (for a run's end: woken by its outcome's completion; for an admission: the lesson's state read at each commit to the event log, {:.1} reads per replay, {} of CPU each, so {} per replay). A run's CPU is its start to its end seen plus {} of quiet (what the daemon still does after the end); the replay's is the pair's second run to its lesson's admission plus the same quiet, minus the pair's first run. The idle daemon used {} of CPU in 1 s. Per pair, CPU of run / run + replay: {}.",
        reads as f64 / n.max(1) as f64,
        fmt_dur(read_cpu),
        fmt_dur(read_cpu * u32::try_from(reads / n.max(1)).unwrap_or(0)),
        fmt_dur(QUIET),
        fmt_dur(idle),
        measured
            .iter()
            .map(|p| format!("{} / {}", fmt_dur(p.run_cpu), fmt_dur(p.with_replay_cpu)))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    s.notes.push(
        "the replay re-runs the stages from the first that reads the Retriever (Guide) to the scoring one (Gatekeeper) on the lesson's two supporting runs, without and with it: Guide, Planner, Implementor and Gatekeeper are model calls (4 × 2 runs × 2 = 16); SafetyGuard and ToolRunner (mock mode) are code. Cost as the gateway metered it (`cost_tree` of the replay's handler, of the run's), priced by `default_price = { input = 1.0, output = 2.0 }` (US dollars per million tokens).".to_owned(),
    );
    s.notes.push(format!(
        "the lessons' `replayed` history entries say {:.0} µ$ per replay ({} the metered cost).",
        per(reported),
        ratio(per(reported), per(cost))
    ));
    let mut sections = vec![s];
    sections.push(crate::retriever::run(cfg)?);
    Ok(sections)
}
