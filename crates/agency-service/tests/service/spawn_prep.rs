//! Issue 15 item 3: preparing a spawn is one store transaction. A store
//! wrapper counts the transactions the service opens; `spawn_prepare` must
//! open exactly one (a write) and still return all that the separate reads
//! it replaced returned, and write the run record with the prompt's hash.
//! The gateway's token check with its model read is held to one read the
//! same way.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agency_core::{HandlerId, Level, MailTarget, Principal, Resource};
use agency_service::{
    GrantRequest, KeepWarmDefaults, KeepWarmSetting, MailBody, MemoryConfig, RunReport,
    SpawnRequest,
};
use agency_store::{FsBlobStore, SqliteStore, Store, StoreError, Tx};

use crate::support::{Env, T0, assert_kind};

/// A store that counts the transactions run through it.
#[derive(Debug)]
struct Counting {
    inner: SqliteStore,
    reads: AtomicUsize,
    writes: AtomicUsize,
    /// Of the writes, those committed without waiting for the disk.
    lazy: AtomicUsize,
}

impl Store for Counting {
    fn read_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.read_dyn(f)
    }
    fn write_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        self.inner.write_dyn(f)
    }
    fn write_lazy_dyn(
        &self,
        f: &mut dyn FnMut(&mut dyn Tx) -> Result<(), StoreError>,
    ) -> Result<(), StoreError> {
        self.writes.fetch_add(1, Ordering::SeqCst);
        self.lazy.fetch_add(1, Ordering::SeqCst);
        self.inner.write_lazy_dyn(f)
    }
}

impl Counting {
    /// (reads, writes) since the last call.
    fn take(&self) -> (usize, usize) {
        (
            self.reads.swap(0, Ordering::SeqCst),
            self.writes.swap(0, Ordering::SeqCst),
        )
    }

    /// Lazy writes since the last call.
    fn take_lazy(&self) -> usize {
        self.lazy.swap(0, Ordering::SeqCst)
    }
}

fn env() -> (Env, Arc<Counting>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Counting {
        inner: SqliteStore::open(&dir.path().join("agency.db")).unwrap(),
        reads: AtomicUsize::new(0),
        writes: AtomicUsize::new(0),
        lazy: AtomicUsize::new(0),
    });
    let blobs = Arc::new(FsBlobStore::open(dir.path().join("blobs")).unwrap());
    let clock = Arc::new(agency_service::ManualClock::new(T0));
    let env = Env::assemble(
        dir,
        store.clone(),
        blobs,
        clock,
        agency_core::Limits::default(),
    );
    (env, store)
}

const DEFAULTS: KeepWarmDefaults = KeepWarmDefaults {
    default_ms: 0,
    executive_ms: 0,
};

fn request(h: HandlerId, ws: &std::path::Path) -> SpawnRequest<'_> {
    SpawnRequest {
        handler: h,
        workspace: ws,
        runtime: "command",
        keep_warm: DEFAULTS,
        lease: None,
    }
}

fn mail(env: &Env, h: HandlerId, subject: &str, text: &str) {
    env.svc
        .mail_send(
            Principal::User,
            MailTarget::Handler(h),
            &MailBody::Text {
                subject: Some(subject.into()),
                text: text.into(),
            },
        )
        .unwrap();
}

#[test]
fn issue_15_preparing_a_spawn_is_one_store_transaction_with_all_the_launch_needs() {
    let (env, counting) = env();
    let svc = &env.svc;
    // Past condense_after: the preparation also opens a condensation
    // request, a write inside the same transaction.
    svc.set_memory_config(MemoryConfig {
        condense_after: 1,
        ..MemoryConfig::default()
    });
    let r = env.agent(env.root);
    let a = env.outcome(env.root, "Zebra census", &[env.root.root()]);
    let h = svc.delegate(r, a, &[]).unwrap().handler;
    // Every fact the launch reads, set to something to find.
    let first = env.agent(h);
    svc.memory_store(first, "Zebra herds cross the river in May", &[], None)
        .unwrap();
    svc.memory_store(first, "Penguins prefer cold water", &[], None)
        .unwrap();
    svc.agent_record_spawn(
        first.agent_id().unwrap(),
        "command",
        "x",
        agency_core::prompt::PROMPT_VERSION,
    )
    .unwrap();
    svc.agent_finish(
        first.agent_id().unwrap(),
        &RunReport {
            reason: "killed".into(),
            normal: false,
            exit_status: None,
            ..RunReport::default()
        },
    )
    .unwrap();
    mail(&env, h, "Where do the zebra herds cross?", "Count them.");
    svc.grant(
        Principal::User,
        h,
        &GrantRequest {
            resource: Resource::McpServer("atlas".into()),
            level: Level::Read,
            delegatable: false,
        },
    )
    .unwrap();
    svc.keep_warm_set(Principal::User, h, KeepWarmSetting::For(1234), DEFAULTS)
        .unwrap();
    svc.model_set(Principal::User, h, Some("fast")).unwrap();
    agency_store::write(&**svc.store(), |tx| {
        tx.set_handler_standing(h, Some("Standing: count carefully."), T0)
    })
    .unwrap();
    svc.flush_read_audit().unwrap();
    counting.take();

    let ws = env.dir.path().join("ws");
    let p = svc.spawn_prepare(&request(h, &ws)).unwrap().unwrap();
    assert_eq!(counting.take(), (0, 1), "one write transaction, no read");
    // Its commit does not wait for the disk (the fsync is the next
    // durable commit's, after the process started).
    assert_eq!(counting.take_lazy(), 1);

    // What it returned is what the separate reads say.
    assert_eq!(p.minted.handler, h);
    let who = svc.token_authenticate(&p.minted.token).unwrap();
    assert_eq!(who.agent, p.minted.agent);
    assert_eq!(who.workspace.as_deref(), Some(ws.as_path()));
    assert!(p.system_prompt.contains("Standing: count carefully."));
    assert!(p.system_prompt.contains("Zebra census"));
    assert_eq!(
        p.prompt_hash,
        blake3::hash(p.system_prompt.as_bytes())
            .to_hex()
            .to_string()
    );
    assert_eq!(p.inbox_subjects, svc.inbox_subjects(h, 20).unwrap());
    assert_eq!(p.inbox_subjects, vec!["Where do the zebra herds cross?"]);
    assert_eq!(p.previous, svc.previous_run_abnormal(h).unwrap());
    assert_eq!(
        p.previous.as_ref().unwrap().agent,
        first.agent_id().unwrap()
    );
    let memory = p.memory.unwrap();
    assert!(
        memory.contains("> Zebra herds cross the river in May"),
        "{memory}"
    );
    assert!(!memory.contains("Penguins"), "{memory}");
    assert!(memory.contains("## Condense your memory"), "{memory}");
    assert_eq!(p.mcp_servers, svc.mcp_servers_granted(h).unwrap());
    assert!(p.mcp_servers.contains("atlas"));
    assert_eq!(p.keep_warm, Some(std::time::Duration::from_millis(1234)));
    assert_eq!(p.upstream.as_deref(), Some("fast"));
    // The run record was written in that same transaction.
    let run = svc.agent_run(Principal::User, p.minted.agent).unwrap();
    assert_eq!(run.runtime, "command");
    assert_eq!(run.prompt_hash, p.prompt_hash);
    assert_eq!(
        run.prompt_version,
        Some(i64::from(agency_core::prompt::PROMPT_VERSION))
    );
    assert_eq!(
        svc.memory_compactions(Principal::User, Some(h))
            .unwrap()
            .len(),
        1
    );
}

#[test]
fn issue_15_a_handler_that_may_not_start_gets_no_agent_and_one_transaction() {
    let (env, counting) = env();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let a = env.outcome(env.root, "A", &[env.root.root()]);
    let h = svc.delegate(r, a, &[]).unwrap().handler;
    let ws = env.dir.path().join("ws");

    // Stalled: nothing started, one transaction.
    svc.handler_mark_stalled(h, "test").unwrap();
    svc.flush_read_audit().unwrap();
    counting.take();
    assert!(svc.spawn_prepare(&request(h, &ws)).unwrap().is_none());
    assert_eq!(counting.take(), (0, 1));
    assert!(!svc.spawn_ready(h).unwrap());
    assert!(
        !svc.agents_live(Principal::User)
            .unwrap()
            .iter()
            .any(|x| x.handler == h)
    );
    // New mail clears the mark: it starts; a second start is AgentLive.
    mail(&env, h, "Go", "now");
    assert!(svc.spawn_ready(h).unwrap());
    assert!(svc.spawn_prepare(&request(h, &ws)).unwrap().is_some());
    assert_kind(svc.spawn_prepare(&request(h, &ws)), "agent_live");
    // Unknown handler: not found.
    assert_kind(
        svc.spawn_prepare(&request(HandlerId::new_random(), &ws)),
        "not_found",
    );
}

/// Issue 33 item 5 (M, the gateway's CPU per model call): the gateway's
/// token check reads the handler's model upstream in the same read
/// transaction, and it says what the two separate reads say (none, the
/// boss's inherited, the handler's own); a revoked token gets neither.
#[test]
fn issue33_the_gateway_reads_the_token_and_the_model_in_one_transaction() {
    let (env, counting) = env();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let a = env.outcome(env.root, "A", &[env.root.root()]);
    let h = svc.delegate(r, a, &[]).unwrap().handler;
    let minted = svc.token_mint(Principal::User, h, None).unwrap();
    for (on_root, on_h, want) in [
        (None, None, None),
        (Some("slow"), None, Some("slow")),
        (Some("slow"), Some("fast"), Some("fast")),
    ] {
        svc.model_set(Principal::User, env.root, on_root).unwrap();
        svc.model_set(Principal::User, h, on_h).unwrap();
        svc.flush_read_audit().unwrap();
        counting.take();
        let (id, chosen) = svc.token_model(&minted.token).unwrap();
        assert_eq!(counting.take(), (1, 0), "one read, no write");
        assert_eq!(chosen.as_deref(), want);
        assert_eq!(id, svc.token_authenticate(&minted.token).unwrap());
        assert_eq!(chosen, svc.model_effective(h).unwrap());
        assert_eq!((id.handler, id.agent), (h, minted.agent));
    }
    svc.token_revoke(Principal::User, minted.agent).unwrap();
    assert_kind(svc.token_model(&minted.token), "permission_denied");
    assert_kind(svc.token_model("agency_not-a-token"), "permission_denied");
}
