//! `agency up PATH [--plan]`, `agency down NAME` and `agency orgs`
//! (REST `POST /v1/orgs[?plan=true]`, `DELETE
//! /v1/orgs/{name}`, `GET /v1/orgs`): stand an organisation's Agency Model
//! up under the root handler, retire it, list what is applied.

use std::path::Path;
use std::process::ExitCode;

use agency_api::{AgentAction, CapAction, OrgDown, OrgPlan, OrgView};
use agency_org::AgencyModel;
use anyhow::{Context, Result, bail};

use super::org_assist::{AssistArgs, ModelAssist};
use super::{Ctx, emit, emit_json, show};
use crate::safe_text::line;

/// The model at `path`: a compiled Agency Model (`.json`), or a folder of
/// sources to compile (with `assist`, if given).
pub fn load_model(path: &Path, assist: Option<&ModelAssist>) -> Result<AgencyModel> {
    if path.is_dir() {
        // A folder that fails to compile changes nothing: the daemon is
        // not asked at all.
        let Some(compiled) = super::org_compile::build(path, assist)? else {
            bail!(
                "failed to stand up {}: its sources do not compile (the errors are above); nothing was changed",
                path.display()
            );
        };
        let mut model = compiled.model;
        let root = std::fs::canonicalize(path)
            .with_context(|| format!("failed to resolve {}", path.display()))?;
        locate_command_tools(&mut model, &root);
        return Ok(model);
    }
    if assist.is_some() {
        bail!(
            "failed to stand up {}: --assist places source text, and a compiled model has none; leave --assist out, or give the source folder",
            path.display()
        );
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("failed to read the Agency Model {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "failed to read the Agency Model {}: not a valid model; compile the sources again",
            path.display()
        )
    })
}

/// Give every command tool the absolute folder it was defined in, where
/// it runs (`CommandTool::dir`): a compiled model names its sources
/// relative to their folder, and the daemon cannot know where that was.
fn locate_command_tools(model: &mut AgencyModel, root: &Path) {
    for t in &mut model.tools {
        if let agency_org::ToolImplementation::Command(c) = &mut t.implementation {
            let file = root.join(&t.source.file);
            let dir = file.parent().unwrap_or(root);
            c.dir = Some(dir.display().to_string());
        }
    }
    for s in &mut model.sub_agencies {
        locate_command_tools(s, root);
    }
}

pub fn up(ctx: &Ctx, path: &Path, plan: bool, assist: &AssistArgs) -> Result<ExitCode> {
    let assist = super::org_assist::from_args(assist, Some(ctx.home.dir().to_owned()))?;
    let model = load_model(path, assist.as_ref())?;
    let c = ctx.client()?;
    let mut url = c.url(&["orgs"]);
    if plan {
        url.query_pairs_mut().append_pair("plan", "true");
    }
    let v = c.post(url, &model)?;
    show(ctx, v, "organisation plan", plan_text)?;
    Ok(ExitCode::SUCCESS)
}

pub fn down(ctx: &Ctx, name: &str) -> Result<ExitCode> {
    let c = ctx.client()?;
    let v = c.delete(c.url(&["orgs", name]))?;
    show(ctx, v, "organisation report", |d: &OrgDown| {
        format!(
            "organisation {} is down: {} handlers retired, {} agents stopped; `agency up` brings it back\n",
            line(&d.org),
            d.handlers.len(),
            d.agents_to_kill.len()
        )
    })?;
    Ok(ExitCode::SUCCESS)
}

pub fn orgs(ctx: &Ctx) -> Result<ExitCode> {
    let c = ctx.client()?;
    let v = c.get(c.url(&["orgs"]))?;
    if ctx.json {
        emit_json(&v)?;
        return Ok(ExitCode::SUCCESS);
    }
    let list: Vec<OrgView> = crate::client::decode(v, "organisation list")?;
    emit(&orgs_text(&list))?;
    Ok(ExitCode::SUCCESS)
}

fn orgs_text(list: &[OrgView]) -> String {
    if list.is_empty() {
        return "no organisation is applied; stand one up with `agency up`\n".to_owned();
    }
    let mut out = String::new();
    for o in list {
        let state = match (o.retired_at, &o.paused) {
            (Some(_), _) => "down".to_owned(),
            (None, Some(p)) => format!("up, paused by the budget of handler {}", p.by),
            (None, None) => "up".to_owned(),
        };
        out.push_str(&format!(
            "{} ({state}), executive handler {}\n",
            line(&o.name),
            o.executive
        ));
        let rows = o
            .agents
            .iter()
            .map(|a| {
                vec![
                    a.agent.clone(),
                    a.title.clone(),
                    a.agency.clone(),
                    if a.executive {
                        "yes".into()
                    } else {
                        String::new()
                    },
                    match (&a.paused, a.status) {
                        (Some(p), agency_core::status::OrgAgentStatus::Active) => {
                            crate::output::paused::paused_label(p).to_owned()
                        }
                        (_, s) => format!("{s:?}").to_lowercase(),
                    },
                    a.handler.to_string(),
                ]
            })
            .collect();
        out.push_str(&crate::output::table(
            &["AGENT", "TITLE", "AGENCY", "EXECUTIVE", "STATUS", "HANDLER"],
            rows,
        ));
    }
    if list
        .iter()
        .any(|o| o.retired_at.is_none() && o.paused.is_some())
    {
        out.push_str(crate::output::PAUSED_NOTE);
    }
    out
}

fn plan_text(p: &OrgPlan) -> String {
    let mut out = String::new();
    let head = match (p.plan_only, p.changed) {
        (_, false) => format!(
            "organisation {}: up to date, nothing to change\n",
            line(&p.org)
        ),
        (true, true) => format!(
            "organisation {}: would change (nothing written; apply without --plan)\n",
            line(&p.org)
        ),
        (false, true) => format!("organisation {}: applied\n", line(&p.org)),
    };
    out.push_str(&head);
    for w in &p.warnings {
        out.push_str(&format!("warning: {}\n", line(w)));
    }
    let rows = p
        .agents
        .iter()
        .map(|a| {
            let action = match a.action {
                AgentAction::Create => "create",
                AgentAction::Update => "update",
                AgentAction::Unchanged => "unchanged",
                AgentAction::Reactivate => "reactivate",
                AgentAction::Retire => "retire",
            };
            vec![
                a.agent.clone(),
                a.agency.clone(),
                action.to_owned(),
                a.fields.join(", "),
                a.handler.map(|h| h.to_string()).unwrap_or_default(),
            ]
        })
        .collect();
    out.push_str(&crate::output::table(
        &["AGENT", "AGENCY", "ACTION", "FIELDS", "HANDLER"],
        rows,
    ));
    if !p.capabilities.is_empty() {
        let rows = p
            .capabilities
            .iter()
            .map(|c| {
                vec![
                    match c.change {
                        CapAction::Added => "+".to_owned(),
                        CapAction::Removed => "-".to_owned(),
                    },
                    if c.holder.is_empty() {
                        "(root handler)".to_owned()
                    } else {
                        c.holder.clone()
                    },
                    c.resource.clone(),
                    c.level.to_string(),
                    c.why.clone(),
                ]
            })
            .collect();
        out.push_str(&crate::output::table(
            &["", "HOLDER", "CAPABILITY", "LEVEL", "WHY"],
            rows,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn issue12_item5_a_folder_names_the_compiler_and_a_bad_file_names_itself() {
        let dir = tempfile::tempdir().unwrap();
        let e = load_model(dir.path(), None).unwrap_err().to_string();
        assert!(
            e.contains("do not compile") && e.contains("nothing was changed"),
            "{e}"
        );
        let f = dir.path().join("model.json");
        std::fs::write(&f, "{\"name\": 1}").unwrap();
        let e = format!("{:#}", load_model(&f, None).unwrap_err());
        assert!(
            e.contains("model.json") && e.contains("not a valid model"),
            "{e}"
        );
    }
}
