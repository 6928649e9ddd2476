//! A verb's contract as the service reads it: the callee's verb found in
//! the organisation model last applied (the `orgs` row holds it), and a
//! value checked against one of its schemas with machine-readable issues.

use agency_api::SchemaIssue;
use agency_core::HandlerId;
use agency_org::Verb;
use agency_store::{OrgAgentRow, Tx};
use serde_json::Value;

use crate::Result;
use crate::error::ServiceError;

/// Most issues one refusal lists: an answer may break a schema in many
/// places, and the agent acts on the first few.
pub(crate) const MAX_ISSUES: usize = 20;

/// Most characters of one issue's message (the validator quotes the
/// offending value, which may be large).
const MAX_MESSAGE_CHARS: usize = 300;

/// The callee of a call: its organisation row and the verb it offers.
pub(crate) struct Contract {
    pub agent: OrgAgentRow,
    pub verb: Verb,
}

/// The verbs of the organisation agent standing as `handler`; `None` when
/// it is no organisation's agent (or its organisation is down).
pub(crate) fn verbs_of(
    tx: &mut dyn Tx,
    handler: HandlerId,
) -> Result<Option<(OrgAgentRow, Vec<Verb>)>> {
    let Some(row) = tx.org_agent_by_handler(handler)? else {
        return Ok(None);
    };
    let Some(org) = tx.org(&row.org)?.filter(|o| o.retired_at.is_none()) else {
        return Ok(None);
    };
    let model: agency_org::AgencyModel = serde_json::from_str(&org.model_json).map_err(|e| {
        ServiceError::Store(agency_store::StoreError::corrupt(
            "organisation model",
            format!("organisation {}: {e}", org.name),
        ))
    })?;
    let verbs = model
        .all_agents()
        .into_iter()
        .find(|(_, a)| a.name == row.agent)
        .map(|(_, a)| a.verbs.clone())
        .unwrap_or_default();
    Ok(Some((row, verbs)))
}

/// The contract of `verb` of the agent standing as `handler`, or a
/// not-found error naming the verbs it has.
pub(crate) fn contract(tx: &mut dyn Tx, handler: HandlerId, verb: &str) -> Result<Contract> {
    let Some((agent, verbs)) = verbs_of(tx, handler)? else {
        return Err(ServiceError::invalid(format!(
            "failed to call verb `{verb}` of handler {handler}: it is no standing organisation agent, so it has no verbs; send it mail instead"
        )));
    };
    let names: Vec<&str> = verbs.iter().map(|v| v.name.as_str()).collect();
    let has = if names.is_empty() {
        "it declares no verbs".to_owned()
    } else {
        format!("its verbs are {}", names.join(", "))
    };
    match verbs.iter().find(|v| v.name == verb) {
        Some(found) => Ok(Contract {
            verb: found.clone(),
            agent,
        }),
        None => Err(ServiceError::NotFound {
            what: "verb",
            id: format!("`{verb}` of agent {} ({has})", agent.agent),
        }),
    }
}

/// Check `value` against `schema`; the issues when it does not match.
pub(crate) fn check(schema: &Value, value: &Value) -> std::result::Result<(), Vec<SchemaIssue>> {
    // The schema compiled when the organisation did; one that no longer
    // compiles (a stored model from elsewhere) refuses every value.
    let validator = match agency_org::pipeline::schemas::validator(schema) {
        Ok(v) => v,
        Err(e) => {
            return Err(vec![SchemaIssue {
                instance_path: String::new(),
                keyword: "$schema".into(),
                message: format!("the verb's schema does not compile: {e}"),
            }]);
        }
    };
    let issues: Vec<SchemaIssue> = validator
        .iter_errors(value)
        .take(MAX_ISSUES)
        .map(|e| {
            let mut message = e.to_string();
            if message.chars().count() > MAX_MESSAGE_CHARS {
                message = message.chars().take(MAX_MESSAGE_CHARS).collect::<String>() + "…";
            }
            SchemaIssue {
                instance_path: e.instance_path().to_string(),
                keyword: e.kind().keyword().to_owned(),
                message,
            }
        })
        .collect();
    if issues.is_empty() {
        Ok(())
    } else {
        Err(issues)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn issues_name_the_path_and_keyword() {
        let schema = json!({"type": "object", "required": ["text"],
            "properties": {"text": {"type": "string"}, "n": {"type": "integer", "minimum": 1}}});
        let cases = [
            (json!({"text": "hi"}), vec![]),
            (json!({}), vec![("", "required")]),
            (json!({"text": 3}), vec![("/text", "type")]),
            (json!({"text": "x", "n": 0}), vec![("/n", "minimum")]),
            (json!([]), vec![("", "type")]),
        ];
        for (value, want) in cases {
            let got: Vec<(String, String)> = match check(&schema, &value) {
                Ok(()) => vec![],
                Err(issues) => issues
                    .into_iter()
                    .map(|i| (i.instance_path, i.keyword))
                    .collect(),
            };
            let want: Vec<(String, String)> = want
                .into_iter()
                .map(|(p, k)| (p.to_owned(), k.to_owned()))
                .collect();
            assert_eq!(got, want, "{value}");
        }
    }
}
