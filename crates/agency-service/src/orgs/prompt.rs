//! The standing instructions of an organisation's agent:
//! who it is, its agency, its static memory, what it does with a
//! message, its volatile-memory guidance, its tools, whom it may message
//! and how to answer the party that asked. A pure function of the model
//! and the handler ids, so that every agent of a handler gets the same
//! text (the last section of a stable, cache-friendly system prompt) and
//! a re-apply that changes nothing writes nothing.
//!
//! The text comes from the organisation's sources, which the user wrote:
//! unlike mail bodies, it is instructions.

use std::fmt::Write as _;

use agency_core::HandlerId;
use agency_org::{AgencyModel, Agent};

/// How an agent is related to someone it may message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Relation {
    /// Its boss: the agency's executive, or the parent agency's.
    Boss,
    /// An agent reporting to it.
    Underling,
    /// A connection it may message (seed 004), or that may message it and
    /// so may be answered.
    Connection,
}

/// Someone the agent may message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Contact<'a> {
    pub name: &'a str,
    pub title: &'a str,
    pub handler: HandlerId,
    pub relation: Relation,
}

/// Everything the text says, gathered by the caller.
#[derive(Debug, Clone)]
pub(crate) struct StandingFacts<'a> {
    pub org: &'a str,
    pub agency: &'a AgencyModel,
    /// The agency this one is a sub-agency of, if any.
    pub parent_agency: Option<&'a str>,
    pub agent: &'a Agent,
    pub executive: bool,
    pub handler: HandlerId,
    /// `None`: the boss is the root handler (the top executive).
    pub root_handler: Option<HandlerId>,
    /// Boss, underlings and connections, in that order.
    pub contacts: Vec<Contact<'a>>,
    /// (name, description) of each tool it may call.
    pub tools: Vec<(&'a str, &'a str)>,
}

/// The standing instructions (the body of the prompt's "Standing
/// instructions" section; the heading is `agency_core::prompt`'s).
pub(crate) fn standing_text(f: &StandingFacts<'_>) -> String {
    let a = f.agent;
    let mut s = String::new();
    let _ = writeln!(s, "### Who you are\n");
    let _ = write!(
        s,
        "You are {}, \"{}\", an agent of the agency {}",
        a.name, a.title, f.agency.name
    );
    if f.executive {
        let _ = write!(s, ", and its Executive Agent");
    }
    let _ = writeln!(s, " (organisation {}).", f.org);
    if !a.description.trim().is_empty() {
        let _ = writeln!(s, "{}", a.description.trim());
    }
    let _ = writeln!(
        s,
        "Your Handler is {h}. Its root Outcome {h} is perpetual: it stands for your role, is never completed, and you never request its completion. You have work when mail arrives (and for the outcomes you create); when every message is answered and acknowledged and nothing you started is open, update your state document and stop: you are started again when the next message arrives.",
        h = f.handler
    );

    let _ = writeln!(s, "\n### Your agency: {}\n", f.agency.name);
    if !f.agency.description.trim().is_empty() {
        let _ = writeln!(s, "Purpose: {}", f.agency.description.trim());
    }
    if let Some(p) = f.parent_agency {
        let _ = writeln!(s, "It is a sub-agency of {p}.");
    }
    let exec = &f.agency.executive_agent;
    if f.executive {
        let _ = writeln!(
            s,
            "As its Executive Agent you receive the agency's messages: coordinate its agents and tools, and compile the final answer."
        );
    } else {
        let _ = writeln!(s, "Its Executive Agent is {exec}.");
    }
    bullets(
        &mut s,
        "The agency's static memory:",
        &f.agency.static_memory,
    );

    if !a.static_memory.is_empty() {
        let _ = writeln!(s, "\n### Your static memory\n");
        for line in &a.static_memory {
            let _ = writeln!(s, "- {line}");
        }
    }

    let _ = writeln!(s, "\n### When a message arrives\n");
    if a.behavior.on_message.is_empty() {
        let _ = writeln!(
            s,
            "1. Decide what the party that asked needs.\n2. Do it: yourself, with your tools, or by asking the agents you may message.\n3. Answer the party that asked."
        );
    } else {
        for (i, step) in a.behavior.on_message.iter().enumerate() {
            let _ = writeln!(s, "{}. {step}", i + 1);
        }
    }

    let _ = writeln!(s, "\n### Your volatile memory\n");
    let _ = writeln!(
        s,
        "Your volatile memory is your state document (state_read, state_write) and your memories (memory_store, memory_search, memory_forget): both persist across your agents and restarts, and you alone change them. The memories most relevant to your waiting mail are shown to you when you start."
    );
    bullets(&mut s, "Keep in it:", &a.memory.guidance);

    let _ = writeln!(s, "\n### Your tools\n");
    if f.tools.is_empty() {
        let _ = writeln!(
            s,
            "None of the organisation's tools: ask the agents you may message."
        );
    } else {
        for (name, desc) in &f.tools {
            let desc = desc.trim();
            if desc.is_empty() {
                let _ = writeln!(s, "- {name} (an MCP tool of that name)");
            } else {
                let _ = writeln!(s, "- {name}: {desc} (an MCP tool of that name)");
            }
        }
    }

    let _ = writeln!(s, "\n### Whom you may message\n");
    if let Some(root) = f.root_handler {
        let _ = writeln!(
            s,
            "- Your boss: the root handler {root}, which stands between the user and the organisation."
        );
    }
    for c in &f.contacts {
        let what = match c.relation {
            Relation::Boss => "Your boss",
            Relation::Underling => "Reports to you",
            Relation::Connection => "Connection",
        };
        let _ = writeln!(
            s,
            "- {what}: {} (\"{}\"), handler {}",
            c.name, c.title, c.handler
        );
    }
    let _ = writeln!(
        s,
        "\nAddress them with mail_send to their handler UUID (your boss also as \"boss\"). Nobody else: a message to another agent is refused, since lateral messages exist only where a connection grants them. To reach an agent you may not message, ask your boss."
    );

    let _ = writeln!(s, "\n### Answering the party that asked\n");
    let _ = writeln!(
        s,
        "- A message from the user (sender \"user\"; this is also how the agency's API delivers messages from outside) is answered with mail_send to \"user\", with in_reply_to set to that message's id."
    );
    let _ = writeln!(
        s,
        "- A request from another agent is answered with mail_send to that agent's handler UUID, with in_reply_to set to the request's id."
    );
    let _ = writeln!(
        s,
        "- Answer every request exactly once, with the final answer (or why there is none), then acknowledge it with mail_ack. When you need another agent's answer first, ask it, note the open request in your state document, acknowledge what you have triaged and stop: its answer arrives as mail and starts you again."
    );
    s
}

fn bullets(s: &mut String, head: &str, lines: &[String]) {
    if lines.is_empty() {
        return;
    }
    let _ = writeln!(s, "{head}");
    for l in lines {
        let _ = writeln!(s, "- {l}");
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn model() -> AgencyModel {
        serde_json::from_value(serde_json::json!({
            "name": "WeatherAgency",
            "type": "Agency",
            "description": "Provide weather updates to users and greet them politely.",
            "staticMemory": ["We are WeatherAgency."],
            "executiveAgent": "FrontDeskAgent",
            "agents": [
                {"name": "FrontDeskAgent", "title": "Front Desk",
                 "staticMemory": ["Always greet the user politely."],
                 "behavior": {"onMessage": ["Decide if the user is just greeting.",
                    "If they want weather information, pass the request to WeatherAgent.",
                    "Return a final response."]},
                 "memory": {"guidance": ["User preferences (e.g. location)."]},
                 "source": {"file": "FrontDeskAgent.agent", "line": 1}},
                {"name": "WeatherAgent", "title": "Weather Assistant",
                 "tools": ["WeatherTool"],
                 "source": {"file": "WeatherAgent.agent", "line": 1}}
            ],
            "source": {"file": "WeatherAgency.agency", "line": 1}
        }))
        .unwrap()
    }

    #[test]
    fn issue12_item7_the_text_says_who_what_whom_and_how_to_answer() {
        let m = model();
        let front = &m.agents[0];
        let weather = &m.agents[1];
        let (h, root, w) = (
            HandlerId::new_random(),
            HandlerId::new_random(),
            HandlerId::new_random(),
        );
        let facts = StandingFacts {
            org: "WeatherAgency",
            agency: &m,
            parent_agency: None,
            agent: front,
            executive: true,
            handler: h,
            root_handler: Some(root),
            contacts: vec![Contact {
                name: &weather.name,
                title: &weather.title,
                handler: w,
                relation: Relation::Underling,
            }],
            tools: vec![],
        };
        let t = standing_text(&facts);
        for want in [
            "You are FrontDeskAgent, \"Front Desk\", an agent of the agency WeatherAgency, and its Executive Agent",
            "Purpose: Provide weather updates to users and greet them politely.",
            "- We are WeatherAgency.",
            "- Always greet the user politely.",
            "1. Decide if the user is just greeting.",
            "3. Return a final response.",
            "- User preferences (e.g. location).",
            &format!("- Reports to you: WeatherAgent (\"Weather Assistant\"), handler {w}"),
            &format!("the root handler {root}"),
            "mail_send to \"user\", with in_reply_to set to that message's id",
            "mail_send to that agent's handler UUID, with in_reply_to set to the request's id",
            "never request its completion",
        ] {
            assert!(t.contains(want), "missing {want:?} in:\n{t}");
        }
        // A pure function: the same facts give the same bytes.
        assert_eq!(t, standing_text(&facts));

        // The worker: not the executive, with a tool and a boss; the
        // default behaviour when the source gives none.
        let facts = StandingFacts {
            agent: weather,
            executive: false,
            handler: w,
            root_handler: None,
            contacts: vec![Contact {
                name: &front.name,
                title: &front.title,
                handler: h,
                relation: Relation::Boss,
            }],
            tools: vec![("WeatherTool", "Calls the weather API.")],
            ..facts
        };
        let t = standing_text(&facts);
        assert!(t.contains("Its Executive Agent is FrontDeskAgent."));
        assert!(t.contains("- WeatherTool: Calls the weather API."));
        assert!(t.contains(&format!(
            "- Your boss: FrontDeskAgent (\"Front Desk\"), handler {h}"
        )));
        assert!(t.contains("3. Answer the party that asked."));
        assert!(!t.contains("root handler"), "{t}");
        assert!(
            !t.contains("### Your static memory"),
            "no empty section: {t}"
        );
    }
}
