//! The conformance suite: stories every [`Store`] backend must pass, one
//! file per area of [`crate::Tx`] plus `transactions` (atomicity, panics,
//! concurrent writers).
//!
//! A story takes a factory that opens a fresh, empty store (and returns
//! whatever must outlive it, e.g. its temporary directory). A backend runs
//! the whole suite with one line in a test file:
//!
//! ```text
//! fn fresh() -> agency_store::conformance::Fresh {
//!     let dir = tempfile::tempdir().unwrap();
//!     let store = SqliteStore::open(&dir.path().join("agency.db")).unwrap();
//!     (Box::new(dir), Box::new(store))
//! }
//! agency_store::store_conformance!(fresh);
//! ```
//!
//! Compiled with the `conformance` feature only (the store's own tests turn
//! it on), so the shipped binary carries none of it. Stories assert and
//! unwrap: they are tests, run by the test harness.

#![allow(clippy::unwrap_used)]

use std::any::Any;

use crate::Store;

pub mod agents;
pub mod approvals;
pub mod audit_log;
pub mod budgets;
pub mod calls;
pub mod caps;
pub mod events;
pub mod fixtures;
pub mod handler_settings;
pub mod handlers;
pub mod kb;
pub mod leases;
pub mod lessons;
pub mod mail;
pub mod maintenance;
pub mod mcp_pins;
pub mod memory;
pub mod org_messages;
pub mod orgs;
pub mod outcomes;
pub mod pipelines;
pub mod problems;
pub mod runs;
pub mod transactions;
pub mod usage;

/// A fresh, empty store, and what must live as long as it.
pub type Fresh = (Box<dyn Any>, Box<dyn Store>);

/// What a story is given: a way to open a fresh store (some stories open
/// more than one).
pub type New = dyn Fn() -> Fresh;

/// Generate one `#[test]` per story, each on stores from `$factory` (a
/// `fn() -> Fresh`). A story not listed here does not run.
#[macro_export]
macro_rules! store_conformance {
    ($factory:path) => {
        $crate::store_conformance!(@stories $factory;
            kb::duplicate_version_is_unique_and_latest_version_follows_inserts,
            kb::kb_candidates_follow_visibility_rules,
            kb::kb_candidate_terms_are_literal_case_insensitive_substrings,
            kb::kb_audit_is_oldest_first_and_limited,
            kb::pages_of_versions_and_bounded_counts_of_files,
            kb::work_product_and_file_deletion,
            outcomes::dag_walks_on_a_diamond,
            outcomes::reassignment_and_outcome_listings,
            outcomes::history_pages_and_child_counts,
            handlers::handler_tree_and_work,
            handlers::active_subtree_counts_stop_at_the_limit,
            handlers::the_chain_of_bosses_in_one_read,
            handler_settings::model_standing_and_keep_warm_are_set_and_cleared,
            handler_settings::the_nearest_model_up_the_chain_of_bosses,
            agents::one_live_agent_per_handler,
            agents::an_agent_with_its_handler_in_one_read,
            agents::a_token_with_its_agent_and_handler_in_one_read,
            agents::tokens_and_process_groups,
            audit_log::audit_log_whole_and_in_pages,
            runs::runs_logs_progress_and_stalls,
            caps::revoke_cascades_through_derived_from,
            caps::capabilities_by_holder_kind_and_resource,
            mail::mail_scheduling_inbox_and_outbox,
            mail::mail_pages_quotas_and_retention,
            usage::model_calls_are_summed_per_handler,
            events::event_log_cursor_scopes_kinds_and_retention,
            problems::problems_open_once_per_key_and_close,
            pipelines::pipeline_runs_and_stages_round_trip,
            pipelines::pipeline_library_is_searched_by_words_kind_and_score,
            lessons::lessons_round_trip_search_and_history,
            calls::calls_are_recorded_listed_and_answered_once,
            budgets::budgets_spend_reservations_and_hops,
            budgets::budgets_of_a_chain_with_their_totals,
            approvals::approvals_are_bound_and_decided_once,
            mcp_pins::pins_seal_and_changes,
            orgs::organisations_agents_grants_and_tools,
            org_messages::keys_and_messages_from_outside,
            memory::issue13_embeddings_condensation_and_compactions_round_trip,
            memory::search_is_scoped_to_one_handler_and_states,
            maintenance::id_prefixes_counts_and_referenced_blobs,
            leases::claims_extend_refuse_and_take_over_with_higher_tokens,
            leases::renewal_returns_only_the_leases_still_owned,
            leases::the_fence_holds_only_for_the_current_token_and_release_frees_it,
            leases::expired_leases_are_listed_oldest_first_and_limited,
            leases::leases_read_by_page_and_summed_by_owner,
            leases::lease_input_is_validated,
            leases::db_now_is_the_wall_clock_in_milliseconds,
            leases::racing_owners_get_distinct_tokens,
            transactions::closure_error_rolls_back_and_is_returned_unchanged,
            transactions::panicking_closures_leave_the_store_usable,
            transactions::concurrent_writers_are_serialized_and_readers_see_snapshots,
            transactions::concurrent_read_modify_writes_lose_no_update,
        );
    };
    (@stories $factory:path; $($area:ident :: $story:ident),* $(,)?) => {
        $(
            #[test]
            fn $story() {
                $crate::conformance::$area::$story(&$factory);
            }
        )*
    };
}
