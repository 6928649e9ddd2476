//! The compiler's entry point: read the folder, check every name, apply
//! inheritance, and return the model (with its warnings and the
//! explanation of every agent) or every diagnostic of the run.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use crate::assist::Assist;
use crate::diag::{Diagnostic, Diags};
use crate::inherit::Explanation;
use crate::model::{AgencyModel, MODEL_VERSION, Metadata};
use crate::{resolve, walk};

/// A successful compile.
#[derive(Debug, Clone)]
pub struct Compiled {
    pub model: AgencyModel,
    /// Also in `model.metadata.compilerWarnings`, as text.
    pub warnings: Vec<Diagnostic>,
    /// Every agent's effective fields with where each came from.
    pub explanations: BTreeMap<String, Explanation>,
}

/// A failed compile: every problem found, errors and warnings, by file
/// and position.
#[derive(Debug, Clone, thiserror::Error)]
pub struct CompileError {
    pub diagnostics: Vec<Diagnostic>,
}

impl CompileError {
    pub fn error_count(&self) -> usize {
        self.diagnostics.iter().filter(|d| d.is_error()).count()
    }
}

impl fmt::Display for CompileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for d in &self.diagnostics {
            writeln!(f, "{d}")?;
        }
        write!(f, "failed to compile: {} error(s)", self.error_count())
    }
}

/// Compile the organisation in `dir` (deterministic: no assistant).
pub fn compile(dir: &Path) -> Result<Compiled, CompileError> {
    compile_with(dir, None)
}

/// Compile with an optional [`Assist`] for text the parser cannot place.
pub fn compile_with(dir: &Path, assist: Option<&dyn Assist>) -> Result<Compiled, CompileError> {
    let mut diags = Diags::default();
    let read = walk::read_tree(dir, &mut diags, assist);
    let Some(root) = read.root else {
        return Err(CompileError {
            diagnostics: diags.sorted(),
        });
    };
    let ix = resolve::index(&root, &mut diags);
    let broken = resolve::check(&root, &ix, &mut diags);
    let mut explanations = resolve::explain_all(&ix, &broken, &mut diags);
    resolve::agency_connections(&root, &mut explanations);
    if diags.has_errors() {
        return Err(CompileError {
            diagnostics: diags.sorted(),
        });
    }
    let warnings = diags.sorted();
    let mut model = resolve::model(&root, &explanations);
    let mut hasher = blake3::Hasher::new();
    for (path, bytes) in &read.files {
        // Length-prefixed, so that no two file lists hash alike.
        hasher.update(&(path.len() as u64).to_le_bytes());
        hasher.update(path.as_bytes());
        hasher.update(&(bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
    }
    model.metadata = Some(Metadata {
        version: MODEL_VERSION.to_owned(),
        source_hash: hasher.finalize().to_hex().to_string(),
        compiler_warnings: warnings.iter().map(ToString::to_string).collect(),
    });
    Ok(Compiled {
        model,
        warnings,
        explanations,
    })
}

/// The model as written by `agency compile`: pretty JSON and a newline.
pub fn to_json(model: &AgencyModel) -> String {
    let mut s = serde_json::to_string_pretty(model).unwrap_or_default();
    s.push('\n');
    s
}
