//! `agency pipeline compile FILE` and `agency pipeline init agencycore
//! DIR`: the `.pipeline` compiler (crate `agency-org`) on the command
//! line. Neither needs a daemon nor a home. Diagnostics go to stderr as
//! `file:line:col: error|warning: …`; any error exits 1 and prints no model.
//!
//! `agency pipeline run|runs|show` (REST `/v1/pipelines/runs`): a run is
//! started with the compiled model (compiled here, so its diagnostics are
//! the user's to see), listed and shown; the daemon's runner drives it.

use std::io::Write as _;
use std::path::Path;
use std::process::ExitCode;

use agency_org::CompileError;
use agency_org::pipeline::{self, PipelineModel, StageKind};
use anyhow::{Context, Result, bail};

use agency_api::{PipelineRunSummary, PipelineRunView};
use agency_core::status::PipelineRunStatus;

use super::{Ctx, emit, show};
use crate::cli::{
    BuiltinPipeline, PipelineCompileArgs, PipelineInitArgs, PipelineRunArgs, PipelineRunsArgs,
};
use crate::client::IdKind;
use crate::output::table;
use crate::safe_text::line;

pub fn compile(a: &PipelineCompileArgs, json: bool) -> Result<ExitCode> {
    if !a.file.is_file() {
        bail!(
            "failed to compile pipeline {}: not a file; give the .pipeline file",
            a.file.display()
        );
    }
    let compiled = match pipeline::compile_pipeline_file(&a.file) {
        Ok(c) => c,
        Err(CompileError { diagnostics }) => {
            let errors = diagnostics.iter().filter(|d| d.is_error()).count();
            print_diagnostics(diagnostics.iter().map(ToString::to_string));
            let _ = writeln!(
                std::io::stderr(),
                "error: failed to compile pipeline {}: {errors} error(s)",
                a.file.display()
            );
            return Ok(ExitCode::FAILURE);
        }
    };
    print_diagnostics(compiled.warnings.iter().map(ToString::to_string));
    if json {
        emit(&pipeline::to_json(&compiled.model))?;
    } else {
        emit(&crate::safe_text::block(&summary(&compiled.model)))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// One line per stage: its kind and what it reads.
fn summary(m: &PipelineModel) -> String {
    let mut out = format!("pipeline {}: {} stage(s)\n", m.name, m.stages.len());
    let width = m.stages.iter().map(|s| s.name.len()).max().unwrap_or(0);
    for (i, s) in m.stages.iter().enumerate() {
        let kind = match &s.kind {
            StageKind::Llm { model: Some(m), .. } => format!("llm ({m})"),
            StageKind::Llm { model: None, .. } => "llm".to_owned(),
            StageKind::Agent { agent, verb } => format!("agent {agent}.{verb}"),
            StageKind::Code { step } => format!("code {step}"),
        };
        let reads: Vec<String> = s
            .reads
            .iter()
            .map(|r| {
                std::iter::once(r.stage.as_str())
                    .chain(r.fields.iter().map(String::as_str))
                    .collect::<Vec<_>>()
                    .join(".")
            })
            .collect();
        let reads = if reads.is_empty() {
            String::new()
        } else {
            format!("  reads {}", reads.join(", "))
        };
        out.push_str(&format!("{:>3}. {:width$}  {kind}{reads}\n", i + 1, s.name));
    }
    out
}

fn print_diagnostics(lines: impl Iterator<Item = String>) {
    let mut err = std::io::stderr().lock();
    for l in lines {
        // Diagnostics quote source text: keep control characters out of the terminal.
        let _ = writeln!(err, "{}", crate::safe_text::block(&l));
    }
}

pub fn init(a: &PipelineInitArgs) -> Result<ExitCode> {
    let (file, text) = match a.pipeline {
        BuiltinPipeline::Agencycore => (pipeline::AGENCYCORE_FILE, pipeline::AGENCYCORE),
    };
    std::fs::create_dir_all(&a.dir)
        .with_context(|| format!("failed to create folder {}", a.dir.display()))?;
    let path = a.dir.join(file);
    write_new(&path, text)?;
    emit(&format!("wrote {}\n", path.display()))?;
    Ok(ExitCode::SUCCESS)
}

/// Create `path` with `text`; an existing file is an error and unchanged
/// (`create_new`: no window between a check and the write).
fn write_new(path: &Path, text: &str) -> Result<()> {
    let mut f = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => bail!(
            "failed to write {}: the file exists and is left unchanged; remove it or choose another folder",
            path.display()
        ),
        Err(e) => return Err(e).with_context(|| format!("failed to write {}", path.display())),
    };
    f.write_all(text.as_bytes())
        .with_context(|| format!("failed to write {}", path.display()))
}

/// The model `arg` names: a built-in pipeline, or a .pipeline file.
fn load(arg: &str) -> Result<PipelineModel> {
    if arg == "agencycore" && !Path::new(arg).exists() {
        return pipeline::agencycore()
            .map_err(|e| anyhow::anyhow!("failed to compile the built-in AgencyCore: {e}"));
    }
    let path = Path::new(arg);
    if !path.is_file() {
        bail!(
            "failed to run pipeline {arg:?}: it is neither a built-in pipeline (agencycore) nor a .pipeline file"
        );
    }
    match pipeline::compile_pipeline_file(path) {
        Ok(c) => {
            print_diagnostics(c.warnings.iter().map(ToString::to_string));
            Ok(c.model)
        }
        Err(CompileError { diagnostics }) => {
            print_diagnostics(diagnostics.iter().map(ToString::to_string));
            bail!(
                "failed to run pipeline {}: it does not compile (the errors are above); nothing was started",
                path.display()
            )
        }
    }
}

pub fn run(ctx: &Ctx, a: &PipelineRunArgs) -> Result<ExitCode> {
    let model = load(&a.pipeline)?;
    // Text for a pipeline whose input is a string; JSON otherwise.
    let input = if model
        .input_schema
        .get("type")
        .and_then(serde_json::Value::as_str)
        == Some("string")
    {
        serde_json::Value::String(a.input.clone())
    } else {
        serde_json::from_str(&a.input).with_context(|| {
            format!(
                "failed to run pipeline {}: its input is JSON, and {:?} does not parse",
                model.name, a.input
            )
        })?
    };
    let c = ctx.client()?;
    let body = serde_json::json!({
        "model": model,
        "input": input,
        "level": a.level,
        "live_tools": a.live,
    });
    let v = c.post(c.url(&["pipelines", "runs"]), &body)?;
    if !a.wait {
        show(ctx, v, "pipeline run", |r| run_text(ctx, r))?;
        return Ok(ExitCode::SUCCESS);
    }
    let started: PipelineRunView = crate::client::decode(v, "pipeline run")?;
    let id = started.run.id.to_string();
    loop {
        let v = c.get(c.url(&["pipelines", "runs", &id]))?;
        let now: PipelineRunView = crate::client::decode(v.clone(), "pipeline run")?;
        if now.run.status != PipelineRunStatus::Running {
            show(ctx, v, "pipeline run", |r| run_text(ctx, r))?;
            return Ok(if now.run.status == PipelineRunStatus::Done {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            });
        }
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
}

pub fn runs(ctx: &Ctx, a: &PipelineRunsArgs) -> Result<ExitCode> {
    let c = ctx.client()?;
    let mut url = c.url(&["pipelines", "runs"]);
    if a.unfinished {
        url.query_pairs_mut().append_pair("unfinished", "true");
    }
    if let Some(n) = a.limit {
        url.query_pairs_mut().append_pair("limit", &n.to_string());
    }
    let v = c.get(url)?;
    show(ctx, v, "pipeline runs", |runs: &Vec<PipelineRunSummary>| {
        if runs.is_empty() {
            return "no pipeline runs\n".to_owned();
        }
        let rows = runs
            .iter()
            .map(|r| {
                vec![
                    r.id.to_string(),
                    line(&r.pipeline),
                    r.status.as_str().to_owned(),
                    progress(r),
                    crate::output::layout::ago(r.created_at),
                ]
            })
            .collect();
        table(&["RUN", "PIPELINE", "STATUS", "STAGE", "STARTED"], rows)
    })?;
    Ok(ExitCode::SUCCESS)
}

pub fn show_run(ctx: &Ctx, run: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Handler, run)?;
    let v = c.get(c.url(&["pipelines", "runs", &id]))?;
    show(ctx, v, "pipeline run", |r| run_text(ctx, r))?;
    Ok(ExitCode::SUCCESS)
}

pub fn stop_run(ctx: &Ctx, run: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let id = c.resolve(IdKind::Handler, run)?;
    let v = c.post(
        c.url(&["pipelines", "runs", &id, "stop"]),
        &serde_json::json!({}),
    )?;
    show(ctx, v, "pipeline run", |r| run_text(ctx, r))?;
    Ok(ExitCode::SUCCESS)
}

/// "3/11 Retriever", or "11/11" once done.
fn progress(r: &PipelineRunSummary) -> String {
    let at = (r.stage + 1).min(r.stages);
    match &r.stage_name {
        Some(n) => format!("{at}/{} {}", r.stages, line(n)),
        None => format!("{}/{}", r.stage.min(r.stages), r.stages),
    }
}

fn run_text(ctx: &Ctx, v: &PipelineRunView) -> String {
    let r = &v.run;
    let mut out = format!(
        "run {} of pipeline {}: {} (level {}, tools {})\n",
        r.id,
        line(&r.pipeline),
        r.status.as_str(),
        r.level,
        if r.live_tools { "live" } else { "mock" }
    );
    // Where its live commands ran; kept after the run.
    let workspace = agency_pipeline::tool_runner::workspace_of(
        &agency_pipeline::tool_runner::root_of(ctx.home.dir()),
        r.id,
    );
    if r.live_tools && workspace.is_dir() {
        out.push_str(&format!("workspace: {}\n", workspace.display()));
    }
    let rows = v
        .stages_detail
        .iter()
        .map(|s| {
            vec![
                (s.idx + 1).to_string(),
                line(&s.name),
                s.kind.clone(),
                s.status.as_str().to_owned(),
                s.attempts.to_string(),
                format!("{}/{}", s.input_tokens, s.output_tokens),
                format!("${:.4}", s.cost_micro_usd as f64 / 1e6),
                s.artifact
                    .map(|f| f.to_string())
                    .unwrap_or_else(|| "-".to_owned()),
            ]
        })
        .collect();
    out.push_str(&table(
        &[
            "#",
            "STAGE",
            "KIND",
            "STATUS",
            "CALLS",
            "TOKENS IN/OUT",
            "COST",
            "ARTIFACT",
        ],
        rows,
    ));
    for s in &v.stages_detail {
        if let Some(e) = &s.error {
            out.push_str(&format!("stage {}: {}\n", line(&s.name), line(e)));
        }
    }
    if !v.learning.is_empty() {
        out.push_str("lessons (agency lessons show <lesson>):\n");
        for e in &v.learning {
            // A replay's cost and verdict, or a rejection's reason.
            let extra = match e.action.as_str() {
                "replayed" => format!(
                    " ({} call(s), ${:.4}{})",
                    e.detail["calls"].as_i64().unwrap_or(0),
                    e.detail["cost_micro_usd"].as_i64().unwrap_or(0) as f64 / 1e6,
                    e.detail["verdict"]
                        .as_str()
                        .map(|v| format!(": {}", line(v)))
                        .unwrap_or_default()
                ),
                _ => e.detail["reason"]
                    .as_str()
                    .map(|r| format!(": {}", line(r)))
                    .unwrap_or_default(),
            };
            out.push_str(&format!(
                "  {} {} {:?}{extra}\n",
                &e.lesson.to_string()[..8],
                e.action,
                line(&e.title)
            ));
        }
    }
    out
}
