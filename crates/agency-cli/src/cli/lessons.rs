//! Arguments of `agency lessons`: what pipelines learned, and the user's
//! control over it. Each subcommand is one variant of [`LessonsCommand`].

use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum LessonsCommand {
    /// Lessons, most recently changed first: state, title, how often
    /// recalled, helpful and harmful.
    List(LessonsListArgs),

    /// One lesson: its advice, scope and trigger, the runs it was learned
    /// from, its history and every version.
    Show(LessonIdArgs),

    /// Admit a lesson: one waiting for you (a tool-policy or permission
    /// lesson), or any other not admitted — your decision overrides the
    /// evidence rules.
    Approve(LessonIdArgs),

    /// Reject a lesson not admitted yet, with the reason.
    Reject(LessonReasonArgs),

    /// Stop recalling a lesson, with the reason.
    Retire(LessonReasonArgs),

    /// Restore an earlier version of a lesson (default: the one before
    /// its latest) as its newest version.
    Rollback(LessonRollbackArgs),

    /// Every lesson with its history and versions, as JSON.
    Export(LessonsExportArgs),
}

#[derive(Debug, Args)]
pub struct LessonsListArgs {
    /// Only this pipeline's.
    #[arg(long)]
    pub pipeline: Option<String>,
    /// Only lessons in these states (proposed, replaying, awaiting_user,
    /// admitted, rejected, retired, rolled_back), comma-separated.
    #[arg(long)]
    pub state: Option<String>,
    /// At most N (default 100).
    #[arg(long)]
    pub limit: Option<usize>,
}

#[derive(Debug, Args)]
pub struct LessonIdArgs {
    /// The lesson's id, or a unique prefix of it.
    pub lesson: String,
}

#[derive(Debug, Args)]
pub struct LessonReasonArgs {
    /// The lesson's id, or a unique prefix of it.
    pub lesson: String,
    /// Why (kept in the lesson's history).
    #[arg(long)]
    pub reason: String,
}

#[derive(Debug, Args)]
pub struct LessonRollbackArgs {
    /// The lesson's id, or a unique prefix of it.
    pub lesson: String,
    /// The version to restore (`agency lessons show` lists them).
    #[arg(long)]
    pub to: Option<i64>,
}

#[derive(Debug, Args)]
pub struct LessonsExportArgs {
    /// Only this pipeline's.
    #[arg(long)]
    pub pipeline: Option<String>,
}
