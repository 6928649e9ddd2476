//! Arguments of the organisation commands: `agency up`,
//! `agency key`, `agency ask`, `agency conversations` and `agency demo --org`.

use std::path::PathBuf;

use clap::builder::NonEmptyStringValueParser;
use clap::{Args, Subcommand};

use super::parse_duration_ms;

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Mint a key for an agency; printed once, alone on stdout.
    Mint {
        /// The agency's name.
        #[arg(long, value_parser = NonEmptyStringValueParser::new())]
        agency: String,
    },
    /// Keys (of one agency, or all), revoked ones too; never their secret.
    List {
        #[arg(long, value_parser = NonEmptyStringValueParser::new())]
        agency: Option<String>,
    },
    /// Revoke a key (its id, from `agency key list`); it stops at once.
    Revoke {
        #[arg(value_parser = NonEmptyStringValueParser::new())]
        id: String,
    },
}

#[derive(Debug, Args)]
pub struct AskArgs {
    /// The agency's name.
    #[arg(value_parser = NonEmptyStringValueParser::new())]
    pub agency: String,
    /// The message.
    #[arg(value_parser = NonEmptyStringValueParser::new())]
    pub message: String,
    /// Continue this conversation (its id, from an earlier `agency ask`):
    /// the executive handler sees the earlier exchange.
    #[arg(long, value_parser = NonEmptyStringValueParser::new())]
    pub conversation: Option<String>,
    /// How long to wait for the reply, e.g. 30s or 2m (at most 2m; 0s
    /// sends without waiting). No reply within it exits 1; read it later
    /// with `agency answer ID`.
    #[arg(long, default_value = "60s", value_parser = parse_wait)]
    pub wait: i64,
}

/// `--wait` of `agency ask`: a duration up to the daemon's maximum (a
/// longer one is a usage error, worded as `--help` says it).
fn parse_wait(s: &str) -> Result<i64, String> {
    let ms = parse_duration_ms(s).map_err(|e| e.to_string())?;
    let max = i64::try_from(agency_daemon::rest::agency::MAX_WAIT_MS).unwrap_or(i64::MAX);
    if ms > max {
        return Err(format!(
            "{s:?} is longer than the most --wait allows, 2m; wait at most 2m and check later with `agency answer ID`"
        ));
    }
    Ok(ms)
}

#[derive(Debug, Args)]
pub struct ConversationsArgs {
    /// Only this agency's.
    #[arg(long, value_parser = NonEmptyStringValueParser::new())]
    pub agency: Option<String>,
    /// At most this many messages (newest first).
    #[arg(long, default_value_t = 50)]
    pub limit: usize,
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// A compiled Agency Model (`.json`) or a folder of sources.
    pub path: PathBuf,
    /// Show what would change; write nothing.
    #[arg(long)]
    pub plan: bool,
    #[command(flatten)]
    pub assist: crate::commands::org_assist::AssistArgs,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Play the declarative-organisation story (seed 002's WeatherAgency:
    /// `agency up`, an outside party's question, the answer through its
    /// agents and its tool) instead of the three-level garden story.
    #[arg(long, conflicts_with = "pipeline")]
    pub org: bool,
    /// Play seed 001's AgencyCore pipeline: eleven checked stages from a
    /// raw request to a scored run, each stage's status and the
    /// Gatekeeper's scorecard printed.
    #[arg(long)]
    pub pipeline: bool,
}
