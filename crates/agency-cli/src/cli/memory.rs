//! Arguments of `agency memory`: reading and forgetting
//! a handler's memories, and seeing and undoing condensations.

use clap::Subcommand;
use clap::builder::NonEmptyStringValueParser;

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Search a handler's memories, best match first (full-text, plus
    /// meaning when [memory.embeddings] is configured).
    Search {
        /// Handler id or unique prefix.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        handler: String,
        /// The words to look for.
        #[arg(required = true, num_args = 1..)]
        words: Vec<String>,
        /// Most memories to show (at most 100).
        #[arg(long, default_value_t = 10)]
        limit: usize,
        /// Only memories of this kind (fact, preference, entity, event, note).
        #[arg(long)]
        kind: Option<String>,
        /// Only memories carrying this tag.
        #[arg(long)]
        tag: Option<String>,
        /// Forgotten and condensed memories too (history).
        #[arg(long)]
        all: bool,
    },
    /// One memory by id, in any state.
    Show {
        /// Handler id or unique prefix.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        handler: String,
        /// The memory's id or a unique prefix of it.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        id: String,
    },
    /// Forget a memory: no longer searched or recalled (kept as history).
    Delete {
        /// Handler id or unique prefix.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        handler: String,
        /// The memory's id or a unique prefix of it.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        id: String,
    },
    /// How many memories a handler has, their size, the last changes,
    /// embeddings and an open request to condense.
    Status {
        /// Handler id or unique prefix.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        handler: String,
    },
    /// A handler's condensations (memories an agent replaced by a summary),
    /// newest first.
    Compactions {
        /// Handler id or unique prefix.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        handler: String,
    },
    /// Undo a condensation: its summary is forgotten, the memories it
    /// replaced are live again.
    Undo {
        /// Handler id or unique prefix.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        handler: String,
        /// The compaction's id or a unique prefix (from `agency memory compactions`).
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        compaction: String,
    },
}
