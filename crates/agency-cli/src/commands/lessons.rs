//! `agency lessons`: what pipelines learned (REST `/v1/lessons`), and the
//! user's control over it. Text the Learners wrote is printed through
//! `safe_text`, never as terminal control sequences.

use std::process::ExitCode;

use agency_api::{LessonDetail, LessonView};
use anyhow::Result;
use serde_json::json;

use super::{Ctx, emit_json, show};
use crate::cli::{LessonsCommand, LessonsListArgs};
use crate::client::IdKind;
use crate::output::table;
use crate::safe_text::{block, line};

pub fn run(ctx: &Ctx, c: LessonsCommand) -> Result<ExitCode> {
    let client = ctx.client()?;
    let one = |arg: &str| client.resolve(IdKind::Lesson, arg);
    match c {
        LessonsCommand::List(a) => list(ctx, &a),
        LessonsCommand::Show(a) => {
            let id = one(&a.lesson)?;
            let v = client.get(client.url(&["lessons", &id]))?;
            show(ctx, v, "lesson", detail_text)?;
            Ok(ExitCode::SUCCESS)
        }
        LessonsCommand::Approve(a) => {
            let id = one(&a.lesson)?;
            let v = client.post(client.url(&["lessons", &id, "approve"]), &json!({}))?;
            show(ctx, v, "lesson", |l: &LessonView| changed(l))?;
            Ok(ExitCode::SUCCESS)
        }
        LessonsCommand::Reject(a) | LessonsCommand::Retire(a) if a.reason.trim().is_empty() => {
            anyhow::bail!(
                "failed to change lesson {}: give a reason (--reason …)",
                a.lesson
            )
        }
        LessonsCommand::Reject(a) => {
            let id = one(&a.lesson)?;
            let v = client.post(
                client.url(&["lessons", &id, "reject"]),
                &json!({ "reason": a.reason }),
            )?;
            show(ctx, v, "lesson", |l: &LessonView| changed(l))?;
            Ok(ExitCode::SUCCESS)
        }
        LessonsCommand::Retire(a) => {
            let id = one(&a.lesson)?;
            let v = client.post(
                client.url(&["lessons", &id, "retire"]),
                &json!({ "reason": a.reason }),
            )?;
            show(ctx, v, "lesson", |l: &LessonView| changed(l))?;
            Ok(ExitCode::SUCCESS)
        }
        LessonsCommand::Rollback(a) => {
            let id = one(&a.lesson)?;
            let v = client.post(
                client.url(&["lessons", &id, "rollback"]),
                &json!({ "to": a.to }),
            )?;
            show(ctx, v, "lesson", |l: &LessonView| changed(l))?;
            Ok(ExitCode::SUCCESS)
        }
        LessonsCommand::Export(a) => {
            let mut url = client.url(&["lessons", "export"]);
            if let Some(p) = &a.pipeline {
                url.query_pairs_mut().append_pair("pipeline", p);
            }
            // JSON whatever the output mode: an export is for keeping.
            emit_json(&client.get(url)?)?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn list(ctx: &Ctx, a: &LessonsListArgs) -> Result<ExitCode> {
    let c = ctx.client()?;
    let mut url = c.url(&["lessons"]);
    if let Some(p) = &a.pipeline {
        url.query_pairs_mut().append_pair("pipeline", p);
    }
    if let Some(s) = &a.state {
        url.query_pairs_mut().append_pair("state", s);
    }
    if let Some(n) = a.limit {
        url.query_pairs_mut().append_pair("limit", &n.to_string());
    }
    let v = c.get(url)?;
    show(ctx, v, "lessons", |ls: &Vec<LessonView>| {
        if ls.is_empty() {
            return "no lessons\n".to_owned();
        }
        let rows = ls
            .iter()
            .map(|l| {
                vec![
                    l.id.to_string()[..8].to_owned(),
                    line(&l.pipeline),
                    l.state.as_str().to_owned(),
                    format!("v{}", l.version),
                    format!(
                        "{}/{}/{}",
                        l.counters.recalled, l.counters.helpful, l.counters.harmful
                    ),
                    line(&l.title),
                ]
            })
            .collect();
        table(
            &[
                "LESSON",
                "PIPELINE",
                "STATE",
                "VERSION",
                "RECALLED/HELPFUL/HARMFUL",
                "TITLE",
            ],
            rows,
        )
    })?;
    Ok(ExitCode::SUCCESS)
}

fn changed(l: &LessonView) -> String {
    let mut out = format!(
        "lesson {} ({}) is {} at version {}\n",
        l.id,
        line(&l.title),
        l.state.as_str(),
        l.version
    );
    if let Some(r) = &l.reason {
        out.push_str(&format!("  reason: {}\n", line(r)));
    }
    out
}

fn detail_text(d: &LessonDetail) -> String {
    let l = &d.lesson;
    let mut out = changed(l);
    out.push_str(&format!(
        "  pipeline {}; scope {} {}\n  when: {}\n  advice: {}\n",
        line(&l.pipeline),
        line(&l.scope.kind),
        line(&l.scope.name),
        line(&l.trigger),
        line(&l.advice)
    ));
    if let Some(c) = &l.counterexample {
        out.push_str(&format!("  counterexample: {}\n", line(c)));
    }
    let c = l.counters;
    out.push_str(&format!(
        "  recalled by {} run(s); {} scored: helpful {}, harmful {}\n",
        c.recalled, c.used, c.helpful, c.harmful
    ));
    let runs: Vec<String> = l.supporting_runs.iter().map(|r| r.to_string()).collect();
    out.push_str(&format!(
        "  learned from {} run(s): {}\n",
        runs.len(),
        if runs.is_empty() {
            "-".to_owned()
        } else {
            runs.join(", ")
        }
    ));
    out.push_str("\nhistory:\n");
    for e in &d.history {
        let run = e
            .run
            .map(|r| format!(" run {}", &r.to_string()[..8]))
            .unwrap_or_default();
        let why = e
            .detail
            .get("reason")
            .and_then(|r| r.as_str())
            .map(|r| format!(": {}", line(r)))
            .unwrap_or_default();
        out.push_str(&format!(
            "  {}  v{}  {}{run}{why}\n",
            crate::output::layout::ago(e.at),
            e.version,
            e.action
        ));
    }
    out.push_str("\nversions:\n");
    for v in &d.versions {
        let state = v
            .content
            .get("state")
            .and_then(|s| s.as_str())
            .unwrap_or("?");
        let advice = v
            .content
            .get("advice")
            .and_then(|s| s.as_str())
            .unwrap_or("");
        out.push_str(&format!("  v{}  {state}  {}\n", v.version, line(advice)));
    }
    block(&out)
}
