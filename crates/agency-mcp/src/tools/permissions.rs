//! Permission and handler-tree tools: list and grant capabilities, delegate
//! an outcome to a new underling, force-stop an underling.

use agency_api::{CapabilityList, Granted};
use agency_core::{HandlerId, OutcomeId};
use agency_service::{BudgetLimits, GrantRequest};
use schemars::JsonSchema;
use serde::Deserialize;

use crate::args::{self, LevelArg, ResourceKindArg};
use crate::reply::{ToolError, ToolResult, json};
use crate::tools::{Call, Effect, tool};

pub(super) fn routes() -> Vec<super::Declared> {
    vec![
        tool(
            "permissions_list",
            PERMISSIONS_LIST,
            Effect::Read,
            permissions_list,
        ),
        tool(
            "permissions_grant",
            PERMISSIONS_GRANT,
            Effect::Write,
            permissions_grant,
        ),
        tool("delegate", DELEGATE, Effect::Write, delegate),
        tool("force_stop", FORCE_STOP, Effect::Destructive, force_stop),
    ]
}

const PERMISSIONS_LIST: &str = "List your handler's live capabilities: the resource (KB file, MCP server, repo, mail target, egress pattern), level (none/read/write), whether you may delegate it, the outcome it is scoped to (it ends when that outcome finishes) and where it came from. \
Takes no arguments.";

const PERMISSIONS_GRANT: &str = "Grant a capability to one of your direct underlings. You must hold a delegatable capability on the resource at least at the level you grant (you may grant a lower level). \
The grant is derived from yours and scoped to the outcome it is for: by default the outcome delegated to the underling, or name `outcome` (that outcome or one below it, not finished). It is revoked when that outcome finishes or your own capability is revoked. \
When you obtained a capability from your boss for an underling's outcome (escalation), your boss names that outcome and you pass it on: it ends at every level when that outcome finishes. Mail permissions cannot be granted. \
Returns the new capability's id. Errors: permission_denied (not your direct underling, not held, not delegatable, level too high), not_found, invalid_input (bad resource id, outcome outside the underling's area or finished).";

const DELEGATE: &str = "Delegate an outcome you are responsible for (open or blocked, not your own root) to a new underling handler, which gets an agent to work on it. \
The new handler's UUID is the outcome's UUID; it and its descendants you were responsible for move to it. You and it may then mail each other. \
Optionally grant it capabilities in the same step (each as for permissions_grant). A handler stopped earlier for this outcome is reactivated with its state. \
Optionally give it a budget carved out of what remains of yours (and of every budget above you), never more; its subtree pauses when it is spent. \
Errors: permission_denied (not responsible, capability not grantable), invalid_input (own root, finished or Process Inbox outcome), not_found, quota (a budget refuses: too many handlers, too deep, paused, or more budget asked than remains; the message names the limit and what is left).";

const FORCE_STOP: &str = "Force-stop your direct underling handler: its agent and every agent below it are stopped, those handlers are deactivated (their state is kept), you become responsible for every outcome they were responsible for, and their capabilities are revoked. \
Use it when an underling is stuck or working against its outcome; prefer mail first. Cannot be undone except by delegating the outcome again. \
Errors: permission_denied (not your direct underling), not_found.";

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct NoArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct GrantArgs {
    /// UUID of your direct underling handler to grant to.
    handler: String,
    /// What kind of resource: "kb" (a KB file), "mcp_server", "repo", "egress" (network destinations through Agency's proxy) or "tool" (a tool of an applied organisation).
    resource_kind: ResourceKindArg,
    /// The resource: a KB file UUID, the MCP server's or repo's configured name, the tool's name, or an egress pattern: HOST, *.DOMAIN (subdomains only) or either with :PORT (no port = 80 and 443).
    resource_id: String,
    /// "none" (may see the KB file's description only), "read" or "write".
    level: LevelArg,
    /// Whether the underling may grant it on to its own underlings (default false).
    delegatable: Option<bool>,
    /// UUID of the outcome the grant is for: the underling's root outcome (the default) or an outcome below it. The grant ends when that outcome finishes.
    outcome: Option<String>,
}

/// One capability to grant in a delegation.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CapabilityArg {
    /// What kind of resource: "kb" (a KB file), "mcp_server", "repo", "egress" (network destinations through Agency's proxy) or "tool" (a tool of an applied organisation).
    resource_kind: ResourceKindArg,
    /// The resource: a KB file UUID, the MCP server's or repo's configured name, the tool's name, or an egress pattern: HOST, *.DOMAIN (subdomains only) or either with :PORT (no port = 80 and 443).
    resource_id: String,
    /// "none" (may see the KB file's description only), "read" or "write".
    level: LevelArg,
    /// Whether the underling may grant it on (default false).
    delegatable: Option<bool>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct DelegateArgs {
    /// UUID of the outcome to delegate.
    outcome: String,
    /// Capabilities to grant the new handler, each derived from one you hold.
    capabilities: Option<Vec<CapabilityArg>>,
    /// A budget for the new handler's subtree, carved out of what remains of yours; a limit left out is none of that kind (yours still hold).
    budget: Option<BudgetArg>,
}

/// Limits on the new handler's subtree.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct BudgetArg {
    /// Tokens of every kind (input, output, cache).
    tokens: Option<i64>,
    /// Cost in US dollars.
    usd: Option<f64>,
    /// Model calls.
    calls: Option<i64>,
    /// Tool calls.
    tool_calls: Option<i64>,
    /// Agent starts.
    spawns: Option<i64>,
    /// Agents live at once.
    live_agents: Option<i64>,
    /// Delegations below it.
    handlers: Option<i64>,
    /// Levels of handlers below it.
    depth: Option<i64>,
    /// Wall-clock seconds from now.
    wall_clock_seconds: Option<i64>,
}

impl BudgetArg {
    fn limits(self) -> Result<BudgetLimits, ToolError> {
        let micro_usd = match self.usd {
            None => None,
            Some(d) if d.is_finite() && (0.0..=9.0e12).contains(&d) => {
                // In range (checked), so the conversion cannot saturate.
                Some((d * 1_000_000.0).round() as i64)
            }
            Some(d) => {
                return Err(ToolError::invalid(format!(
                    "failed to read budget.usd: {d} is not an amount of zero or more dollars"
                )));
            }
        };
        Ok(BudgetLimits {
            tokens: self.tokens,
            micro_usd,
            calls: self.calls,
            tool_calls: self.tool_calls,
            spawns: self.spawns,
            live_agents: self.live_agents,
            handlers: self.handlers,
            depth: self.depth,
            wall_clock_ms: self.wall_clock_seconds.map(|s| s.saturating_mul(1000)),
        })
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct HandlerArgs {
    /// UUID of the handler.
    handler: String,
}

fn permissions_list(call: &Call, _: NoArgs) -> ToolResult {
    let capabilities = call.svc.permissions_list(call.who(), None)?;
    json(&CapabilityList { capabilities })
}

fn permissions_grant(call: &Call, a: GrantArgs) -> ToolResult {
    let grantee: HandlerId = args::id("handler", &a.handler)?;
    let req = GrantRequest {
        resource: a.resource_kind.resource(&a.resource_id)?,
        level: a.level.into(),
        delegatable: a.delegatable.unwrap_or(false),
    };
    let outcome: Option<OutcomeId> = args::opt_id("outcome", a.outcome.as_deref())?;
    let cap = call.svc.grant_for(call.who(), grantee, &req, outcome)?;
    json(&Granted {
        capability: cap,
        handler: grantee,
    })
}

fn delegate(call: &Call, a: DelegateArgs) -> ToolResult {
    let outcome: OutcomeId = args::id("outcome", &a.outcome)?;
    let grants =
        a.capabilities
            .unwrap_or_default()
            .into_iter()
            .enumerate()
            .map(|(i, c)| {
                let resource = c.resource_kind.resource(&c.resource_id).map_err(|e| {
                    ToolError::invalid(format!("{} (in capabilities[{i}])", e.message))
                })?;
                Ok(GrantRequest {
                    resource,
                    level: c.level.into(),
                    delegatable: c.delegatable.unwrap_or(false),
                })
            })
            .collect::<Result<Vec<_>, ToolError>>()?;
    let budget = a.budget.map(BudgetArg::limits).transpose()?;
    json(
        &call
            .svc
            .delegate_with_budget(call.who(), outcome, &grants, budget)?,
    )
}

fn force_stop(call: &Call, a: HandlerArgs) -> ToolResult {
    let target: HandlerId = args::id("handler", &a.handler)?;
    json(&call.svc.force_stop(call.who(), target)?)
}
