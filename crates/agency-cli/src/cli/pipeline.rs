//! Arguments of `agency pipeline`: compile a `.pipeline` source into the
//! Pipeline Model, and write a built-in pipeline (AgencyCore) as editable
//! sources. Neither needs a daemon. Each subcommand is one variant of
//! [`PipelineCommand`] with its own `Args` struct, so that run-side
//! subcommands can be added beside them.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};

#[derive(Debug, Subcommand)]
pub enum PipelineCommand {
    /// Compile a .pipeline file and check it: every problem is printed as
    /// `file:line:col: error|warning: …` and any error exits 1. Prints
    /// the stages (`--json`: the Pipeline Model). Needs no daemon.
    Compile(PipelineCompileArgs),

    /// Write a built-in pipeline's source into DIR (created if missing),
    /// to edit and run; an existing file is never overwritten. Needs no
    /// daemon.
    Init(PipelineInitArgs),

    /// Start a run of a pipeline (a built-in name such as `agencycore`, or
    /// a .pipeline file compiled here) on INPUT; prints the run. Each stage
    /// becomes a child outcome with its validated artifact in the KB.
    Run(PipelineRunArgs),

    /// List pipeline runs, newest first.
    Runs(PipelineRunsArgs),

    /// One run: each stage's status, attempts, tokens, cost and artifact.
    Show(PipelineShowArgs),

    /// Stop an unfinished run: no more of its stages run; what its
    /// finished stages stored stays.
    Stop(PipelineShowArgs),
}

#[derive(Debug, Args)]
pub struct PipelineRunArgs {
    /// `agencycore`, or a .pipeline file.
    pub pipeline: String,
    /// The run's input: text for a pipeline whose input is a string (as
    /// AgencyCore's), JSON otherwise.
    pub input: String,
    /// Permission level 0-3 (seed 001's Learner levels; 0 allows only
    /// ToolRunner's mock mode).
    #[arg(long, default_value_t = 0)]
    pub level: i64,
    /// Let ToolRunner run the allowed commands (needs --level 1 or more).
    #[arg(long)]
    pub live: bool,
    /// Wait until the run ends or stops, then show it; exit 1 unless it
    /// is done.
    #[arg(long)]
    pub wait: bool,
}

#[derive(Debug, Args)]
pub struct PipelineRunsArgs {
    /// Only runs still running, waiting or paused.
    #[arg(long)]
    pub unfinished: bool,
    /// At most this many (default 50).
    #[arg(long)]
    pub limit: Option<usize>,
}

#[derive(Debug, Args)]
pub struct PipelineShowArgs {
    /// The run's id (its handler; a unique prefix will do).
    pub run: String,
}

#[derive(Debug, Args)]
pub struct PipelineCompileArgs {
    /// The .pipeline file.
    pub file: PathBuf,
}

/// The pipelines Agency ships.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum BuiltinPipeline {
    /// Seed 001's eleven stages, from a raw request to a scored run.
    Agencycore,
}

#[derive(Debug, Args)]
pub struct PipelineInitArgs {
    /// Which built-in pipeline.
    #[arg(value_enum)]
    pub pipeline: BuiltinPipeline,
    /// The folder to write it into.
    pub dir: PathBuf,
}
