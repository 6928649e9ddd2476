//! `agency`: the user's command line for an Agency home. Everything except
//! `init` and `serve` goes through the running daemon's REST API.
//!
//! Exit codes: 0 on success, 1 on failure (the error on stderr as
//! `error: …`), 2 on usage errors (clap's own).

mod bridge;
mod cli;
mod client;
mod commands;
mod output;
mod records;
mod replay;
mod safe_text;

use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::parse();
    match commands::run(cli) {
        Ok(code) => code,
        // A reader that stopped reading (`agency kb ls | head`) is not a
        // failure worth a message; any other broken pipe is.
        Err(e) if e.downcast_ref::<commands::StdoutClosed>().is_some() => ExitCode::SUCCESS,
        Err(e) => {
            // Errors may quote text an agent wrote (a title, a reason).
            eprintln!("error: {}", safe_text::block(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}
