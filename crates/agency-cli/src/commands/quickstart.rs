//! `agency init --model-server URL`: a new home set up for the README's
//! offline quickstart (the built-in runtime against the scripted model
//! server), so that nobody has to paste a second `[agents]` table into a
//! generated `agency.toml` (TOML refuses one: "duplicate key").
//!
//! The generated file is edited in place, key by key within its sections,
//! so its comments stay; the result is loaded as the daemon will load it
//! before `init` reports success.

use agency_config::Home;
use anyhow::{Context, Result, bail};

/// The `[models.NAME]` the quickstart's agents use.
const UPSTREAM: &str = "local";

/// The model server's URL as it goes into `base_url`: http(s), with a host,
/// no path, query or credentials (the gateway appends the API's paths).
pub fn check_url(url: &str) -> Result<String> {
    let bad = |why: &str| {
        anyhow::anyhow!(
            "failed to use {url:?} as the scripted model server: {why}; give the URL `agency model-server --script FILE` printed, e.g. http://127.0.0.1:40123"
        )
    };
    let u = reqwest::Url::parse(url.trim()).map_err(|e| bad(&e.to_string()))?;
    if !matches!(u.scheme(), "http" | "https") {
        return Err(bad("it is not an http:// URL"));
    }
    if u.host_str().is_none_or(str::is_empty) {
        return Err(bad("it names no host"));
    }
    if !u.username().is_empty() || u.password().is_some() {
        return Err(bad(
            "it holds credentials, which the scripted server never needs",
        ));
    }
    if u.path() != "/" || u.query().is_some() || u.fragment().is_some() {
        return Err(bad("it has a path or query; give the server's root URL"));
    }
    Ok(u.as_str().trim_end_matches('/').to_owned())
}

/// Set the new home's `agency.toml` to the built-in runtime with the
/// scripted model server at `url` as its upstream.
pub fn configure(home: &Home, url: &str) -> Result<()> {
    let path = home.config_path();
    let text = std::fs::read_to_string(&path)
        .with_context(|| format!("failed to read {}", path.display()))?;
    let new = offline_config(&text, url).with_context(|| {
        format!(
            "failed to set up {} for the scripted model server (the home was created with the default configuration)",
            path.display()
        )
    })?;
    std::fs::write(&path, new).with_context(|| format!("failed to write {}", path.display()))?;
    let cfg = agency_config::Config::load(&path)?;
    if cfg.agents.runtime != "builtin" {
        bail!(
            "failed to set up {} for the scripted model server: its runtime reads {:?} after the change",
            path.display(),
            cfg.agents.runtime
        );
    }
    Ok(())
}

/// The generated configuration with `[agents] runtime`, `[agents.builtin]
/// upstream` and `model` set, and a `[models.local]` appended. Each key
/// must be found exactly once where the template has it.
fn offline_config(text: &str, url: &str) -> Result<String> {
    let wanted: [(&str, &str, String); 3] = [
        ("[agents]", "runtime", "runtime = \"builtin\"".to_owned()),
        (
            "[agents.builtin]",
            "upstream",
            format!(
                "upstream = \"{UPSTREAM}\"       # [models.{UPSTREAM}] below: the scripted model server"
            ),
        ),
        (
            "[agents.builtin]",
            "model",
            "model = \"scripted\"         # any name: the scripted server plays every model"
                .to_owned(),
        ),
    ];
    let mut found = [0usize; 3];
    let mut section = String::new();
    let mut out = String::with_capacity(text.len() + 256);
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with('[') {
            section = t
                .split(']')
                .next()
                .map(|s| format!("{s}]"))
                .unwrap_or_default();
        }
        let key = t.split('=').next().unwrap_or_default().trim();
        let hit = (!t.starts_with('#') && t.contains('='))
            .then(|| {
                wanted
                    .iter()
                    .position(|(s, k, _)| *s == section && *k == key)
            })
            .flatten();
        match hit {
            Some(i) => {
                found[i] += 1;
                out.push_str(&wanted[i].2);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    if text.contains(&format!("[models.{UPSTREAM}]")) {
        bail!("it already has a [models.{UPSTREAM}]");
    }
    for (i, n) in found.iter().enumerate() {
        if *n != 1 {
            let (s, k, _) = &wanted[i];
            bail!("its {s} {k} was found {n} times, not once");
        }
    }
    out.push_str(&format!(
        "\n# The scripted model server (`agency model-server --script FILE`), for\n# offline runs: it plays an LLM from a script and needs no key.\n[models.{UPSTREAM}]\napi = \"anthropic\"\nbase_url = \"{url}\"\n"
    ));
    Ok(out)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_checked() {
        assert_eq!(
            check_url("http://127.0.0.1:40123/").unwrap(),
            "http://127.0.0.1:40123"
        );
        for bad in [
            "127.0.0.1:4000",
            "ftp://x",
            "http://u:p@h:1",
            "http://h:1/v1",
            "http://h:1/?a=\"b",
        ] {
            let e = check_url(bad).unwrap_err().to_string();
            assert!(
                e.contains("failed to use") && e.contains("agency model-server"),
                "{e}"
            );
        }
    }

    #[test]
    fn keys_are_set_in_their_sections_only() {
        let t = "[agents]\nruntime = \"none\"\n[agents.command]\nupstream = \"\"\n[agents.builtin]\nupstream = \"\"  # c\nmodel = \"\"\n[agents.claude_code]\nmodel = \"\"\n";
        let out = offline_config(t, "http://127.0.0.1:9").unwrap();
        assert!(out.contains("[agents]\nruntime = \"builtin\"\n"), "{out}");
        assert!(out.contains("[agents.command]\nupstream = \"\"\n"), "{out}");
        assert!(
            out.contains("[agents.claude_code]\nmodel = \"\"\n"),
            "{out}"
        );
        assert!(out.contains("upstream = \"local\""), "{out}");
        assert!(
            out.ends_with(
                "[models.local]\napi = \"anthropic\"\nbase_url = \"http://127.0.0.1:9\"\n"
            )
        );
        let e = offline_config("[agents]\n", "http://h")
            .unwrap_err()
            .to_string();
        assert!(e.contains("runtime was found 0 times"), "{e}");
    }
}
