//! [`SqliteTx`]: the [`Tx`] implementation handed to transaction closures.
//!
//! It borrows a connection on which [`super::SqliteStore`] has already begun
//! the transaction; each method is one call into the table module that owns
//! the SQL, so the trait reads as a table of contents.

use agency_core::access::FileKind;
use agency_core::{
    AgentId, CapabilityId, FileId, HandlerId, MailTarget, MessageId, OutcomeId, Resource,
    ResourceKind, Timestamp,
};
use rusqlite::Connection;

use super::approvals;
use super::budgets;
use super::mcp_pins;
use super::org_messages;
use super::org_tools;
use super::{
    caps, handlers, kb, mail, outcomes, pages, processes, retention, run_logs, runs, tokens, usage,
};
use crate::blob::BlobId;
use crate::mcp_pins::{McpPinChangeRow, McpPinRow, PinChangeStatus};
use crate::model::*;
use crate::org_messages::{OrgKeyRow, OrgMessageRow};
use crate::org_tools::OrgToolRow;
use crate::orgs::{OrgAgentRow, OrgGrantRow, OrgRow};
use crate::tx::{R, SubtreeRows, Tx};

/// One open transaction (read or write) on a SQLite connection.
pub(crate) struct SqliteTx<'c> {
    conn: &'c Connection,
}

impl<'c> SqliteTx<'c> {
    pub(crate) fn new(conn: &'c Connection) -> Self {
        SqliteTx { conn }
    }
}

impl Tx for SqliteTx<'_> {
    // ---- Knowledge Base -------------------------------------------------

    fn insert_file(&mut self, file: &FileRow) -> R<()> {
        kb::insert_file(self.conn, file)
    }
    fn file(&mut self, id: FileId) -> R<Option<FileRow>> {
        kb::file(self.conn, id)
    }
    fn set_file_description(&mut self, id: FileId, description: &str) -> R<()> {
        kb::set_file_description(self.conn, id, description)
    }
    fn insert_version(&mut self, v: &VersionRow) -> R<()> {
        kb::insert_version(self.conn, v)
    }
    fn version(&mut self, file: FileId, version: i64) -> R<Option<VersionRow>> {
        kb::version(self.conn, file, version)
    }
    fn versions(&mut self, file: FileId) -> R<Vec<VersionRow>> {
        kb::versions(self.conn, file)
    }
    fn all_versions(&mut self) -> R<Vec<VersionRow>> {
        kb::all_versions(self.conn)
    }
    fn insert_kb_audit(&mut self, rows: &[KbAuditRow]) -> R<()> {
        kb::insert_kb_audit(self.conn, rows)
    }
    fn kb_audit(&mut self, file: FileId, limit: usize) -> R<Vec<KbAuditRow>> {
        kb::kb_audit(self.conn, file, limit)
    }
    fn kb_candidates(
        &mut self,
        handler: Option<HandlerId>,
        terms: &[String],
        after: Option<FileId>,
        limit: usize,
    ) -> R<Vec<KbCandidate>> {
        kb::kb_candidates(self.conn, handler, terms, after, limit)
    }
    fn work_product(&mut self, handlers: &[HandlerId]) -> R<Vec<FileRow>> {
        caps::work_product(self.conn, handlers)
    }

    // ---- Outcomes --------------------------------------------------------

    fn insert_outcome(&mut self, o: &OutcomeRow) -> R<()> {
        outcomes::insert_outcome(self.conn, o)
    }
    fn outcome(&mut self, id: OutcomeId) -> R<Option<OutcomeRow>> {
        outcomes::outcome(self.conn, id)
    }
    fn update_outcome(&mut self, o: &OutcomeRow) -> R<()> {
        outcomes::update_outcome(self.conn, o)
    }
    fn insert_edge(&mut self, parent: OutcomeId, child: OutcomeId) -> R<()> {
        outcomes::insert_edge(self.conn, parent, child)
    }
    fn delete_edge(&mut self, parent: OutcomeId, child: OutcomeId) -> R<()> {
        outcomes::delete_edge(self.conn, parent, child)
    }
    fn parents(&mut self, id: OutcomeId) -> R<Vec<OutcomeId>> {
        outcomes::parents(self.conn, id)
    }
    fn children(&mut self, id: OutcomeId) -> R<Vec<OutcomeId>> {
        outcomes::children(self.conn, id)
    }
    fn is_descendant_or_self(&mut self, node: OutcomeId, ancestor: OutcomeId) -> R<bool> {
        outcomes::is_descendant_or_self(self.conn, node, ancestor)
    }
    fn ancestor_edges(&mut self, id: OutcomeId) -> R<Vec<(OutcomeId, OutcomeId)>> {
        outcomes::ancestor_edges(self.conn, id)
    }
    fn subtree(&mut self, id: OutcomeId, limit: usize) -> R<SubtreeRows> {
        outcomes::subtree(self.conn, id, limit)
    }
    fn reassign_subtree(
        &mut self,
        root: OutcomeId,
        from: HandlerId,
        to: HandlerId,
        at: Timestamp,
    ) -> R<u64> {
        outcomes::reassign_subtree(self.conn, root, from, to, at)
    }
    fn reassign_all(&mut self, from: &[HandlerId], to: HandlerId, at: Timestamp) -> R<u64> {
        outcomes::reassign_all(self.conn, from, to, at)
    }
    fn insert_outcome_event(&mut self, e: &OutcomeEventRow) -> R<()> {
        outcomes::insert_outcome_event(self.conn, e)
    }
    fn outcome_events(&mut self, id: OutcomeId) -> R<Vec<OutcomeEventRow>> {
        outcomes::outcome_events(self.conn, id)
    }
    fn open_process_inbox(&mut self, handler: HandlerId) -> R<Option<OutcomeId>> {
        outcomes::open_process_inbox(self.conn, handler)
    }
    fn outcomes_of(&mut self, handler: HandlerId, limit: usize) -> R<Vec<OutcomeRow>> {
        outcomes::outcomes_of(self.conn, handler, limit)
    }

    // ---- Handlers --------------------------------------------------------

    fn insert_handler(&mut self, h: &HandlerRow) -> R<()> {
        handlers::insert_handler(self.conn, h)
    }
    fn handler(&mut self, id: HandlerId) -> R<Option<HandlerRow>> {
        handlers::handler(self.conn, id)
    }
    fn update_handler(&mut self, h: &HandlerRow) -> R<()> {
        handlers::update_handler(self.conn, h)
    }
    fn root_handler(&mut self) -> R<Option<HandlerRow>> {
        handlers::root_handler(self.conn)
    }
    fn handler_subtree(&mut self, id: HandlerId) -> R<Vec<HandlerRow>> {
        handlers::handler_subtree(self.conn, id)
    }
    fn underlings(&mut self, id: HandlerId) -> R<Vec<HandlerRow>> {
        handlers::underlings(self.conn, id)
    }
    fn handlers(&mut self, after: Option<HandlerId>, limit: usize) -> R<Vec<HandlerRow>> {
        handlers::handlers(self.conn, after, limit)
    }
    fn handlers_with_work(&mut self, after: Option<HandlerId>, limit: usize) -> R<Vec<HandlerId>> {
        handlers::handlers_with_work(self.conn, after, limit)
    }
    fn has_work(&mut self, id: HandlerId) -> R<bool> {
        handlers::has_work(self.conn, id)
    }

    // ---- Capabilities ----------------------------------------------------

    fn insert_capability(&mut self, c: &NewCapability) -> R<CapabilityId> {
        caps::insert_capability(self.conn, c)
    }
    fn capability(&mut self, id: CapabilityId) -> R<Option<CapabilityRow>> {
        caps::capability(self.conn, id)
    }
    fn capabilities_on(&mut self, holder: HandlerId, resource: &Resource) -> R<Vec<CapabilityRow>> {
        caps::capabilities_on(self.conn, holder, resource)
    }
    fn capabilities_held(&mut self, holder: HandlerId) -> R<Vec<CapabilityRow>> {
        caps::capabilities_held(self.conn, holder)
    }
    fn capabilities_of_kind(
        &mut self,
        holder: HandlerId,
        kind: ResourceKind,
    ) -> R<Vec<CapabilityRow>> {
        caps::capabilities_of_kind(self.conn, holder, kind)
    }
    fn revoke(&mut self, selector: &RevokeSelector, at: Timestamp) -> R<Vec<CapabilityRow>> {
        caps::revoke(self.conn, selector, at)
    }

    // ---- Mail ------------------------------------------------------------

    fn insert_message(&mut self, m: &MessageRow) -> R<()> {
        mail::insert_message(self.conn, m)
    }
    fn message(&mut self, id: MessageId) -> R<Option<MessageRow>> {
        mail::message(self.conn, id)
    }
    fn set_delivered(&mut self, id: MessageId, at: Timestamp) -> R<()> {
        mail::set_delivered(self.conn, id, at)
    }
    fn set_acked(&mut self, id: MessageId, at: Timestamp) -> R<()> {
        mail::set_acked(self.conn, id, at)
    }
    fn set_dropped(&mut self, id: MessageId, at: Timestamp, reason: &str) -> R<()> {
        mail::set_dropped(self.conn, id, at, reason)
    }
    fn due_messages(&mut self, now: Timestamp, limit: usize) -> R<Vec<MessageRow>> {
        mail::due_messages(self.conn, now, limit)
    }
    fn next_due(&mut self) -> R<Option<Timestamp>> {
        mail::next_due(self.conn)
    }
    fn inbox(&mut self, to: MailTarget, limit: usize) -> R<Vec<MessageRow>> {
        mail::inbox(self.conn, to, limit)
    }
    fn inbox_count(&mut self, to: MailTarget) -> R<i64> {
        mail::inbox_count(self.conn, to)
    }
    fn received(&mut self, to: MailTarget, limit: usize) -> R<Vec<MessageRow>> {
        mail::received(self.conn, to, limit)
    }
    fn outbox(&mut self, from: MailTarget, limit: usize) -> R<Vec<MessageRow>> {
        mail::outbox(self.conn, from, limit)
    }

    // ---- Agents ----------------------------------------------------------

    fn insert_agent(&mut self, a: &AgentRow) -> R<()> {
        handlers::insert_agent(self.conn, a)
    }
    fn agent(&mut self, id: AgentId) -> R<Option<AgentRow>> {
        handlers::agent(self.conn, id)
    }
    fn end_agent(&mut self, id: AgentId, at: Timestamp, reason: &str) -> R<bool> {
        handlers::end_agent(self.conn, id, at, reason)
    }
    fn live_agents_of(&mut self, handlers: &[HandlerId]) -> R<Vec<AgentRow>> {
        handlers::live_agents_of(self.conn, handlers)
    }
    fn live_agents(&mut self) -> R<Vec<AgentRow>> {
        handlers::live_agents(self.conn)
    }
    fn recent_agents(&mut self, limit: usize) -> R<Vec<AgentRow>> {
        handlers::recent_agents(self.conn, limit)
    }

    // ---- Handler audit logs ---------------------------------------------

    fn insert_log_entry(&mut self, e: &LogEntryRow) -> R<()> {
        handlers::insert_log_entry(self.conn, e)
    }
    fn log_entries(&mut self, handler: HandlerId) -> R<Vec<LogEntryRow>> {
        handlers::log_entries(self.conn, handler)
    }

    // ---- Agent runs and stalls --------------------------------------------

    fn put_agent_run(&mut self, r: &AgentRunRow) -> R<()> {
        runs::put_agent_run(self.conn, r)
    }
    fn agent_run(&mut self, agent: AgentId) -> R<Option<AgentRunRow>> {
        runs::agent_run(self.conn, agent)
    }
    fn set_agent_run_log(&mut self, agent: AgentId, log: &BlobId) -> R<bool> {
        run_logs::set_agent_run_log(self.conn, agent, log)
    }
    fn agent_run_log(&mut self, agent: AgentId) -> R<Option<BlobId>> {
        run_logs::agent_run_log(self.conn, agent)
    }
    fn runs(
        &mut self,
        handlers: Option<&[HandlerId]>,
        before: Option<Timestamp>,
        limit: usize,
    ) -> R<Vec<AgentWithRun>> {
        runs::runs(self.conn, handlers, before, limit)
    }
    fn last_ended_run(&mut self, handler: HandlerId) -> R<Option<AgentWithRun>> {
        runs::last_ended_run(self.conn, handler)
    }
    fn agent_made_progress(&mut self, agent: AgentId) -> R<bool> {
        runs::agent_made_progress(self.conn, agent)
    }
    fn agent_logged(&mut self, agent: AgentId) -> R<bool> {
        runs::agent_logged(self.conn, agent)
    }
    fn set_stalled(&mut self, handler: HandlerId, at: Timestamp, reason: &str) -> R<()> {
        runs::set_stalled(self.conn, handler, at, reason)
    }
    fn clear_stalled(&mut self, handler: HandlerId) -> R<bool> {
        runs::clear_stalled(self.conn, handler)
    }
    fn stalled(&mut self, handler: HandlerId) -> R<Option<(Timestamp, String)>> {
        runs::stalled(self.conn, handler)
    }

    // ---- Tokens ----------------------------------------------------------

    fn insert_token(&mut self, t: &TokenRow) -> R<()> {
        tokens::insert_token(self.conn, t)
    }
    fn token(&mut self, hash: &str) -> R<Option<TokenRow>> {
        tokens::token(self.conn, hash)
    }
    fn revoke_tokens_of(&mut self, agent: AgentId, at: Timestamp) -> R<u64> {
        tokens::revoke_tokens_of(self.conn, agent, at)
    }

    // ---- Misc ------------------------------------------------------------

    fn ids_with_prefix(&mut self, kind: IdKind, prefix: &str, limit: usize) -> R<Vec<uuid::Uuid>> {
        tokens::ids_with_prefix(self.conn, kind, prefix, limit)
    }
    fn counts(&mut self) -> R<StoreCounts> {
        handlers::counts(self.conn)
    }

    // ---- Agent process groups --------------------------------------------

    fn put_agent_process(&mut self, r: &AgentProcessRow) -> R<()> {
        processes::put_agent_process(self.conn, r)
    }
    fn live_agent_processes(&mut self) -> R<Vec<AgentProcessRow>> {
        processes::live_agent_processes(self.conn)
    }

    // ---- Bounded pages ----------------------------------------------------

    fn outcome_event_count(&mut self, id: OutcomeId) -> R<i64> {
        pages::outcome_event_count(self.conn, id)
    }
    fn outcome_events_after(
        &mut self,
        id: OutcomeId,
        after: Option<i64>,
        limit: usize,
    ) -> R<Vec<(i64, OutcomeEventRow)>> {
        pages::outcome_events_after(self.conn, id, after, limit)
    }
    fn outcome_events_latest(
        &mut self,
        id: OutcomeId,
        limit: usize,
    ) -> R<Vec<(i64, OutcomeEventRow)>> {
        pages::outcome_events_latest(self.conn, id, limit)
    }
    fn log_entry_count(&mut self, handler: HandlerId) -> R<i64> {
        pages::log_entry_count(self.conn, handler)
    }
    fn log_entries_after(
        &mut self,
        handler: HandlerId,
        after: Option<i64>,
        limit: usize,
    ) -> R<Vec<(i64, LogEntryRow)>> {
        pages::log_entries_after(self.conn, handler, after, limit)
    }
    fn log_entries_latest(
        &mut self,
        handler: HandlerId,
        limit: usize,
    ) -> R<Vec<(i64, LogEntryRow)>> {
        pages::log_entries_latest(self.conn, handler, limit)
    }
    fn log_entries_of_agent(
        &mut self,
        handler: HandlerId,
        agent: AgentId,
        prefix: &str,
        limit: usize,
    ) -> R<Vec<LogEntryRow>> {
        pages::log_entries_of_agent(self.conn, handler, agent, prefix, limit)
    }
    fn child_counts(&mut self, id: OutcomeId) -> R<(i64, i64)> {
        pages::child_counts(self.conn, id)
    }
    fn children_by_state(
        &mut self,
        id: OutcomeId,
        finished: bool,
        limit: usize,
    ) -> R<Vec<OutcomeId>> {
        pages::children_by_state(self.conn, id, finished, limit)
    }
    fn versions_after(
        &mut self,
        file: FileId,
        after: Option<i64>,
        limit: usize,
    ) -> R<Vec<VersionRow>> {
        pages::versions_after(self.conn, file, after, limit)
    }
    fn inbox_after(
        &mut self,
        to: MailTarget,
        after: Option<MessageId>,
        limit: usize,
    ) -> R<Vec<MessageRow>> {
        pages::inbox_after(self.conn, to, after, limit)
    }
    fn outbox_before(
        &mut self,
        from: MailTarget,
        before: Option<MessageId>,
        limit: usize,
    ) -> R<Vec<MessageRow>> {
        pages::outbox_before(self.conn, from, before, limit)
    }

    // ---- Quotas and retention --------------------------------------------

    fn pending_mail_from(&mut self, from: MailTarget, limit: usize) -> R<usize> {
        retention::pending_mail_from(self.conn, from, limit)
    }
    fn files_created_by(&mut self, handler: HandlerId, kind: FileKind, limit: usize) -> R<usize> {
        retention::files_created_by(self.conn, handler, kind, limit)
    }
    fn outcomes_created_by(&mut self, handler: HandlerId, limit: usize) -> R<usize> {
        retention::outcomes_created_by(self.conn, handler, limit)
    }
    fn active_subtree_size(&mut self, id: HandlerId, limit: usize) -> R<usize> {
        retention::active_subtree_size(self.conn, id, limit)
    }
    fn acked_messages_before(
        &mut self,
        before: Timestamp,
        after: Option<(Timestamp, MessageId)>,
        limit: usize,
    ) -> R<Vec<MessageRow>> {
        retention::acked_messages_before(self.conn, before, after, limit)
    }
    fn delete_message(&mut self, id: MessageId) -> R<()> {
        retention::delete_message(self.conn, id)
    }
    fn delete_messages_carrying(&mut self, file: FileId) -> R<usize> {
        retention::delete_messages_carrying(self.conn, file)
    }
    fn file_in_unexpired_mail(&mut self, file: FileId, before: Timestamp) -> R<bool> {
        retention::file_in_unexpired_mail(self.conn, file, before)
    }
    fn live_capabilities_on(&mut self, resource: &Resource) -> R<Vec<CapabilityRow>> {
        retention::live_capabilities_on(self.conn, resource)
    }
    fn delete_file(&mut self, id: FileId) -> R<()> {
        retention::delete_file(self.conn, id)
    }
    fn referenced_blobs(&mut self, candidates: &[BlobId]) -> R<Vec<BlobId>> {
        retention::referenced_blobs(self.conn, candidates)
    }

    fn insert_model_call(&mut self, call: &ModelCallRow) -> R<()> {
        usage::insert_model_call(self.conn, call)
    }
    fn model_usage_of(&mut self, handlers: &[HandlerId]) -> R<Vec<UsageTotals>> {
        usage::model_usage_of(self.conn, handlers)
    }
    fn model_calls_of_agent(&mut self, agent: AgentId, limit: usize) -> R<Vec<ModelCallRow>> {
        usage::model_calls_of_agent(self.conn, agent, limit)
    }

    fn set_handler_model(
        &mut self,
        handler: HandlerId,
        upstream: Option<&str>,
        at: Timestamp,
    ) -> R<()> {
        super::handler_models::set_handler_model(self.conn, handler, upstream, at)
    }
    fn handler_model(&mut self, handler: HandlerId) -> R<Option<String>> {
        super::handler_models::handler_model(self.conn, handler)
    }

    fn set_budget(&mut self, budget: &BudgetRow) -> R<()> {
        budgets::set_budget(self.conn, budget)
    }
    fn budget_of(&mut self, handler: HandlerId) -> R<Option<BudgetRow>> {
        budgets::budget_of(self.conn, handler)
    }
    fn paused_budgets(&mut self) -> R<Vec<BudgetRow>> {
        budgets::paused_budgets(self.conn)
    }
    fn insert_budget_reservation(&mut self, r: &BudgetReservationRow) -> R<i64> {
        budgets::insert_reservation(self.conn, r)
    }
    fn delete_budget_reservation(&mut self, id: i64) -> R<()> {
        budgets::delete_reservation(self.conn, id)
    }
    fn budget_reserved_of(&mut self, handlers: &[HandlerId]) -> R<ReservedTotals> {
        budgets::reserved_of(self.conn, handlers)
    }
    fn clear_budget_reservations(&mut self) -> R<usize> {
        budgets::clear_reservations(self.conn)
    }

    fn insert_approval(&mut self, a: &ApprovalRow) -> R<agency_core::policy::ApprovalId> {
        approvals::insert_approval(self.conn, a)
    }
    fn approval(&mut self, id: agency_core::policy::ApprovalId) -> R<Option<ApprovalRow>> {
        approvals::approval(self.conn, id)
    }
    fn approvals_bound(
        &mut self,
        handler: HandlerId,
        tool: &str,
        args_hash: &str,
    ) -> R<Vec<ApprovalRow>> {
        approvals::approvals_bound(self.conn, handler, tool, args_hash)
    }
    fn update_approval(&mut self, a: &ApprovalRow, from: ApprovalStatus) -> R<bool> {
        approvals::update_approval(self.conn, a, from)
    }
    fn approvals_list(
        &mut self,
        all: bool,
        handler: Option<HandlerId>,
        limit: usize,
    ) -> R<Vec<ApprovalRow>> {
        approvals::approvals_list(self.conn, all, handler, limit)
    }
    fn set_capability_approval(&mut self, cap: CapabilityId, mode: &str) -> R<()> {
        approvals::set_capability_approval(self.conn, cap, mode)
    }
    fn capability_approval(&mut self, cap: CapabilityId) -> R<Option<String>> {
        approvals::capability_approval(self.conn, cap)
    }
    fn delete_budget(&mut self, handler: HandlerId) -> R<()> {
        budgets::delete_budget(self.conn, handler)
    }
    fn budget_reservation(&mut self, id: i64) -> R<Option<BudgetReservationRow>> {
        budgets::reservation(self.conn, id)
    }
    fn budget_spend_of(&mut self, handler: HandlerId) -> R<BudgetSpend> {
        budgets::spend_of(self.conn, handler)
    }
    fn budget_spend_add(&mut self, handlers: &[HandlerId], delta: &BudgetSpend) -> R<()> {
        budgets::spend_add(self.conn, handlers, delta)
    }
    fn handler_hops(&mut self, handler: HandlerId) -> R<i64> {
        budgets::handler_hops(self.conn, handler)
    }
    fn set_handler_hops(&mut self, handler: HandlerId, hops: i64) -> R<()> {
        budgets::set_handler_hops(self.conn, handler, hops)
    }
    fn mcp_pin_sealed(&mut self, server: &str) -> R<bool> {
        mcp_pins::sealed(self.conn, server)
    }
    fn mcp_pin_seal(&mut self, server: &str, at: Timestamp) -> R<()> {
        mcp_pins::seal(self.conn, server, at)
    }
    fn mcp_pin(&mut self, server: &str, tool: &str) -> R<Option<McpPinRow>> {
        mcp_pins::pin(self.conn, server, tool)
    }
    fn put_mcp_pin(&mut self, pin: &McpPinRow) -> R<()> {
        mcp_pins::put_pin(self.conn, pin)
    }
    fn mcp_pins(&mut self, server: Option<&str>) -> R<Vec<McpPinRow>> {
        mcp_pins::pins(self.conn, server)
    }
    fn insert_mcp_pin_change(&mut self, change: &McpPinChangeRow) -> R<()> {
        mcp_pins::insert_change(self.conn, change)
    }
    fn mcp_pin_change(&mut self, id: &str) -> R<Option<McpPinChangeRow>> {
        mcp_pins::change(self.conn, id)
    }
    fn mcp_pin_open_change(
        &mut self,
        server: &str,
        tool: &str,
        new_hash: &str,
        old_hash: Option<&str>,
    ) -> R<Option<McpPinChangeRow>> {
        mcp_pins::open_change(self.conn, server, tool, new_hash, old_hash)
    }
    fn mcp_pin_changes(
        &mut self,
        status: Option<PinChangeStatus>,
        tool: Option<(&str, &str)>,
        limit: usize,
    ) -> R<Vec<McpPinChangeRow>> {
        mcp_pins::changes(self.conn, status, tool, limit)
    }
    fn set_mcp_pin_change_status(
        &mut self,
        id: &str,
        status: PinChangeStatus,
        at: Timestamp,
    ) -> R<()> {
        mcp_pins::set_change_status(self.conn, id, status, at)
    }

    fn org(&mut self, name: &str) -> R<Option<OrgRow>> {
        super::orgs::org(self.conn, name)
    }
    fn orgs(&mut self) -> R<Vec<OrgRow>> {
        super::orgs::orgs(self.conn)
    }
    fn put_org(&mut self, org: &OrgRow) -> R<()> {
        super::orgs::put_org(self.conn, org)
    }
    fn org_agents(&mut self, org: &str) -> R<Vec<OrgAgentRow>> {
        super::orgs::org_agents(self.conn, org)
    }
    fn org_agent_by_handler(&mut self, handler: HandlerId) -> R<Option<OrgAgentRow>> {
        super::orgs::org_agent_by_handler(self.conn, handler)
    }
    fn put_org_agent(&mut self, agent: &OrgAgentRow) -> R<()> {
        super::orgs::put_org_agent(self.conn, agent)
    }
    fn org_grants(&mut self, org: &str) -> R<Vec<OrgGrantRow>> {
        super::orgs::org_grants(self.conn, org)
    }
    fn put_org_grant(&mut self, grant: &OrgGrantRow) -> R<()> {
        super::orgs::put_org_grant(self.conn, grant)
    }
    fn delete_org_grant(&mut self, org: &str, holder: &str, key: &str) -> R<()> {
        super::orgs::delete_org_grant(self.conn, org, holder, key)
    }
    fn set_handler_standing(
        &mut self,
        handler: HandlerId,
        text: Option<&str>,
        at: Timestamp,
    ) -> R<()> {
        super::orgs::set_standing(self.conn, handler, text, at)
    }
    fn handler_standing(&mut self, handler: HandlerId) -> R<Option<String>> {
        super::orgs::standing(self.conn, handler)
    }
    fn insert_org_key(&mut self, key: &OrgKeyRow) -> R<()> {
        org_messages::insert_key(self.conn, key)
    }
    fn org_key(&mut self, id: agency_core::OrgKeyId) -> R<Option<OrgKeyRow>> {
        org_messages::key(self.conn, id)
    }
    fn org_key_by_hash(&mut self, key_hash: &str) -> R<Option<OrgKeyRow>> {
        org_messages::key_by_hash(self.conn, key_hash)
    }
    fn org_keys(&mut self, agency: Option<&str>) -> R<Vec<OrgKeyRow>> {
        org_messages::keys(self.conn, agency)
    }
    fn revoke_org_key(&mut self, id: agency_core::OrgKeyId, at: Timestamp) -> R<bool> {
        org_messages::revoke_key(self.conn, id, at)
    }
    fn insert_org_message(&mut self, m: &OrgMessageRow) -> R<()> {
        org_messages::insert_message(self.conn, m)
    }
    fn org_message(&mut self, id: agency_core::OrgMessageId) -> R<Option<OrgMessageRow>> {
        org_messages::message(self.conn, id)
    }
    fn org_message_by_mail(&mut self, mail: MessageId) -> R<Option<OrgMessageRow>> {
        org_messages::message_by_mail(self.conn, mail)
    }
    fn org_messages_recent(&mut self, agency: Option<&str>, n: usize) -> R<Vec<OrgMessageRow>> {
        org_messages::recent(self.conn, agency, n)
    }
    fn org_conversation(
        &mut self,
        conversation: agency_core::ConversationId,
        n: usize,
    ) -> R<Vec<OrgMessageRow>> {
        org_messages::conversation(self.conn, conversation, n)
    }
    fn org_messages_pending_of_key(&mut self, key: agency_core::OrgKeyId) -> R<u64> {
        org_messages::pending_of_key(self.conn, key)
    }
    fn set_org_message_answered(
        &mut self,
        id: agency_core::OrgMessageId,
        reply: &str,
        reply_message: MessageId,
        at: Timestamp,
    ) -> R<bool> {
        org_messages::set_answered(self.conn, id, reply, reply_message, at)
    }
    fn org_tool(&mut self, name: &str) -> R<Option<OrgToolRow>> {
        org_tools::tool(self.conn, name)
    }
    fn org_tools(&mut self, org: Option<&str>) -> R<Vec<OrgToolRow>> {
        org_tools::tools(self.conn, org)
    }
    fn put_org_tool(&mut self, tool: &OrgToolRow) -> R<()> {
        org_tools::put(self.conn, tool)
    }
    fn delete_org_tool(&mut self, name: &str) -> R<()> {
        org_tools::delete(self.conn, name)
    }

    // ---- Memory (issue 13) ------------------------------------------------

    fn insert_memory(&mut self, m: &crate::memory::MemoryRow) -> R<()> {
        super::memory::insert(self.conn, m)
    }
    fn memory(&mut self, id: agency_core::MemoryId) -> R<Option<crate::memory::MemoryRow>> {
        super::memory::get(self.conn, id)
    }
    fn search_memories(
        &mut self,
        words: &[String],
        filter: &crate::memory::MemoryFilter,
        limit: usize,
    ) -> R<Vec<(crate::memory::MemoryRow, f64)>> {
        super::memory::search(self.conn, words, filter, limit)
    }
    fn list_memories(
        &mut self,
        filter: &crate::memory::MemoryFilter,
        limit: usize,
    ) -> R<Vec<crate::memory::MemoryRow>> {
        super::memory::list(self.conn, filter, limit)
    }
    fn memory_vectors(
        &mut self,
        filter: &crate::memory::MemoryFilter,
        model: &str,
    ) -> R<Vec<(crate::memory::MemoryRow, Vec<f32>)>> {
        super::memory::vectors(self.conn, filter, model)
    }
    fn put_memory_vector(
        &mut self,
        memory: agency_core::MemoryId,
        model: &str,
        vector: &[f32],
    ) -> R<()> {
        super::memory::put_vector(self.conn, memory, model, vector)
    }
    fn memory_embedded_count(&mut self, handler: HandlerId, model: &str) -> R<i64> {
        super::memory::embedded_count(self.conn, handler, model)
    }
    fn set_memory_state(
        &mut self,
        id: agency_core::MemoryId,
        state: crate::memory::MemoryState,
        condensed_into: Option<agency_core::MemoryId>,
        compaction: Option<agency_core::MemoryCompactionId>,
        at: Timestamp,
    ) -> R<()> {
        super::memory::set_state(self.conn, id, state, condensed_into, compaction, at)
    }
    fn memories_condensed_into(
        &mut self,
        summary: agency_core::MemoryId,
    ) -> R<Vec<crate::memory::MemoryRow>> {
        super::memory::condensed_into(self.conn, summary)
    }
    fn memory_counts(&mut self, handler: HandlerId) -> R<crate::memory::MemoryCounts> {
        super::memory::counts(self.conn, handler)
    }
    fn memory_live_count(&mut self, handler: HandlerId) -> R<i64> {
        super::memory::live_count(self.conn, handler)
    }
    fn memory_changes(
        &mut self,
        handler: HandlerId,
        limit: usize,
    ) -> R<Vec<crate::memory::MemoryChangeRow>> {
        super::memory::changes(self.conn, handler, limit)
    }
    fn put_memory_compaction(&mut self, c: &crate::memory::MemoryCompactionRow) -> R<()> {
        super::memory::put_compaction(self.conn, c)
    }
    fn memory_compaction(
        &mut self,
        id: agency_core::MemoryCompactionId,
    ) -> R<Option<crate::memory::MemoryCompactionRow>> {
        super::memory::compaction(self.conn, id)
    }
    fn memory_compactions(
        &mut self,
        handler: HandlerId,
        limit: usize,
    ) -> R<Vec<crate::memory::MemoryCompactionRow>> {
        super::memory::compactions(self.conn, handler, limit)
    }
    fn open_memory_compaction(
        &mut self,
        handler: HandlerId,
    ) -> R<Option<crate::memory::MemoryCompactionRow>> {
        super::memory::open_compaction(self.conn, handler)
    }

    // ---- Warm agents (issue 13 item 6) -----------------------------------

    fn set_handler_keep_warm(
        &mut self,
        handler: HandlerId,
        source: &str,
        ms: Option<i64>,
        at: Timestamp,
    ) -> R<()> {
        super::keep_warm::set(self.conn, handler, source, ms, at)
    }
    fn handler_keep_warm(&mut self, handler: HandlerId) -> R<Vec<(String, i64)>> {
        super::keep_warm::get(self.conn, handler)
    }
}
