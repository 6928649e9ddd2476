//! Runs the scripted model server from the command line until ctrl-c, for
//! trying a script against a real client by hand:
//! `cargo run -p agency-testkit --example model_server -- SCRIPT.json [PORT]`.
//! (The product's `agency model-server` command wraps the same `serve`.)

use agency_testkit::{Script, serve};
use std::path::PathBuf;
use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next().map(PathBuf::from) else {
        eprintln!("usage: model_server SCRIPT.json [PORT]");
        return ExitCode::from(2);
    };
    let port = match args.next().map(|p| p.parse::<u16>()) {
        None => 0,
        Some(Ok(port)) => port,
        Some(Err(e)) => {
            eprintln!("failed to read the port: {e}");
            return ExitCode::from(2);
        }
    };
    let script = match Script::load(&path) {
        Ok(script) => script,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::FAILURE;
        }
    };
    eprintln!(
        "serving {} on 127.0.0.1:{port} until ctrl-c",
        path.display()
    );
    let stop = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    match serve(script, port, stop).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}
