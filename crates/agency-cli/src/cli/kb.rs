//! Arguments of `agency kb`: list, read, put, history and access log of
//! the Knowledge Base's files.

use clap::Subcommand;
use clap::builder::NonEmptyStringValueParser;

#[derive(Debug, Subcommand)]
pub enum KbCommand {
    /// Every file you can read.
    Ls,
    /// Print a file's content.
    Cat {
        /// File id or unique prefix.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        id: String,
        /// This version instead of the latest.
        #[arg(long)]
        version: Option<i64>,
    },
    /// Put a local file (or standard input, `-`) into the KB: a new
    /// document with `--description`, or a new version of an existing one
    /// with `--to FILE` (refused if it changed since you read it). The
    /// content must be UTF-8 text within `limits.max_file_bytes`. Prints
    /// the file's id and version.
    Put {
        /// The local file to read, or `-` for standard input.
        source: String,
        /// Create a new document with this description (what it is, as
        /// `agency kb ls` and agents see it).
        #[arg(long, value_parser = NonEmptyStringValueParser::new(), required_unless_present = "to", conflicts_with = "to")]
        description: Option<String>,
        /// Write a new version of this KB file (id or unique prefix).
        #[arg(long, value_name = "FILE", value_parser = NonEmptyStringValueParser::new())]
        to: Option<String>,
    },
    /// A file's version history, newest first.
    Log {
        /// File id or unique prefix.
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        id: String,
    },
    /// A file's access log: who read, created and wrote it, and when,
    /// newest first.
    Audit {
        /// File id or unique prefix (or kb://UUID).
        id: String,
        /// At most this many entries.
        #[arg(long, default_value_t = 200)]
        limit: usize,
    },
}
