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
        // failure worth a message.
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // Errors may quote text an agent wrote (a title, a reason).
            eprintln!("error: {}", safe_text::block(&format!("{e:#}")));
            ExitCode::FAILURE
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
