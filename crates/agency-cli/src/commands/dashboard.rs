//! `agency dashboard`: ask the daemon for a one-time login URL of the web
//! dashboard, print it, and with `--open` hand it to the browser.

use std::process::ExitCode;

use agency_api::DashboardLogin;
use anyhow::Result;

use super::{Ctx, emit, emit_json};
use crate::client::decode;

pub fn run(ctx: &Ctx, open: bool) -> Result<ExitCode> {
    let c = ctx.client()?;
    let v = c.post(c.url(&["dashboard", "login"]), &serde_json::json!({}))?;
    let login: DashboardLogin = decode(v.clone(), "dashboard login")?;
    if ctx.json {
        emit_json(&v)?;
    } else {
        emit(&format!(
            "{}\n(works once, for two minutes; run `agency dashboard` again for another)\n",
            login.url
        ))?;
    }
    if open {
        // Failing to start a browser is not a failure of the command: the
        // URL is printed above.
        let opener = if cfg!(target_os = "macos") {
            "open"
        } else {
            "xdg-open"
        };
        match std::process::Command::new(opener)
            .arg(&login.url)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
        {
            Ok(s) if s.success() => {}
            Ok(s) => eprintln!(
                "failed to open a browser: {opener} exited with {s}; open the URL above yourself"
            ),
            Err(e) => eprintln!(
                "failed to open a browser with {opener}: {e}; open the URL above yourself"
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}
