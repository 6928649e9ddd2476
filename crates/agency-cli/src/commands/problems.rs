//! `agency problems`: the stuck signals Agency found and what to do about
//! each — open ones by default, the latest episodes with `--all`.

use std::process::ExitCode;

use agency_api::Problem;
use anyhow::Result;

use super::{Ctx, show};
use crate::output::layout::ago;
use crate::safe_text;

pub fn problems(ctx: &Ctx, all: bool) -> Result<ExitCode> {
    let c = ctx.client()?;
    let mut url = c.url(&["problems"]);
    if all {
        url.query_pairs_mut().append_pair("all", "true");
    }
    let v = c.get(url)?;
    show(ctx, v, "problems", |ps: &Vec<Problem>| render(ps, all))?;
    Ok(ExitCode::SUCCESS)
}

fn render(ps: &[Problem], all: bool) -> String {
    if ps.is_empty() {
        return if all {
            "no problems were ever found\n".to_owned()
        } else {
            "no open problems\n".to_owned()
        };
    }
    let mut out = String::new();
    for p in ps {
        let who = match (&p.handler, &p.handler_title) {
            (Some(h), Some(t)) => format!(
                "{} {}",
                h.to_string().chars().take(8).collect::<String>(),
                safe_text::line(t)
            ),
            (Some(h), None) => h.to_string().chars().take(8).collect(),
            (None, _) => "agency".to_owned(),
        };
        let state = match p.closed_at {
            Some(t) => format!("cleared {}", ago(t)),
            None => format!("open since {}", ago(p.opened_at)),
        };
        out.push_str(&format!(
            "#{}  {}  {}  {}\n    {}\n",
            p.id,
            p.kind,
            who,
            state,
            safe_text::line(&p.summary)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use agency_core::Timestamp;

    #[test]
    fn a_problem_reads_as_its_kind_handler_age_and_what_to_do() {
        let p = Problem {
            id: 3,
            kind: "tool_loop".into(),
            handler: Some(agency_core::HandlerId(uuid::Uuid::from_u128(
                0xabcdef12 << 96,
            ))),
            handler_title: Some("Fix \x1b[31mthe build".into()),
            agent: None,
            summary: "agent 1 called kb_read with the same arguments 3 times in a row".into(),
            detail: serde_json::json!({}),
            opened_at: Timestamp(0),
            seen_at: Timestamp(0),
            closed_at: None,
        };
        let text = render(&[p], false);
        assert!(text.starts_with("#3  tool_loop  abcdef12 Fix "), "{text}");
        assert!(!text.contains('\x1b'), "escaped: {text:?}");
        assert!(text.contains("open since"), "{text}");
        assert_eq!(render(&[], false), "no open problems\n");
    }
}
