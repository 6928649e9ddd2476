//! Which settings `agency reload` applies to a running daemon, and why
//! each is safe to change live.

use crate::Config;

impl Config {
    /// The settings in force after a reload from `self` to `new`: `new`'s
    /// values of the settings that apply live, `self`'s of the others.
    ///
    /// Live, and why each is safe: the sandbox's shared directories, the
    /// extra MCP servers and the `[agents]` timings and slots are read at each
    /// spawn, launch or timer; prices
    /// and an existing upstream's fields (its API aside, which decides what
    /// agents were started with) at each model call; retention at each
    /// collection; memory's numbers at each recall. Everything else is read
    /// once, to build what runs (listeners, runtimes, secrets, the store).
    pub fn live_part(&self, new: &Config) -> Config {
        let old = self;
        let mut cfg = old.clone();
        cfg.sandbox.toolchains.clone_from(&new.sandbox.toolchains);
        cfg.sandbox.read_write.clone_from(&new.sandbox.read_write);
        cfg.prices.clone_from(&new.prices);
        // Extra MCP servers' definitions, for agents started from now, unless
        // they could name a secret the daemon has not read (read at start).
        if new.secrets == old.secrets {
            cfg.mcp_servers.clone_from(&new.mcp_servers);
        }
        for (name, upstream) in &new.models {
            if let Some(mine) = cfg.models.get_mut(name)
                && mine.api == upstream.api
            {
                mine.clone_from(upstream);
            }
        }
        let (a, n) = (&mut cfg.agents, &new.agents);
        a.max_concurrent = n.max_concurrent;
        a.stall_after_exits = n.stall_after_exits;
        a.respawn_backoff_ms = n.respawn_backoff_ms;
        a.max_backoff_ms = n.max_backoff_ms;
        a.kill_grace_ms = n.kill_grace_ms;
        a.idle_timeout_ms = n.idle_timeout_ms;
        a.config_restart_grace_ms = n.config_restart_grace_ms;
        a.keep_warm_ms = n.keep_warm_ms;
        a.keep_warm_executive_ms = n.keep_warm_executive_ms;
        cfg.retention.acked_mail_days = new.retention.acked_mail_days;
        cfg.retention.blob_grace_minutes = new.retention.blob_grace_minutes;
        cfg.retention.event_days = new.retention.event_days;
        cfg.memory.recall_tokens = new.memory.recall_tokens;
        cfg.memory.condense_after = new.memory.condense_after;
        cfg.memory.max_per_handler = new.memory.max_per_handler;
        cfg
    }
}
