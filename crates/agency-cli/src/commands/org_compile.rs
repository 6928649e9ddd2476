//! `agency compile DIR [-o FILE]`, `agency schema [pipeline] [--sources]` and
//! `agency explain DIR AGENT`: the organisation compiler (crate
//! `agency-org`) on the command line. None of them needs a daemon, nor a
//! home unless `--assist` asks for its model (`org_assist.rs`). Diagnostics go to stderr as `file:line:col: error|warning: …`;
//! any error exits 1 and writes nothing.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agency_org::{CompileError, Compiled};
use anyhow::{Context, Result, bail};
use clap::Args;

use super::org_assist::{self, AssistArgs, ModelAssist};
use super::{emit, emit_json};

#[derive(Debug, Args)]
pub struct CompileArgs {
    /// The organisation's source folder (an .agency file or agents.json,
    /// its .agent and .tool files, sub-agency subfolders).
    pub dir: PathBuf,
    /// Write the model here instead of stdout (replaced only on success).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub assist: AssistArgs,
}

#[derive(Debug, Args)]
pub struct SchemaArgs {
    /// Which model: the Agency Model (the default) or the Pipeline Model
    /// (`pipeline`, what `agency pipeline compile --json` prints).
    #[arg(value_enum, default_value = "model")]
    pub what: SchemaOf,
    /// The sources' frontmatter schema instead of the model's (with
    /// `pipeline`: a .pipeline file's).
    #[arg(long)]
    pub sources: bool,
}

/// What `agency schema` describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SchemaOf {
    /// The Agency Model (`agency compile`).
    Model,
    /// The Pipeline Model (`agency pipeline compile --json`).
    Pipeline,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The organisation's source folder.
    pub dir: PathBuf,
    /// The agent to explain.
    pub agent: String,
    #[command(flatten)]
    pub assist: AssistArgs,
}

/// Compile, printing every diagnostic; `None` when there were errors.
/// With an assistant, its requests are said, and a run that reached its
/// bound fails (the text past it was never offered).
pub(crate) fn build(dir: &Path, assist: Option<&ModelAssist>) -> Result<Option<Compiled>> {
    if !dir.is_dir() {
        bail!(
            "failed to compile {}: not a folder; give the folder that holds the .agency file",
            dir.display()
        );
    }
    let result = agency_org::compile_with(dir, assist.map(|a| a as &dyn agency_org::Assist));
    let compiled = match result {
        Ok(c) => {
            print_diagnostics(c.warnings.iter().map(ToString::to_string));
            Some(c)
        }
        Err(CompileError { diagnostics }) => {
            let errors = diagnostics.iter().filter(|d| d.is_error()).count();
            print_diagnostics(diagnostics.iter().map(ToString::to_string));
            let _ = writeln!(
                std::io::stderr(),
                "error: failed to compile {}: {errors} error(s)",
                dir.display()
            );
            None
        }
    };
    if let Some(a) = assist {
        let _ = writeln!(
            std::io::stderr(),
            "note: --assist sent {} request(s) to {}; what the model placed is in the warnings saying `placed by --assist`",
            a.sent(),
            a.describe()
        );
        if a.over_limit() {
            let _ = writeln!(
                std::io::stderr(),
                "error: failed to compile {} with --assist: it has more text to place than the {} requests one run sends; place some of it by hand (frontmatter or known sections) and run again",
                dir.display(),
                org_assist::MAX_REQUESTS
            );
            return Ok(None);
        }
    }
    Ok(compiled)
}

fn print_diagnostics(lines: impl Iterator<Item = String>) {
    let mut err = std::io::stderr().lock();
    for l in lines {
        // Diagnostics quote source text: keep control characters out of the terminal.
        let _ = writeln!(err, "{}", crate::safe_text::block(&l));
    }
}

pub fn compile(a: &CompileArgs, home: Option<PathBuf>) -> Result<ExitCode> {
    let assist = org_assist::from_args(&a.assist, home)?;
    let Some(c) = build(&a.dir, assist.as_ref())? else {
        return Ok(ExitCode::FAILURE);
    };
    let text = agency_org::to_json(&c.model);
    match &a.output {
        None => emit(&text)?,
        Some(path) => {
            // Written beside the target and renamed: a reader never sees half a model.
            let tmp = path.with_extension("json.tmp");
            std::fs::write(&tmp, &text)
                .with_context(|| format!("failed to write {}", tmp.display()))?;
            std::fs::rename(&tmp, path)
                .with_context(|| format!("failed to write {}", path.display()))?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub fn schema(a: &SchemaArgs) -> Result<ExitCode> {
    let v = match (a.what, a.sources) {
        (SchemaOf::Model, true) => agency_org::sources_schema(),
        (SchemaOf::Model, false) => agency_org::model_schema(),
        (SchemaOf::Pipeline, false) => agency_org::pipeline::pipeline_schema(),
        (SchemaOf::Pipeline, true) => agency_org::pipeline::pipeline_sources_schema(),
    };
    let text = serde_json::to_string_pretty(&v).context("failed to format the schema")?;
    emit(&format!("{text}\n"))?;
    Ok(ExitCode::SUCCESS)
}

pub fn explain(a: &ExplainArgs, home: Option<PathBuf>, json: bool) -> Result<ExitCode> {
    let assist = org_assist::from_args(&a.assist, home)?;
    let Some(c) = build(&a.dir, assist.as_ref())? else {
        return Ok(ExitCode::FAILURE);
    };
    let Some(e) = c.explanations.get(&a.agent) else {
        let names = c.explanations.keys().map(String::as_str);
        let hint = agency_org::diag::did_you_mean(&a.agent, names);
        bail!(
            "failed to explain agent {:?}: the organisation has no such agent{hint} (agents: {})",
            a.agent,
            c.explanations
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        );
    };
    if json {
        emit_json(e)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = format!(
        "agent {} ({}:{})\n",
        e.agent.name, e.agent.source.file, e.agent.source.line
    );
    if !e.agent.inherits.is_empty() {
        out.push_str(&format!(
            "inherits (applied in order): {}\n",
            e.agent.inherits.join(", ")
        ));
    }
    let width = e.fields.iter().map(|f| f.field.len()).max().unwrap_or(0);
    for f in &e.fields {
        out.push_str(&format!(
            "  {:width$}  {}    <- {}:{}\n",
            f.field, f.value, f.from.file, f.from.line
        ));
    }
    emit(&crate::safe_text::block(&out))?;
    Ok(ExitCode::SUCCESS)
}
