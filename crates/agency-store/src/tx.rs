//! [`Tx`]: the queries and changes one transaction can make.
//!
//! Methods are row-level and rule-free. Lists are ordered deterministically
//! (documented per method). "Live" capabilities are those not revoked.

use agency_core::{
    AgentId, CapabilityId, FileId, HandlerId, MailTarget, MessageId, OutcomeId, Resource,
    ResourceKind, Timestamp,
};

use agency_core::access::FileKind;

use crate::blob::BlobId;
use crate::error::StoreError;
use crate::mcp_pins::{McpPinChangeRow, McpPinRow, PinChangeStatus};
use crate::model::*;
use crate::org_messages::{OrgKeyRow, OrgMessageRow};
use crate::org_tools::OrgToolRow;
use crate::orgs::{OrgAgentRow, OrgGrantRow, OrgRow};

pub type R<T> = Result<T, StoreError>;

/// Outcome rows of a subtree and the (parent, child) edges among them.
pub type SubtreeRows = (Vec<OutcomeRow>, Vec<(OutcomeId, OutcomeId)>);

pub trait Tx {
    // ---- Knowledge Base -------------------------------------------------

    /// Insert a file row (with `latest_version` as given, normally 0 until
    /// its first version is inserted).
    fn insert_file(&mut self, file: &FileRow) -> R<()>;
    fn file(&mut self, id: FileId) -> R<Option<FileRow>>;
    fn set_file_description(&mut self, id: FileId, description: &str) -> R<()>;
    /// Insert a version row and set the file's `latest_version` to it.
    /// Fails with `StoreError::Unique` if that version number exists.
    fn insert_version(&mut self, v: &VersionRow) -> R<()>;
    fn version(&mut self, file: FileId, version: i64) -> R<Option<VersionRow>>;
    /// All versions, oldest first.
    fn versions(&mut self, file: FileId) -> R<Vec<VersionRow>>;
    /// Every version row of every file, ordered by (file, version). For fsck.
    fn all_versions(&mut self) -> R<Vec<VersionRow>>;
    fn insert_kb_audit(&mut self, rows: &[KbAuditRow]) -> R<()>;
    /// A file's access log, oldest first, at most `limit` rows.
    fn kb_audit(&mut self, file: FileId, limit: usize) -> R<Vec<KbAuditRow>>;
    /// Files possibly visible to `handler` (`None`: the user, who sees all),
    /// whose description contains every term (already lowercased; matched
    /// case-insensitively as substrings), with id greater than `after`,
    /// ordered by id, at most `limit`. Candidates are: files the handler
    /// holds a live KB capability on; state documents and audit logs it owns
    /// or its direct underlings own; outcome files in its area.
    fn kb_candidates(
        &mut self,
        handler: Option<HandlerId>,
        terms: &[String],
        after: Option<FileId>,
        limit: usize,
    ) -> R<Vec<KbCandidate>>;
    /// The work product of a set of handlers, ordered by id: documents and
    /// message bodies they created, message bodies delivered to them, and
    /// the state documents and audit logs they own.
    fn work_product(&mut self, handlers: &[HandlerId]) -> R<Vec<FileRow>>;

    // ---- Outcomes --------------------------------------------------------

    fn insert_outcome(&mut self, o: &OutcomeRow) -> R<()>;
    fn outcome(&mut self, id: OutcomeId) -> R<Option<OutcomeRow>>;
    /// Overwrite every column of an existing outcome.
    fn update_outcome(&mut self, o: &OutcomeRow) -> R<()>;
    /// Insert the edge parent -> child (idempotent).
    fn insert_edge(&mut self, parent: OutcomeId, child: OutcomeId) -> R<()>;
    fn delete_edge(&mut self, parent: OutcomeId, child: OutcomeId) -> R<()>;
    /// Immediate parents, ordered by id.
    fn parents(&mut self, id: OutcomeId) -> R<Vec<OutcomeId>>;
    /// Immediate children, ordered by id.
    fn children(&mut self, id: OutcomeId) -> R<Vec<OutcomeId>>;
    /// Whether `node` is `ancestor` or a descendant of it.
    fn is_descendant_or_self(&mut self, node: OutcomeId, ancestor: OutcomeId) -> R<bool>;
    /// Every edge (parent, child) on some path from `id` up to a root,
    /// ordered by (child, parent).
    fn ancestor_edges(&mut self, id: OutcomeId) -> R<Vec<(OutcomeId, OutcomeId)>>;
    /// `id` and its descendants (breadth-first discovery, each once), at
    /// most `limit` rows, and the edges among the returned outcomes.
    fn subtree(&mut self, id: OutcomeId, limit: usize) -> R<SubtreeRows>;
    /// Set `responsible = to` on `root` and every descendant whose
    /// responsible handler is `from`; returns how many rows changed.
    fn reassign_subtree(
        &mut self,
        root: OutcomeId,
        from: HandlerId,
        to: HandlerId,
        at: Timestamp,
    ) -> R<u64>;
    /// Set `responsible = to` on every outcome whose responsible handler is
    /// one of `from`; returns how many rows changed.
    fn reassign_all(&mut self, from: &[HandlerId], to: HandlerId, at: Timestamp) -> R<u64>;
    fn insert_outcome_event(&mut self, e: &OutcomeEventRow) -> R<()>;
    /// An outcome's history, oldest first.
    fn outcome_events(&mut self, id: OutcomeId) -> R<Vec<OutcomeEventRow>>;
    /// The handler's open Process Inbox outcome, if any.
    fn open_process_inbox(&mut self, handler: HandlerId) -> R<Option<OutcomeId>>;
    /// Outcomes a handler is responsible for, ordered by (priority desc, created_at).
    fn outcomes_of(&mut self, handler: HandlerId, limit: usize) -> R<Vec<OutcomeRow>>;

    // ---- Handlers --------------------------------------------------------

    fn insert_handler(&mut self, h: &HandlerRow) -> R<()>;
    fn handler(&mut self, id: HandlerId) -> R<Option<HandlerRow>>;
    /// Overwrite boss, status, state_doc, audit_log and updated_at.
    fn update_handler(&mut self, h: &HandlerRow) -> R<()>;
    /// The handler whose boss is the user.
    fn root_handler(&mut self) -> R<Option<HandlerRow>>;
    /// `id` and every handler below it in the boss tree (any status).
    fn handler_subtree(&mut self, id: HandlerId) -> R<Vec<HandlerRow>>;
    /// Direct underlings (any status), ordered by id.
    fn underlings(&mut self, id: HandlerId) -> R<Vec<HandlerRow>>;
    /// All handlers, ordered by id, at most `limit`, after `after`.
    fn handlers(&mut self, after: Option<HandlerId>, limit: usize) -> R<Vec<HandlerRow>>;
    /// Active handlers responsible for at least one open, non-perpetual
    /// outcome, ordered by id, after `after`, at most `limit`. Indexed: it
    /// must not scan every outcome.
    fn handlers_with_work(&mut self, after: Option<HandlerId>, limit: usize) -> R<Vec<HandlerId>>;
    /// Whether one handler has work (same rule, one handler).
    fn has_work(&mut self, id: HandlerId) -> R<bool>;

    // ---- Capabilities ----------------------------------------------------

    fn insert_capability(&mut self, c: &NewCapability) -> R<CapabilityId>;
    fn capability(&mut self, id: CapabilityId) -> R<Option<CapabilityRow>>;
    /// Live capabilities `holder` has on `resource`, ordered by id.
    fn capabilities_on(&mut self, holder: HandlerId, resource: &Resource) -> R<Vec<CapabilityRow>>;
    /// Live capabilities `holder` has, ordered by id.
    fn capabilities_held(&mut self, holder: HandlerId) -> R<Vec<CapabilityRow>>;
    /// Live capabilities `holder` has on resources of `kind`, ordered by
    /// id (an egress check reads these, not every KB capability held).
    fn capabilities_of_kind(
        &mut self,
        holder: HandlerId,
        kind: ResourceKind,
    ) -> R<Vec<CapabilityRow>>;
    /// Revoke the selected live capabilities and, transitively, every live
    /// capability derived from them; returns the rows revoked (with
    /// `revoked_at` set), ordered by id.
    fn revoke(&mut self, selector: &RevokeSelector, at: Timestamp) -> R<Vec<CapabilityRow>>;

    // ---- Mail ------------------------------------------------------------

    fn insert_message(&mut self, m: &MessageRow) -> R<()>;
    fn message(&mut self, id: MessageId) -> R<Option<MessageRow>>;
    fn set_delivered(&mut self, id: MessageId, at: Timestamp) -> R<()>;
    fn set_acked(&mut self, id: MessageId, at: Timestamp) -> R<()>;
    /// Close a deferred message that may not be delivered, with the reason.
    fn set_dropped(&mut self, id: MessageId, at: Timestamp, reason: &str) -> R<()>;
    /// Undelivered messages with `deliver_at <= now`, ordered by
    /// (deliver_at, id), at most `limit`.
    fn due_messages(&mut self, now: Timestamp, limit: usize) -> R<Vec<MessageRow>>;
    /// The earliest `deliver_at` among undelivered messages.
    fn next_due(&mut self) -> R<Option<Timestamp>>;
    /// Delivered, unacknowledged messages to `to`, ordered by (delivered_at, id).
    fn inbox(&mut self, to: MailTarget, limit: usize) -> R<Vec<MessageRow>>;
    fn inbox_count(&mut self, to: MailTarget) -> R<i64>;
    /// The last `limit` messages delivered to `to`, acknowledged or not,
    /// newest first.
    fn received(&mut self, to: MailTarget, limit: usize) -> R<Vec<MessageRow>>;
    /// Messages sent by `from`, newest first.
    fn outbox(&mut self, from: MailTarget, limit: usize) -> R<Vec<MessageRow>>;

    // ---- Agents ----------------------------------------------------------

    /// Fails with `StoreError::Unique` if the handler already has a live agent.
    fn insert_agent(&mut self, a: &AgentRow) -> R<()>;
    fn agent(&mut self, id: AgentId) -> R<Option<AgentRow>>;
    /// Mark a live agent ended; returns false if it was not live.
    fn end_agent(&mut self, id: AgentId, at: Timestamp, reason: &str) -> R<bool>;
    /// Live agents of the given handlers, ordered by id.
    fn live_agents_of(&mut self, handlers: &[HandlerId]) -> R<Vec<AgentRow>>;
    /// Every live agent, ordered by id.
    fn live_agents(&mut self) -> R<Vec<AgentRow>>;
    /// Most recent agents (live or ended), newest first.
    fn recent_agents(&mut self, limit: usize) -> R<Vec<AgentRow>>;

    // ---- Handler audit logs ---------------------------------------------

    fn insert_log_entry(&mut self, e: &LogEntryRow) -> R<()>;
    /// A handler's audit log entries, oldest first.
    fn log_entries(&mut self, handler: HandlerId) -> R<Vec<LogEntryRow>>;

    // ---- Agent runs and stalls --------------------------------------------

    /// Insert or replace the run record of an agent.
    fn put_agent_run(&mut self, r: &AgentRunRow) -> R<()>;
    fn agent_run(&mut self, agent: AgentId) -> R<Option<AgentRunRow>>;
    /// Attach the captured output of an agent's run (a blob) to its run
    /// record; false if the agent has no run record.
    fn set_agent_run_log(&mut self, agent: AgentId, log: &BlobId) -> R<bool>;
    /// The blob of an agent run's captured output, if one was kept.
    fn agent_run_log(&mut self, agent: AgentId) -> R<Option<BlobId>>;
    /// Agents with their runs, newest first: of `handlers`, or of every
    /// handler when `None`; only those started before `before`.
    fn runs(
        &mut self,
        handlers: Option<&[HandlerId]>,
        before: Option<Timestamp>,
        limit: usize,
    ) -> R<Vec<AgentWithRun>>;
    /// The most recently ended agent of a handler, with its run.
    fn last_ended_run(&mut self, handler: HandlerId) -> R<Option<AgentWithRun>>;
    /// Whether the agent created or wrote a KB file or changed an outcome.
    fn agent_made_progress(&mut self, agent: AgentId) -> R<bool>;
    /// Whether the agent submitted an audit summary.
    fn agent_logged(&mut self, agent: AgentId) -> R<bool>;
    fn set_stalled(&mut self, handler: HandlerId, at: Timestamp, reason: &str) -> R<()>;
    /// Returns whether the handler was stalled.
    fn clear_stalled(&mut self, handler: HandlerId) -> R<bool>;
    fn stalled(&mut self, handler: HandlerId) -> R<Option<(Timestamp, String)>>;

    // ---- Tokens ----------------------------------------------------------

    /// Fails with `StoreError::Unique` if the hash exists.
    fn insert_token(&mut self, t: &TokenRow) -> R<()>;
    fn token(&mut self, hash: &str) -> R<Option<TokenRow>>;
    /// Revoke every live token of an agent; returns how many.
    fn revoke_tokens_of(&mut self, agent: AgentId, at: Timestamp) -> R<u64>;

    // ---- Misc ------------------------------------------------------------

    /// Ids of `kind` starting with `prefix` (lowercase hex and '-'), ordered,
    /// at most `limit`.
    fn ids_with_prefix(&mut self, kind: IdKind, prefix: &str, limit: usize) -> R<Vec<uuid::Uuid>>;

    fn counts(&mut self) -> R<StoreCounts>;

    // ---- Agent process groups --------------------------------------------

    /// Insert or replace the process group recorded for an agent.
    fn put_agent_process(&mut self, r: &AgentProcessRow) -> R<()>;
    /// The process groups recorded for agents still live, by agent.
    fn live_agent_processes(&mut self) -> R<Vec<AgentProcessRow>>;

    // ---- Bounded pages (see sqlite/pages.rs) --------------------------------

    /// How many events an outcome's history holds.
    fn outcome_event_count(&mut self, id: OutcomeId) -> R<i64>;
    /// Up to `limit` history events after the one with sequence number
    /// `after` (from the start when `None`), oldest first, each with its
    /// sequence number (the cursor of the next page).
    fn outcome_events_after(
        &mut self,
        id: OutcomeId,
        after: Option<i64>,
        limit: usize,
    ) -> R<Vec<(i64, OutcomeEventRow)>>;
    /// The newest `limit` history events, oldest first.
    fn outcome_events_latest(
        &mut self,
        id: OutcomeId,
        limit: usize,
    ) -> R<Vec<(i64, OutcomeEventRow)>>;
    /// How many entries a handler's audit log holds.
    fn log_entry_count(&mut self, handler: HandlerId) -> R<i64>;
    /// Up to `limit` audit log entries after sequence number `after`,
    /// oldest first.
    fn log_entries_after(
        &mut self,
        handler: HandlerId,
        after: Option<i64>,
        limit: usize,
    ) -> R<Vec<(i64, LogEntryRow)>>;
    /// Up to `limit` audit log entries of `handler` written by `agent`
    /// whose summary starts with `prefix`, oldest first.
    fn log_entries_of_agent(
        &mut self,
        handler: HandlerId,
        agent: AgentId,
        prefix: &str,
        limit: usize,
    ) -> R<Vec<LogEntryRow>>;
    /// The newest `limit` audit log entries, oldest first.
    fn log_entries_latest(
        &mut self,
        handler: HandlerId,
        limit: usize,
    ) -> R<Vec<(i64, LogEntryRow)>>;
    /// (children not finished, finished children) of an outcome.
    fn child_counts(&mut self, id: OutcomeId) -> R<(i64, i64)>;
    /// Children not finished (oldest first) or finished (most recently
    /// changed first), at most `limit`.
    fn children_by_state(
        &mut self,
        id: OutcomeId,
        finished: bool,
        limit: usize,
    ) -> R<Vec<OutcomeId>>;
    /// Versions after `after` (from 1 when `None`), oldest first.
    fn versions_after(
        &mut self,
        file: FileId,
        after: Option<i64>,
        limit: usize,
    ) -> R<Vec<VersionRow>>;
    /// Like `inbox`, starting after the message `after`.
    fn inbox_after(
        &mut self,
        to: MailTarget,
        after: Option<MessageId>,
        limit: usize,
    ) -> R<Vec<MessageRow>>;
    /// Like `outbox` (newest first), starting after the message `before`.
    fn outbox_before(
        &mut self,
        from: MailTarget,
        before: Option<MessageId>,
        limit: usize,
    ) -> R<Vec<MessageRow>>;

    // ---- Quotas and retention --------------------------------------------
    //
    // Counts stop at `limit`: a quota check costs at most that many index
    // entries, never a scan.

    /// Undelivered messages sent by `from`, counted up to `limit`.
    fn pending_mail_from(&mut self, from: MailTarget, limit: usize) -> R<usize>;
    /// Files of `kind` that `handler` created, counted up to `limit`.
    fn files_created_by(&mut self, handler: HandlerId, kind: FileKind, limit: usize) -> R<usize>;
    /// Outcomes `handler` created (their `created` history events), counted
    /// up to `limit`.
    fn outcomes_created_by(&mut self, handler: HandlerId, limit: usize) -> R<usize>;
    /// Active handlers in the subtree of `id` (itself included if active),
    /// counted up to `limit`.
    fn active_subtree_size(&mut self, id: HandlerId, limit: usize) -> R<usize>;
    /// Messages acknowledged before `before`, ordered by (acked_at, id),
    /// after the cursor `after`, at most `limit`.
    fn acked_messages_before(
        &mut self,
        before: Timestamp,
        after: Option<(Timestamp, MessageId)>,
        limit: usize,
    ) -> R<Vec<MessageRow>>;
    fn delete_message(&mut self, id: MessageId) -> R<()>;
    /// Delete every message whose body is `file`; returns how many.
    fn delete_messages_carrying(&mut self, file: FileId) -> R<usize>;
    /// Whether some message carrying `file` is unacknowledged or was
    /// acknowledged at or after `before`.
    fn file_in_unexpired_mail(&mut self, file: FileId, before: Timestamp) -> R<bool>;
    /// Live capabilities anyone holds on `resource`, ordered by id.
    fn live_capabilities_on(&mut self, resource: &Resource) -> R<Vec<CapabilityRow>>;
    /// Delete a file with its versions and access log (no message may
    /// still point at it).
    fn delete_file(&mut self, id: FileId) -> R<()>;
    /// The candidates some version row or agent run (transcript, captured
    /// output) points at, in the order given.
    fn referenced_blobs(&mut self, candidates: &[BlobId]) -> R<Vec<BlobId>>;

    // ---- Model calls (the gateway's metering) ----------------------------

    fn insert_model_call(&mut self, call: &ModelCallRow) -> R<()>;
    /// The sums of the model calls of each handler given (one aggregate
    /// per handler over its index), in the order given; a handler without
    /// calls gets zeros.
    fn model_usage_of(&mut self, handlers: &[HandlerId]) -> R<Vec<UsageTotals>>;
    /// The latest model calls of an agent, newest first, at most `limit`.
    fn model_calls_of_agent(&mut self, agent: AgentId, limit: usize) -> R<Vec<ModelCallRow>>;

    // ---- Budgets (issue 11 item 3) ---------------------------------------

    /// Set (replace) the limits on a handler's subtree.
    /// The model upstream chosen for a handler (`None` clears it).
    fn set_handler_model(
        &mut self,
        handler: HandlerId,
        upstream: Option<&str>,
        at: Timestamp,
    ) -> R<()>;
    fn handler_model(&mut self, handler: HandlerId) -> R<Option<String>>;

    fn set_budget(&mut self, budget: &BudgetRow) -> R<()>;
    fn budget_of(&mut self, handler: HandlerId) -> R<Option<BudgetRow>>;
    /// Every budget paused now, oldest pause first.
    fn paused_budgets(&mut self) -> R<Vec<BudgetRow>>;
    /// Record the worst case of a model call in flight; returns its id.
    fn insert_budget_reservation(&mut self, r: &BudgetReservationRow) -> R<i64>;
    fn delete_budget_reservation(&mut self, id: i64) -> R<()>;
    /// The reservations in flight of the handlers given, summed.
    fn budget_reserved_of(&mut self, handlers: &[HandlerId]) -> R<ReservedTotals>;
    /// Drop every reservation (a daemon starting: nothing is in flight),
    /// and the ledger's totals of calls in flight with them.
    fn clear_budget_reservations(&mut self) -> R<usize>;

    // ---- Approvals (issue 11 item 4) -------------------------------------

    /// Insert an approval request (its `id` is ignored); returns its id.
    fn insert_approval(&mut self, a: &ApprovalRow) -> R<agency_core::policy::ApprovalId>;
    fn approval(&mut self, id: agency_core::policy::ApprovalId) -> R<Option<ApprovalRow>>;
    /// Pending, approved and denied requests bound to (handler, tool, args hash),
    /// oldest first.
    fn approvals_bound(
        &mut self,
        handler: HandlerId,
        tool: &str,
        args_hash: &str,
    ) -> R<Vec<ApprovalRow>>;
    /// Overwrite a request's status and decision columns if its status is
    /// still `from`; returns whether it was.
    fn update_approval(&mut self, a: &ApprovalRow, from: ApprovalStatus) -> R<bool>;
    /// Requests newest first (pending only unless `all`; of one handler if
    /// given), at most `limit`.
    fn approvals_list(
        &mut self,
        all: bool,
        handler: Option<HandlerId>,
        limit: usize,
    ) -> R<Vec<ApprovalRow>>;
    /// Mark a capability as needing approval for each use (`each_use`).
    fn set_capability_approval(&mut self, cap: CapabilityId, mode: &str) -> R<()>;
    fn capability_approval(&mut self, cap: CapabilityId) -> R<Option<String>>;
    fn delete_budget(&mut self, handler: HandlerId) -> R<()>;
    fn budget_reservation(&mut self, id: i64) -> R<Option<BudgetReservationRow>>;
    /// The running totals of a handler's subtree (zeros if none yet).
    fn budget_spend_of(&mut self, handler: HandlerId) -> R<BudgetSpend>;
    /// Add `delta` to the running totals of every handler given.
    fn budget_spend_add(&mut self, handlers: &[HandlerId], delta: &BudgetSpend) -> R<()>;
    /// The hop count of the chain of work a handler is on (0 if none).
    fn handler_hops(&mut self, handler: HandlerId) -> R<i64>;
    fn set_handler_hops(&mut self, handler: HandlerId, hops: i64) -> R<()>;
    // ---- Pinned MCP tool definitions (issue 11 item 5) -------------------

    /// Whether the server's first complete `tools/list` has ended.
    fn mcp_pin_sealed(&mut self, server: &str) -> R<bool>;
    /// Record that the first complete listing ended (kept if already set).
    fn mcp_pin_seal(&mut self, server: &str, at: Timestamp) -> R<()>;
    fn mcp_pin(&mut self, server: &str, tool: &str) -> R<Option<McpPinRow>>;
    /// Insert or replace the pin of (server, tool).
    fn put_mcp_pin(&mut self, pin: &McpPinRow) -> R<()>;
    /// Every pin (of one server, or all), ordered by server and tool.
    fn mcp_pins(&mut self, server: Option<&str>) -> R<Vec<McpPinRow>>;
    fn insert_mcp_pin_change(&mut self, change: &McpPinChangeRow) -> R<()>;
    fn mcp_pin_change(&mut self, id: &str) -> R<Option<McpPinChangeRow>>;
    /// The latest pending or rejected change of a tool to `new_hash`,
    /// measured against the approved `old_hash`.
    fn mcp_pin_open_change(
        &mut self,
        server: &str,
        tool: &str,
        new_hash: &str,
        old_hash: Option<&str>,
    ) -> R<Option<McpPinChangeRow>>;
    /// Changes oldest first, at most `limit`, optionally of one status
    /// and of one (server, tool).
    fn mcp_pin_changes(
        &mut self,
        status: Option<PinChangeStatus>,
        tool: Option<(&str, &str)>,
        limit: usize,
    ) -> R<Vec<McpPinChangeRow>>;
    fn set_mcp_pin_change_status(
        &mut self,
        id: &str,
        status: PinChangeStatus,
        at: Timestamp,
    ) -> R<()>;

    // ---- Applied organisations (issue 12 item 5) -------------------------

    fn org(&mut self, name: &str) -> R<Option<OrgRow>>;
    /// Every organisation ever applied (up or down), ordered by name.
    fn orgs(&mut self) -> R<Vec<OrgRow>>;
    /// Insert or replace an organisation.
    fn put_org(&mut self, org: &OrgRow) -> R<()>;
    /// Every agent ever stood up for `org` (any status), ordered by name.
    fn org_agents(&mut self, org: &str) -> R<Vec<OrgAgentRow>>;
    fn org_agent_by_handler(&mut self, handler: HandlerId) -> R<Option<OrgAgentRow>>;
    /// Insert or replace the row of (org, agent).
    fn put_org_agent(&mut self, agent: &OrgAgentRow) -> R<()>;
    /// The capabilities `org` granted, ordered by (holder, key).
    fn org_grants(&mut self, org: &str) -> R<Vec<OrgGrantRow>>;
    /// Insert or replace the grant of (org, holder, key).
    fn put_org_grant(&mut self, grant: &OrgGrantRow) -> R<()>;
    fn delete_org_grant(&mut self, org: &str, holder: &str, key: &str) -> R<()>;
    /// Set (`Some`) or clear (`None`) a handler's standing instructions.
    fn set_handler_standing(
        &mut self,
        handler: HandlerId,
        text: Option<&str>,
        at: Timestamp,
    ) -> R<()>;
    fn handler_standing(&mut self, handler: HandlerId) -> R<Option<String>>;
    // ---- Talking to an agency from outside (issue 12 items 6-7) ---------

    fn insert_org_key(&mut self, key: &OrgKeyRow) -> R<()>;
    fn org_key(&mut self, id: agency_core::OrgKeyId) -> R<Option<OrgKeyRow>>;
    fn org_key_by_hash(&mut self, key_hash: &str) -> R<Option<OrgKeyRow>>;
    /// Keys (of one agency, or all), ordered by agency and age.
    fn org_keys(&mut self, agency: Option<&str>) -> R<Vec<OrgKeyRow>>;
    /// Revoke a live key; whether it was live.
    fn revoke_org_key(&mut self, id: agency_core::OrgKeyId, at: Timestamp) -> R<bool>;
    fn insert_org_message(&mut self, m: &OrgMessageRow) -> R<()>;
    fn org_message(&mut self, id: agency_core::OrgMessageId) -> R<Option<OrgMessageRow>>;
    /// The message from outside that the mail `mail` carried, if any.
    fn org_message_by_mail(&mut self, mail: MessageId) -> R<Option<OrgMessageRow>>;
    /// The last `n` messages of a conversation, oldest first.
    fn org_conversation(
        &mut self,
        conversation: agency_core::ConversationId,
        n: usize,
    ) -> R<Vec<OrgMessageRow>>;
    /// The last `n` messages from outside (of `agency`, or of all),
    /// newest first.
    fn org_messages_recent(&mut self, agency: Option<&str>, n: usize) -> R<Vec<OrgMessageRow>>;
    /// How many messages sent with API key `key` are still pending.
    /// Counted in the transaction that would add one, so that parallel
    /// requests cannot pass the cap together (issue 27).
    fn org_messages_pending_of_key(&mut self, key: agency_core::OrgKeyId) -> R<u64>;
    /// Record the reply to a pending message; whether it was pending.
    fn set_org_message_answered(
        &mut self,
        id: agency_core::OrgMessageId,
        reply: &str,
        reply_message: MessageId,
        at: Timestamp,
    ) -> R<bool>;
    // ---- Tools of applied organisations (issue 12 item 4) ----------------

    fn org_tool(&mut self, name: &str) -> R<Option<OrgToolRow>>;
    /// The tools of one organisation (or of all), ordered by name.
    fn org_tools(&mut self, org: Option<&str>) -> R<Vec<OrgToolRow>>;
    /// Insert or replace the tool named `tool.name`.
    fn put_org_tool(&mut self, tool: &OrgToolRow) -> R<()>;
    fn delete_org_tool(&mut self, name: &str) -> R<()>;

    // ---- Memory (issue 13) ------------------------------------------------

    fn insert_memory(&mut self, m: &crate::memory::MemoryRow) -> R<()>;
    fn memory(&mut self, id: agency_core::MemoryId) -> R<Option<crate::memory::MemoryRow>>;
    /// Full-text search of one handler's memories for any of `words`:
    /// (row, score) best first, at most `limit`; the score is BM25 negated
    /// (higher is better). Words without a letter or digit are dropped; none
    /// left, nothing found.
    fn search_memories(
        &mut self,
        words: &[String],
        filter: &crate::memory::MemoryFilter,
        limit: usize,
    ) -> R<Vec<(crate::memory::MemoryRow, f64)>>;
    /// Memories matching `filter`, newest first, at most `limit`.
    fn list_memories(
        &mut self,
        filter: &crate::memory::MemoryFilter,
        limit: usize,
    ) -> R<Vec<crate::memory::MemoryRow>>;
    /// Memories matching `filter` with their embedding by `model` (those
    /// without one are left out).
    fn memory_vectors(
        &mut self,
        filter: &crate::memory::MemoryFilter,
        model: &str,
    ) -> R<Vec<(crate::memory::MemoryRow, Vec<f32>)>>;
    fn put_memory_vector(
        &mut self,
        memory: agency_core::MemoryId,
        model: &str,
        vector: &[f32],
    ) -> R<()>;
    /// Live memories of `handler` that have an embedding by `model`.
    fn memory_embedded_count(&mut self, handler: HandlerId, model: &str) -> R<i64>;
    /// Set a memory's state (and `condensed_into`; `compaction` when
    /// `Some`), stamping `changed_at`.
    fn set_memory_state(
        &mut self,
        id: agency_core::MemoryId,
        state: crate::memory::MemoryState,
        condensed_into: Option<agency_core::MemoryId>,
        compaction: Option<agency_core::MemoryCompactionId>,
        at: Timestamp,
    ) -> R<()>;
    /// The memories a summary replaced.
    fn memories_condensed_into(
        &mut self,
        summary: agency_core::MemoryId,
    ) -> R<Vec<crate::memory::MemoryRow>>;
    fn memory_counts(&mut self, handler: HandlerId) -> R<crate::memory::MemoryCounts>;
    fn memory_live_count(&mut self, handler: HandlerId) -> R<i64>;
    /// The last `limit` changes of a handler's memory, newest first.
    fn memory_changes(
        &mut self,
        handler: HandlerId,
        limit: usize,
    ) -> R<Vec<crate::memory::MemoryChangeRow>>;
    /// Insert a condensation, or overwrite the one with its id.
    fn put_memory_compaction(&mut self, c: &crate::memory::MemoryCompactionRow) -> R<()>;
    fn memory_compaction(
        &mut self,
        id: agency_core::MemoryCompactionId,
    ) -> R<Option<crate::memory::MemoryCompactionRow>>;
    /// A handler's condensations, newest first.
    fn memory_compactions(
        &mut self,
        handler: HandlerId,
        limit: usize,
    ) -> R<Vec<crate::memory::MemoryCompactionRow>>;
    /// The handler's open request to condense, if any.
    fn open_memory_compaction(
        &mut self,
        handler: HandlerId,
    ) -> R<Option<crate::memory::MemoryCompactionRow>>;

    // ---- Warm agents (issue 13 item 6) -----------------------------------

    /// Set (`Some`) or clear (`None`) how long `handler`'s agent stays
    /// warm, as `source` (`user` or `org`) gives it.
    fn set_handler_keep_warm(
        &mut self,
        handler: HandlerId,
        source: &str,
        ms: Option<i64>,
        at: Timestamp,
    ) -> R<()>;
    /// Every keep-warm time of `handler` as (source, ms), ordered by source.
    fn handler_keep_warm(&mut self, handler: HandlerId) -> R<Vec<(String, i64)>>;
}
