//! `--assist`: text the parser could not place (a section heading it does
//! not know, a tool whose implementation it could not find) is offered to
//! an assistant (in practice a model, behind the CLI), whose answer is a
//! JSON object of the same keys the file's frontmatter accepts; it is
//! checked exactly like frontmatter, so a wrong answer is a diagnostic, not
//! a silently wrong model. The library stays I/O-free: the caller supplies
//! the [`Assist`] implementation. Off by default; without it, compiles are
//! deterministic.

use serde::Serialize;
use serde_json::Value;

/// Which kind of file the text is from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum EntityKind {
    Agent,
    Agency,
    Tool,
}

/// One piece of unplaced text.
#[derive(Debug, Clone, Serialize)]
pub struct AssistRequest {
    /// The source file, relative to the source folder.
    pub file: String,
    pub kind: EntityKind,
    /// The section heading the text was under (empty for a whole file).
    pub heading: String,
    pub text: String,
    /// The JSON Schema the answer must satisfy (the frontmatter schema of
    /// `kind`'s Agency keys).
    pub schema: Value,
}

/// Places free text into the schema. An `Err` is reported as a warning and
/// the text is handled as without `--assist`.
pub trait Assist {
    fn place(&self, request: &AssistRequest) -> Result<Value, AssistError>;
}

/// Why an [`Assist`] placed nothing: the implementation's own error (an
/// unreachable model, an answer with no object, …), kept whole. The
/// compiler only shows it, in the warning; the caller that chose the
/// implementation can downcast it.
#[derive(Debug)]
pub struct AssistError(Box<dyn std::error::Error + Send + Sync>);

impl AssistError {
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> AssistError {
        AssistError(Box::new(error))
    }

    /// The implementation's error, if it is an `E`.
    pub fn downcast_ref<E: std::error::Error + 'static>(&self) -> Option<&E> {
        self.0.downcast_ref()
    }
}

impl std::fmt::Display for AssistError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

// Transparent: the implementation's message is this error's, so its
// source is the implementation's source (not the implementation itself,
// which would print the message twice in a chain).
impl std::error::Error for AssistError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// The instruction a model-backed [`Assist`] sends with a request.
pub fn prompt(request: &AssistRequest) -> String {
    format!(
        "You convert a section of an Agency {kind:?} source file into JSON.\n\
         Answer with one JSON object and nothing else. It must satisfy this JSON Schema \
         (use only its keys; leave out what the text does not say):\n{schema}\n\n\
         File: {file}\nSection: {heading}\nText:\n{text}\n",
        kind = request.kind,
        schema = request.schema,
        file = request.file,
        heading = request.heading,
        text = request.text,
    )
}
