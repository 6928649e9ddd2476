//! Pinned tool definitions of extra MCP servers: the
//! defence against a "rug pull", a server that changes what a tool says it
//! does after it was trusted.
//!
//! Each tool a server lists is reduced to its definition — name, title,
//! description, input schema, output schema, annotations — as canonical
//! JSON (object keys sorted, no whitespace), hashed with BLAKE3. The first
//! complete listing of a server pins every tool it shows. From then on:
//! - a tool whose definition differs from its pinned one is *quarantined*:
//!   withheld from the listing agents see and refused when called, until
//!   the user approves the change ([`Service::mcp_pin_approve`]);
//! - a tool that appears after the first listing is quarantined the same
//!   way (a new tool is as good a vehicle for injected instructions as a
//!   changed one), its change having no old definition;
//! - a tool shown again with its approved definition is usable again (a
//!   pending change stays in the user's list until decided).
//!
//! Each definition that differs is a change with an id (a UUID), recorded
//! once per (tool, approved definition, new definition). Only the user
//! sees and decides changes; agents only report listings and ask whether a
//! tool may be called, and only for servers their handler holds a
//! capability on.

use agency_api::EventKind;
use agency_core::{HandlerId, Level, MailTarget, Principal, Resource, Timestamp};
use agency_store::{McpPinChangeRow, McpPinRow, PinChangeStatus, Tx};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::Result;
use crate::error::ServiceError;
use crate::event_log::Record;
use crate::service::{Caller, Op, Service, authenticate};
pub use agency_api::{McpPinChange, McpPinView, McpPinsReport};

/// What the listing an agent reported does with one of its tools.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "verdict", rename_all = "snake_case")]
pub enum PinVerdict {
    /// The definition is the approved one (or was just pinned).
    Allowed,
    /// Withheld: the definition differs from the approved one, the tool is
    /// new since the first listing, or the listing is malformed.
    Quarantined {
        /// The change the user decides (none for a malformed tool).
        change: Option<String>,
        /// Whether this listing recorded the change (first sight).
        new: bool,
        reason: String,
    },
}

/// How many changes a listing of pending ones shows at most.
const MAX_PENDING: usize = 1000;

impl Service {
    /// An agent's launcher (or the daemon's HTTP proxy, for the agent)
    /// reports a `tools/list` page of MCP server `server`: pin what is
    /// new while the first listing lasts, record changes, and say per tool
    /// (in order) whether agents may see it. `complete`: the page was the
    /// listing's last (no `nextCursor`); the first complete listing seals
    /// the server's pins.
    pub fn mcp_tools_seen(
        &self,
        who: Principal,
        server: &str,
        tools: &[Value],
        complete: bool,
    ) -> Result<Vec<PinVerdict>> {
        agency_core::validate::check_name("mcp server", server)?;
        let defs: Vec<Option<(String, String)>> = tools
            .iter()
            .map(|t| definition(t).map(|(n, d)| (n, canonical_json(&d))))
            .collect();
        self.write(|op| {
            let caller = authenticate(op.tx, who)?;
            may_use(op.tx, &caller, server, "report the tools of")?;
            let sealed = op.tx.mcp_pin_sealed(server)?;
            let mut seen = std::collections::BTreeSet::new();
            let mut out = Vec::with_capacity(defs.len());
            for def in &defs {
                let Some((name, canon)) = def else {
                    out.push(malformed("a tool without a name"));
                    continue;
                };
                if !seen.insert(name.clone()) {
                    out.push(malformed(&format!("tool {name} is listed twice")));
                    continue;
                }
                let verdict =
                    pin_one(op.tx, op.now, caller.handler(), server, name, canon, sealed)?;
                if let PinVerdict::Quarantined {
                    change: Some(id),
                    new: true,
                    ..
                } = &verdict
                {
                    quarantine_mail(op, &caller, server, name, id)?;
                }
                out.push(verdict);
            }
            if complete && !sealed {
                op.tx.mcp_pin_seal(server, op.now)?;
            }
            Ok(out)
        })
    }

    /// Whether the calling agent may call `tool` of MCP server `server` as
    /// far as pinning goes: the tool was listed and its definition last
    /// seen is the approved one; and what that definition says of itself.
    pub fn mcp_tool_check(&self, who: Principal, server: &str, tool: &str) -> Result<PinnedTool> {
        agency_core::validate::check_name("mcp server", server)?;
        self.read(|tx| {
            let caller = authenticate(tx, who)?;
            may_use(tx, &caller, server, "call a tool of")?;
            let Some(pin) = tx.mcp_pin(server, tool)? else {
                return Err(ServiceError::denied(format!(
                    "failed to call tool {tool} of MCP server {server}: the server has not listed such a tool; list the tools (tools/list) and call one of those"
                )));
            };
            if pin.approved_hash.as_deref() == Some(pin.seen_hash.as_str()) {
                return Ok(PinnedTool::of(pin.approved_def.as_deref()));
            }
            let change = tx.mcp_pin_open_change(
                server,
                tool,
                &pin.seen_hash,
                pin.approved_hash.as_deref(),
            )?;
            Err(ServiceError::denied(quarantine_message(
                server,
                tool,
                pin.approved_hash.is_none(),
                change.as_ref(),
            )))
        })
    }

    /// The user: every pinned tool and the changes waiting for a decision.
    pub fn mcp_pins(&self, who: Principal) -> Result<McpPinsReport> {
        self.read(|tx| {
            user_only(tx, who, "list the pinned MCP tools")?;
            let pins = tx
                .mcp_pins(None)?
                .into_iter()
                .map(|p| McpPinView {
                    state: if p.approved_hash.as_deref() == Some(p.seen_hash.as_str()) {
                        agency_api::PinState::Approved
                    } else {
                        agency_api::PinState::Quarantined
                    },
                    server: p.server,
                    tool: p.tool,
                    approved_hash: p.approved_hash,
                    approved_at: p.approved_at,
                    seen_hash: p.seen_hash,
                    seen_at: p.seen_at,
                })
                .collect();
            let pending = tx
                .mcp_pin_changes(Some(PinChangeStatus::Pending), None, MAX_PENDING)?
                .into_iter()
                .map(view)
                .collect::<Result<_>>()?;
            Ok(McpPinsReport { pins, pending })
        })
    }

    /// The user: one change, with both definitions.
    pub fn mcp_pin_change(&self, who: Principal, id: &str) -> Result<McpPinChange> {
        self.read(|tx| {
            user_only(tx, who, &format!("read MCP tool change {id}"))?;
            let row = tx
                .mcp_pin_change(id)?
                .ok_or_else(|| ServiceError::not_found("MCP tool change", id))?;
            view(row)
        })
    }

    /// The change waiting for a decision on the definition a tool now
    /// presents (what `agency mcp approve-tool SERVER TOOL` approves).
    pub fn mcp_pin_change_of_tool(
        &self,
        who: Principal,
        server: &str,
        tool: &str,
    ) -> Result<McpPinChange> {
        self.read(|tx| {
            user_only(tx, who, &format!("read the changes of MCP tool {server}/{tool}"))?;
            let none = || {
                ServiceError::invalid(format!(
                    "failed to find a change of tool {tool} of MCP server {server} to decide: the tool is not quarantined; `agency mcp pins` lists what is"
                ))
            };
            let pin = tx.mcp_pin(server, tool)?.ok_or_else(none)?;
            if pin.approved_hash.as_deref() == Some(pin.seen_hash.as_str()) {
                return Err(none());
            }
            let row = tx
                .mcp_pin_open_change(server, tool, &pin.seen_hash, pin.approved_hash.as_deref())?
                .ok_or_else(none)?;
            view(row)
        })
    }

    /// The user approves change `id`: its definition becomes the tool's
    /// pinned one, and other changes of the tool still pending are
    /// superseded (they come back if the server shows them again). Only
    /// the user decides: an agent is refused, whatever it holds.
    pub fn mcp_pin_approve(&self, who: Principal, id: &str) -> Result<McpPinChange> {
        self.mcp_pin_decide(who, id, PinChangeStatus::Approved)
    }

    /// The user refuses change `id`: the tool stays quarantined while the
    /// server presents that definition.
    pub fn mcp_pin_reject(&self, who: Principal, id: &str) -> Result<McpPinChange> {
        self.mcp_pin_decide(who, id, PinChangeStatus::Rejected)
    }

    fn mcp_pin_decide(
        &self,
        who: Principal,
        id: &str,
        decision: PinChangeStatus,
    ) -> Result<McpPinChange> {
        let verb = match decision {
            PinChangeStatus::Approved => "approve",
            _ => "reject",
        };
        self.write(|op| {
            user_only(op.tx, who, &format!("{verb} MCP tool change {id}"))?;
            let row = op
                .tx
                .mcp_pin_change(id)?
                .ok_or_else(|| ServiceError::not_found("MCP tool change", id))?;
            let decidable = match decision {
                PinChangeStatus::Approved => {
                    matches!(row.status, PinChangeStatus::Pending | PinChangeStatus::Rejected)
                }
                _ => row.status == PinChangeStatus::Pending,
            };
            if !decidable {
                return Err(ServiceError::invalid(format!(
                    "failed to {verb} MCP tool change {id}: it is already {}; `agency mcp pins` lists the changes waiting",
                    row.status.as_str()
                )));
            }
            if decision == PinChangeStatus::Approved {
                let mut pin = op.tx.mcp_pin(&row.server, &row.tool)?.ok_or_else(|| {
                    ServiceError::not_found("pinned MCP tool", format!("{}/{}", row.server, row.tool))
                })?;
                pin.approved_hash = Some(row.new_hash.clone());
                pin.approved_def = Some(row.new_def.clone());
                pin.approved_at = Some(op.now);
                op.tx.put_mcp_pin(&pin)?;
                for other in op.tx.mcp_pin_changes(
                    Some(PinChangeStatus::Pending),
                    Some((&row.server, &row.tool)),
                    MAX_PENDING,
                )? {
                    if other.id != row.id {
                        op.tx.set_mcp_pin_change_status(
                            &other.id,
                            PinChangeStatus::Superseded,
                            op.now,
                        )?;
                    }
                }
            }
            op.tx.set_mcp_pin_change_status(id, decision, op.now)?;
            op.record(
                Record::new(
                    EventKind::McpDecided,
                    None,
                    format!(
                        "MCP tool change {id} ({} of server {}) {}",
                        row.tool,
                        row.server,
                        decision.as_str()
                    ),
                )
                .data(serde_json::json!({
                    "change": id,
                    "server": row.server,
                    "tool": row.tool,
                    "approved": decision == PinChangeStatus::Approved,
                })),
            );
            let mut row = row;
            row.status = decision;
            row.decided_at = Some(op.now);
            view(row)
        })
    }
}

/// Pin, or compare, one tool of a listing.
fn pin_one(
    tx: &mut dyn Tx,
    now: Timestamp,
    seen_by: Option<HandlerId>,
    server: &str,
    name: &str,
    canon: &str,
    sealed: bool,
) -> Result<PinVerdict> {
    let hash = definition_hash(canon);
    let stored = tx.mcp_pin(server, name)?;
    let exists = stored.is_some();
    let pin = match stored {
        None if !sealed => {
            tx.put_mcp_pin(&McpPinRow {
                server: server.to_owned(),
                tool: name.to_owned(),
                approved_hash: Some(hash.clone()),
                approved_def: Some(canon.to_owned()),
                approved_at: Some(now),
                seen_hash: hash,
                seen_at: now,
            })?;
            return Ok(PinVerdict::Allowed);
        }
        None => McpPinRow {
            server: server.to_owned(),
            tool: name.to_owned(),
            approved_hash: None,
            approved_def: None,
            approved_at: None,
            seen_hash: hash.clone(),
            seen_at: now,
        },
        Some(p) => p,
    };
    // A listing that shows what was seen last writes nothing.
    if pin.seen_hash != hash || !exists {
        let mut pin = pin.clone();
        pin.seen_hash.clone_from(&hash);
        pin.seen_at = now;
        tx.put_mcp_pin(&pin)?;
    }
    if pin.approved_hash.as_deref() == Some(hash.as_str()) {
        return Ok(PinVerdict::Allowed);
    }
    let old = pin.approved_hash.as_deref();
    let (change, new) = match tx.mcp_pin_open_change(server, name, &hash, old)? {
        Some(c) => (c, false),
        None => {
            let c = McpPinChangeRow {
                id: uuid::Uuid::new_v4().to_string(),
                server: server.to_owned(),
                tool: name.to_owned(),
                old_hash: pin.approved_hash.clone(),
                old_def: pin.approved_def.clone(),
                new_hash: hash.clone(),
                new_def: canon.to_owned(),
                seen_at: now,
                seen_by,
                status: PinChangeStatus::Pending,
                decided_at: None,
            };
            tx.insert_mcp_pin_change(&c)?;
            (c, true)
        }
    };
    Ok(PinVerdict::Quarantined {
        reason: quarantine_message(server, name, old.is_none(), Some(&change)),
        change: Some(change.id),
        new,
    })
}

/// Tell the user, once per change, that a tool was quarantined: a change
/// nobody hears of would leave the agents without the tool and the user
/// without a reason (the request is durable either way; this is the
/// inbox's copy).
fn quarantine_mail(
    op: &mut Op<'_>,
    caller: &Caller,
    server: &str,
    tool: &str,
    id: &str,
) -> Result<()> {
    op.record(
        Record::new(
            EventKind::McpQuarantined,
            caller.handler(),
            format!("MCP tool {tool} of server {server} quarantined: its definition changed (change {id})"),
        )
        .data(serde_json::json!({ "change": id, "server": server, "tool": tool })),
    );
    let subject = format!("MCP tool quarantined: {tool} of server {server} (change {id})");
    let body = format!(
        "The definition of tool `{tool}` of MCP server `{server}` is not the one pinned at \
         the server's first listing (or the tool is new since then), so agents no longer see \
         it or may call it.\n\n\
         - see the difference and approve it: `agency mcp approve-tool {server} {tool}` \
         (or `agency approve {id}`)\n\
         - keep it out: `agency deny {id} --reason \"…\"`\n\
         - every pin and change: `agency mcp pins`\n"
    );
    op.notice(caller, MailTarget::User, &subject, &body);
    Ok(())
}

fn malformed(why: &str) -> PinVerdict {
    PinVerdict::Quarantined {
        change: None,
        new: false,
        reason: format!("withheld: {why}"),
    }
}

/// What an agent is told about a quarantined tool.
fn quarantine_message(
    server: &str,
    tool: &str,
    is_new: bool,
    change: Option<&McpPinChangeRow>,
) -> String {
    let what = if is_new {
        "it appeared after the server's tools were pinned"
    } else {
        "its definition changed since it was approved"
    };
    let how = match change {
        Some(c) if c.status == PinChangeStatus::Rejected => format!(
            "the user rejected this definition (change {}); do without this tool",
            c.id
        ),
        Some(c) => format!(
            "it is quarantined until the user approves change {} (`agency mcp approve-tool {server} {tool}`); do without it meanwhile or ask your boss",
            c.id
        ),
        None => "it is quarantined until the user approves it; do without it meanwhile".to_owned(),
    };
    format!("failed to use tool {tool} of MCP server {server}: {what}; {how}")
}

/// The caller must be an agent whose handler holds a capability on the
/// server (the user does not speak to extra servers).
fn may_use(tx: &mut dyn Tx, caller: &Caller, server: &str, what: &str) -> Result<()> {
    let Caller::Handler { row, .. } = caller else {
        return Err(ServiceError::invalid(format!(
            "failed to {what} MCP server {server}: only an agent's launcher does this"
        )));
    };
    let held = tx.capabilities_on(row.id, &Resource::McpServer(server.to_owned()))?;
    if held.iter().any(|c| c.level >= Level::Read) {
        return Ok(());
    }
    Err(ServiceError::denied(format!(
        "failed to {what} MCP server {server}: you hold no capability on it; ask your boss to grant read on mcp_server {server}"
    )))
}

fn user_only(tx: &mut dyn Tx, who: Principal, what: &str) -> Result<()> {
    match authenticate(tx, who)? {
        Caller::User => Ok(()),
        Caller::Handler { .. } => Err(ServiceError::denied(format!(
            "failed to {what}: only the user decides which MCP tool definitions agents may use"
        ))),
    }
}

fn view(row: McpPinChangeRow) -> Result<McpPinChange> {
    let parse = |text: &str| {
        serde_json::from_str::<Value>(text).map_err(|e| {
            ServiceError::Store(agency_store::StoreError::corrupt(
                "MCP tool definition",
                e.to_string(),
            ))
        })
    };
    Ok(McpPinChange {
        old: row.old_def.as_deref().map(parse).transpose()?,
        new: parse(&row.new_def)?,
        id: row.id,
        server: row.server,
        tool: row.tool,
        status: row.status,
        seen_at: row.seen_at,
        seen_by: row.seen_by,
        decided_at: row.decided_at,
    })
}

/// What the approved definition of a tool says of itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PinnedTool {
    /// Annotated `readOnlyHint: true` and not `destructiveHint: true`.
    /// Anything else (no annotation, a definition that does not parse)
    /// is not read-only: a server's silence is no promise.
    pub read_only: bool,
}

impl PinnedTool {
    fn of(definition: Option<&str>) -> PinnedTool {
        let def: Option<Value> = definition.and_then(|d| serde_json::from_str(d).ok());
        let hint = |key: &str| {
            def.as_ref()
                .and_then(|d| d.get("annotations"))
                .and_then(|a| a.get(key))
                .and_then(Value::as_bool)
        };
        PinnedTool {
            read_only: hint("readOnlyHint") == Some(true) && hint("destructiveHint") != Some(true),
        }
    }
}

/// The fields of a tool that make its definition: what an agent reads and
/// what its calls are checked against. `None` without a string `name`.
pub fn definition(tool: &Value) -> Option<(String, Value)> {
    let name = tool.get("name")?.as_str()?.to_owned();
    let mut def = Map::new();
    for key in [
        "name",
        "title",
        "description",
        "inputSchema",
        "outputSchema",
        "annotations",
    ] {
        if let Some(v) = tool.get(key) {
            def.insert(key.to_owned(), v.clone());
        }
    }
    Some((name, Value::Object(def)))
}

/// JSON with every object's keys sorted and no insignificant whitespace:
/// equal definitions have equal text whatever order a server sends.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// BLAKE3 of the canonical text, hex.
pub fn definition_hash(canonical: &str) -> String {
    blake3::hash(canonical.as_bytes()).to_hex().to_string()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn canonical_json_ignores_key_order_and_whitespace() {
        let a = json!({"b": [1, {"y": 2, "x": "é"}], "a": null});
        let b: Value =
            serde_json::from_str("{ \"a\" : null, \"b\":[1,{\"x\":\"é\",\"y\":2}] }").unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(canonical_json(&a), r#"{"a":null,"b":[1,{"x":"é","y":2}]}"#);
    }

    #[test]
    fn the_definition_is_the_fields_an_agent_reads() {
        let t = json!({"name": "x", "description": "d", "inputSchema": {}, "_meta": {"n": 1}});
        let (name, def) = definition(&t).unwrap();
        assert_eq!(name, "x");
        assert_eq!(
            def,
            json!({"name": "x", "description": "d", "inputSchema": {}})
        );
        assert!(definition(&json!({"description": "no name"})).is_none());
        assert!(definition(&json!({"name": 3})).is_none());
    }

    /// Issue 27: only a definition that says it only reads is read-only.
    #[test]
    fn issue27_a_tool_is_read_only_only_when_its_definition_says_so() {
        let of = |v: Value| PinnedTool::of(Some(&v.to_string())).read_only;
        assert!(of(
            json!({"name": "a", "annotations": {"readOnlyHint": true}})
        ));
        for not in [
            json!({"name": "a"}),
            json!({"name": "a", "annotations": {}}),
            json!({"name": "a", "annotations": {"readOnlyHint": false}}),
            json!({"name": "a", "annotations": {"readOnlyHint": "yes"}}),
            json!({"name": "a", "annotations": {"readOnlyHint": true, "destructiveHint": true}}),
        ] {
            assert!(!of(not.clone()), "{not}");
        }
        assert!(!PinnedTool::of(None).read_only);
        assert!(!PinnedTool::of(Some("not json")).read_only);
    }
}
