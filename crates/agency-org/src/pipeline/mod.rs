//! Pipelines (seed 001): a `.pipeline` source compiled into the
//! checked [`PipelineModel`] a pipeline run executes stage by stage.
//!
//! A `.pipeline` file is Markdown with YAML frontmatter, like the
//! organisation's sources: the frontmatter declares the stages (`read.rs`),
//! each llm stage's prompt is the body's `## StageName` section
//! (`template.rs`), schemas are JSON Schema written as YAML with shared
//! definitions under `schemas:` (`schemas.rs`), and `build.rs` checks what
//! each stage reads against what earlier stages produce. Every problem is
//! a [`Diagnostic`] at `file:line:col`; a compile with an error returns no
//! model. `docs/pipeline-format.md` is the format's reference.
//! AgencyCore, seed 001's eleven stages, ships as [`AGENCYCORE`].

pub mod anchors;
pub mod build;
pub mod caps;
pub mod facts;
pub mod facts_check;
pub mod model;
pub mod org_check;
pub mod outcomes;
pub mod read;
pub mod schemas;
pub mod source_schema;
pub mod template;

#[cfg(test)]
mod agencycore_tests;
#[cfg(test)]
mod facts_tests;
#[cfg(test)]
mod tests;

use std::path::Path;

pub use caps::{CAPS_VERSION, Capped, PASS_AT, rubric_of};
pub use facts::{FACTS, empty_facts, facts_schema};
pub use model::*;
pub use org_check::{StageTarget, check_agent_stages};
pub use outcomes::{MAX_PLAN_ITEMS, PlanIssue, PlanItem, check_plan, plan_items};
pub use source_schema::pipeline_sources_schema;

use crate::compile::CompileError;
use crate::diag::{Diagnostic, Diags, Pos};
use crate::fields::Cx;
use crate::{markdown, yaml};

/// AgencyCore's source as shipped (seed 001): what `agency pipeline init
/// agencycore DIR` writes and `agency pipeline run agencycore` runs.
pub const AGENCYCORE: &str = include_str!("agencycore.pipeline");

/// The file name AgencyCore is written and reported as.
pub const AGENCYCORE_FILE: &str = "agencycore.pipeline";

/// The extension of pipeline sources.
pub const PIPELINE_EXTENSION: &str = "pipeline";

/// A successful compile: the model and the warnings found on the way.
#[derive(Debug, Clone)]
pub struct CompiledPipeline {
    pub model: PipelineModel,
    pub warnings: Vec<Diagnostic>,
}

/// Compile the `.pipeline` file at `path`; diagnostics name the file as
/// the path was given.
pub fn compile_pipeline(path: &Path) -> Result<PipelineModel, CompileError> {
    compile_pipeline_file(path).map(|c| c.model)
}

/// [`compile_pipeline`] with the warnings.
pub fn compile_pipeline_file(path: &Path) -> Result<CompiledPipeline, CompileError> {
    let file = path.display().to_string();
    let text = std::fs::read(path)
        .map_err(|e| format!("failed to read pipeline {file}: {e}"))
        .and_then(|b| {
            String::from_utf8(b)
                .map_err(|_| format!("failed to read pipeline {file}: not UTF-8 text"))
        });
    match text {
        Ok(t) => compile_pipeline_full(&file, &t),
        Err(message) => {
            let mut diags = Diags::default();
            diags.error(&file, Pos::start(), message);
            Err(CompileError {
                diagnostics: diags.sorted(),
            })
        }
    }
}

/// Compile a pipeline's text; `file` is the name diagnostics and the
/// model's `source` give.
pub fn compile_pipeline_str(file: &str, text: &str) -> Result<PipelineModel, CompileError> {
    compile_pipeline_full(file, text).map(|c| c.model)
}

/// AgencyCore compiled (it always compiles: a test keeps it so).
pub fn agencycore() -> Result<PipelineModel, CompileError> {
    compile_pipeline_str(AGENCYCORE_FILE, AGENCYCORE)
}

/// [`compile_pipeline_str`] with the warnings.
pub fn compile_pipeline_full(file: &str, text: &str) -> Result<CompiledPipeline, CompileError> {
    let mut diags = Diags::default();
    let model = compile_into(file, text, &mut diags);
    match model {
        Some(model) if !diags.has_errors() => Ok(CompiledPipeline {
            model,
            warnings: diags.sorted(),
        }),
        _ => Err(CompileError {
            diagnostics: diags.sorted(),
        }),
    }
}

fn compile_into(file: &str, text: &str, diags: &mut Diags) -> Option<PipelineModel> {
    let mut cx = Cx { file, diags };
    let doc = match markdown::parse(text) {
        Ok(d) => d,
        Err((pos, m)) => {
            cx.err(pos, m);
            return None;
        }
    };
    let Some((fm, first)) = &doc.frontmatter else {
        cx.err(Pos::start(), "a pipeline starts with YAML frontmatter between `---` lines (`pipeline: NAME`, `stages: …`)");
        return None;
    };
    let root = match yaml::parse(fm, *first) {
        Err((pos, m)) => {
            cx.err(pos, m);
            return None;
        }
        Ok(None) => {
            cx.err(
                Pos::new(*first, 1),
                "the frontmatter is empty: a pipeline needs `pipeline: NAME` and `stages:`",
            );
            return None;
        }
        Ok(Some(node)) => node,
    };
    let raw = read::pipeline(&mut cx, &root);
    let src = build::Source {
        file,
        hash: blake3::hash(text.as_bytes()).to_hex().to_string(),
        sections: template::sections(text, &doc),
    };
    Some(build::build(&mut cx, &raw, src))
}

/// The Pipeline Model's JSON Schema (`agency schema pipeline`).
pub fn pipeline_schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(PipelineModel)).unwrap_or(serde_json::Value::Null)
}

/// The model as `agency pipeline compile` prints it: pretty JSON and a newline.
pub fn to_json(model: &PipelineModel) -> String {
    let mut s = serde_json::to_string_pretty(model).unwrap_or_default();
    s.push('\n');
    s
}
