//! Confining agents: every agent process starts as
//! `agency sandbox-exec --policy FILE -- PROGRAM ARGS…`, which applies the
//! spawn's policy to itself (Landlock filesystem and TCP-connect rules,
//! seccomp, no_new_privs, capabilities dropped, rlimits, the agent's
//! cgroup) and then execs the runtime's program. Everything the agent
//! starts afterwards — shells, builds, the `agency mcp-launch` launchers
//! and the extra MCP servers they exec — inherits all of it: Landlock
//! domains, seccomp filters, no_new_privs, rlimits and cgroup membership
//! pass to children and survive exec, and cannot be dropped.
//!
//! The policy of one spawn:
//! - read-write: the directories beneath the spawn's directory
//!   `run/<uuid>/` that it works in (its workspace, and the run directory
//!   holding HOME, TMPDIR and the runtime's files), plus
//!   `[sandbox].read_write`; never the spawn's directory itself, which
//!   holds the policy (`sandbox.json`): the daemon starts more processes
//!   under that file for the agent's whole life (`repo_push`'s
//!   upload-pack), so an agent able to rewrite it would choose its own
//!   walls for them;
//! - read-only: the system's directories (`agency_sandbox::
//!   system_read_only`), the `agency` program, the runtime's program and
//!   its install directory (and, for a script, its interpreter's), and
//!   `[sandbox].toolchains`. Nothing else: not the Agency home, not the
//!   user's home;
//! - TCP connect: the daemon's MCP port (which serves the model gateway
//!   too) and the ports the supervisor is given (the egress proxy); no
//!   model server, local or remote, is reached directly;
//! - the agent's own cgroup (processes, memory), killed when it stops.
//!
//! Every configured limit is kept or refused: a `[sandbox]
//! memory_mb` set in the file that no cgroup memory controller (v2, or
//! v1's `memory` hierarchy) can keep per agent tree stops the daemon's
//! start ([`Confiner::start`]), and `agency status` lists the limits in
//! force and what keeps each ([`Confiner::limits`]).
//!
//! Fail closed: with `agents.sandbox = "on"`, a sandbox that is not
//! available (no Landlock, no cgroups) or a policy that cannot be built
//! keeps the agent from starting, and the error says why and names the
//! way out. Only `agents.sandbox = "off"` runs agents unconfined.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agency_sandbox::{AgentCgroup, Cgroups, Hierarchy, Limits, Policy};
use tokio::process::Command;

use crate::runtime::{SpawnSpec, write_private};
use agency_api::{LimitResource, LimitScope, LimitView};
use agency_config::Config;
use agency_config::sandbox::{SandboxConfig, overlaps_home};

/// What an agent whose sandbox cannot be applied is told to do about it.
pub const WAY_OUT: &str = "the agent was not started; fix the cause, or set agents.sandbox = \"off\" in agency.toml to run agents unconfined (they can then read this whole home, admin.token and agency.db included)";

/// Whether and how agents are confined, decided once at daemon start.
#[derive(Debug)]
enum Mode {
    On(Cgroups),
    Off,
    /// On, but no runtime is configured: no agent is ever started, so
    /// nothing was probed or created at start. The first confined process
    /// that is not an agent (a pipeline's live ToolRunner, an organisation
    /// tool) probes and opens the cgroups then (`Confiner::opened`).
    Idle,
    /// On in the configuration, but the machine cannot confine: every
    /// spawn fails with this cause.
    Unavailable(String),
}

/// Builds each spawn's policy and wraps its command.
#[derive(Debug)]
pub struct Confiner {
    mode: Mode,
    /// `Mode::Idle`'s mode once a confined process needed it: `On` or
    /// `Unavailable`, decided once.
    opened: std::sync::OnceLock<Mode>,
    /// `[sandbox]` as at start, for opening the cgroups late (`Idle`).
    sandbox: SandboxConfig,
    /// The home, canonical: nothing of it may be granted.
    home: PathBuf,
    /// The `agency` binary that runs `sandbox-exec` (and, inside the
    /// sandbox, `agent` and `mcp-launch`).
    agency: PathBuf,
    /// `[sandbox] toolchains` and `read_write`, replaced by `agency
    /// reload`: each policy built afterwards grants the new ones.
    dirs: agency_config::live::Live<SharedDirs>,
    limits: Limits,
    /// The daemon's MCP (and model gateway) port.
    ports: Vec<u16>,
    /// The system paths every policy reads (`/etc` listed entry by
    /// entry), gathered once at start rather than on every spawn.
    system_read_only: Vec<PathBuf>,
}

/// The directories every confined process may read (`toolchains`) or
/// write (`read_write`) besides its own.
#[derive(Debug, Default)]
pub struct SharedDirs {
    pub toolchains: Vec<PathBuf>,
    pub read_write: Vec<PathBuf>,
}

impl SharedDirs {
    pub fn of(cfg: &SandboxConfig) -> SharedDirs {
        SharedDirs {
            toolchains: cfg.toolchains.iter().map(PathBuf::from).collect(),
            read_write: cfg.read_write.iter().map(PathBuf::from).collect(),
        }
    }
}

/// A confined spawn's policy file, the program it grants, its cgroup.
struct Prepared {
    policy: PathBuf,
    program: PathBuf,
    cgroup: AgentCgroup,
}

/// A standby sandbox to start: the `sandbox-exec --await-command` command,
/// the program its policy was built for (a spawn of another cannot use
/// it) and its cgroup.
#[derive(Debug)]
pub struct Standby {
    pub command: Command,
    pub program: PathBuf,
    pub cgroup: AgentCgroup,
}

/// Errors that keep an agent from starting confined.
#[derive(Debug, thiserror::Error)]
#[error("failed to confine the agent: {0}; {WAY_OUT}")]
pub struct ConfineError(String);

/// The directories beneath an agent's spawn directory that it may write.
pub const AGENT_WRITABLE: &[&str] = &["workspace", "run"];

/// Where and with what one confined process runs.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    /// The name of its cgroup.
    pub cgroup: &'a str,
    /// Its directory: holds its policy (`sandbox.json`) and, beneath it,
    /// the directories it may write. Never writable itself, so that the
    /// policy stays the daemon's.
    pub spawn_dir: &'a Path,
    /// The names of its read-write directories beneath `spawn_dir` (made
    /// if missing).
    pub writable: &'a [&'a str],
    /// Programs its command runs through a shell, found in its `PATH`.
    pub programs: &'a [String],
    /// Read-only besides the system's (refused if one holds or lies in
    /// the home).
    pub readable: &'a [PathBuf],
    /// The TCP ports of 127.0.0.1 it may connect to.
    pub connect_ports: &'a [u16],
}

impl Confiner {
    /// Decide the mode (probing the sandbox and opening the daemon's
    /// cgroups, and killing what a crashed daemon left in them) and gather
    /// what every policy shares. Blocking: run it off the async threads.
    /// Refused (the daemon must not start): a `[sandbox] memory_mb` the
    /// machine cannot keep per agent tree, with why and the ways out.
    pub fn start(
        cfg: &Config,
        home: &Path,
        agency: PathBuf,
        mcp_port: u16,
    ) -> Result<Confiner, agency_config::sandbox::UnenforceableMemory> {
        let home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_owned());
        let ports = vec![mcp_port];
        let mode = if cfg.agents.sandbox == "off" {
            Mode::Off
        } else if cfg.agents.runtime == "none" {
            // Nothing is opened, but the same limit is refused now rather
            // than when a runtime is configured later.
            if let Ok(p) = agency_sandbox::probe() {
                cfg.sandbox
                    .check_memory(p.memory.as_ref().map(agency_sandbox::Controller::hierarchy))?;
            }
            Mode::Idle
        } else {
            open_cgroups(&home, &cfg.sandbox)?
        };
        Ok(Confiner {
            mode,
            opened: std::sync::OnceLock::new(),
            sandbox: cfg.sandbox.clone(),
            home,
            agency,
            dirs: agency_config::live::Live::new(SharedDirs::of(&cfg.sandbox)),
            limits: cfg.sandbox.limits(),
            ports,
            system_read_only: agency_sandbox::system_read_only(),
        })
    }

    /// `agency reload`: the toolchains and shared writable directories of
    /// every policy built from now on (running agents keep theirs).
    pub fn set_dirs(&self, dirs: SharedDirs) {
        self.dirs.store(dirs);
    }

    /// At daemon stop, once every agent has ended: remove the daemon's
    /// parent cgroups, so a clean stop leaves nothing in the hierarchy.
    /// Blocking.
    pub fn shutdown(&self) {
        if let Mode::On(cgroups) = self.current()
            && let Err(e) = cgroups.remove()
        {
            tracing::warn!(error = %e, "failed to remove the daemon's cgroups");
        }
    }

    /// `on`, `off` or `unavailable: CAUSE`, for `agency status`.
    pub fn status(&self) -> String {
        match self.current() {
            Mode::On(_) | Mode::Idle => "on".to_owned(),
            Mode::Off => "off".to_owned(),
            Mode::Unavailable(why) => format!("unavailable: {why}"),
        }
    }

    /// The limits every confined process tree runs under and what keeps
    /// each, for `agency status`; empty unless agents run
    /// confined. A limit of 0 (none) is not listed.
    pub fn limits(&self) -> Vec<LimitView> {
        let Mode::On(cgroups) = self.current() else {
            return Vec::new();
        };
        let l = &self.limits;
        let mib = |bytes: u64| bytes >> 20;
        let cgroup = |h: Hierarchy, controller: &str| format!("{h} {controller}");
        let mut out = Vec::new();
        let mut add = |resource, value: u64, scope, enforced_by: String| {
            if value > 0 {
                out.push(LimitView {
                    resource,
                    value,
                    scope,
                    enforced_by,
                });
            }
        };
        if let Some(h) = cgroups.memory_hierarchy() {
            add(
                LimitResource::MemoryMib,
                mib(l.memory_bytes),
                LimitScope::AgentTree,
                cgroup(h, "memory"),
            );
        }
        add(
            LimitResource::MemoryMib,
            mib(l.memory_bytes),
            LimitScope::Process,
            "RLIMIT_DATA".to_owned(),
        );
        add(
            LimitResource::Processes,
            l.max_processes,
            LimitScope::AgentTree,
            cgroup(cgroups.pids_hierarchy(), "pids"),
        );
        add(
            LimitResource::CpuSeconds,
            l.cpu_seconds,
            LimitScope::Process,
            "RLIMIT_CPU".to_owned(),
        );
        add(
            LimitResource::FileSizeMib,
            mib(l.file_size_bytes),
            LimitScope::Process,
            "RLIMIT_FSIZE".to_owned(),
        );
        add(
            LimitResource::OpenFiles,
            l.open_files,
            LimitScope::Process,
            "RLIMIT_NOFILE".to_owned(),
        );
        out
    }

    /// Wrap the runtime's command `cmd` for `spec`: write the policy into
    /// the spawn directory and return `agency sandbox-exec` with the same
    /// environment and working directory, and the agent's cgroup (to kill
    /// when the agent stops). `programs` are the runtime's programs the
    /// command runs through a shell (Claude Code's CLI); `extra_ports` the
    /// supervisor's (the egress proxy). Unconfined (`off`): `cmd` as it is.
    pub fn confine(
        &self,
        cmd: Command,
        spec: &SpawnSpec,
        programs: &[String],
        extra_ports: &[u16],
    ) -> Result<(Command, Option<AgentCgroup>), ConfineError> {
        let spawn_dir = spec
            .workspace
            .parent()
            .ok_or_else(|| ConfineError("the workspace has no parent directory".to_owned()))?;
        self.confine_in(
            cmd,
            &Place {
                cgroup: &spec.agent.to_string(),
                spawn_dir,
                writable: AGENT_WRITABLE,
                programs,
                readable: &[],
                connect_ports: &self.agent_ports(extra_ports),
            },
        )
    }

    /// The ports an agent connects to: the daemon's (its MCP server and
    /// model gateway) and the supervisor's `extra` (the egress proxy).
    fn agent_ports(&self, extra: &[u16]) -> Vec<u16> {
        let mut ports = self.ports.clone();
        ports.extend_from_slice(extra);
        ports
    }

    /// [`Confiner::confine`] for a process that is not an agent (an
    /// organisation's command tool, `org_tools/command.rs`), in `place`: TCP
    /// connect to its ports and no other, not even the daemon's, which a
    /// tool has no token for.
    pub fn confine_in(
        &self,
        cmd: Command,
        place: &Place<'_>,
    ) -> Result<(Command, Option<AgentCgroup>), ConfineError> {
        match self.prepare(cmd.as_std(), place)? {
            None => Ok((cmd, None)),
            Some(p) => Ok((
                wrap(cmd.as_std(), &self.agency, &p.policy, &p.program),
                Some(p.cgroup),
            )),
        }
    }

    /// A standby sandbox for an agent (see
    /// `supervisor/standby.rs`): the policy a spawn of `template` in
    /// `spawn_dir` would get, and `agency sandbox-exec --await-command`
    /// under it, which applies it and then waits on its stdin for the
    /// program. `None` when agents run unconfined.
    pub fn standby(
        &self,
        template: &std::process::Command,
        spawn_dir: &Path,
        programs: &[String],
        extra_ports: &[u16],
    ) -> Result<Option<Standby>, ConfineError> {
        let name = format!("standby-{}", uuid::Uuid::new_v4().simple());
        let place = Place {
            cgroup: &name,
            spawn_dir,
            writable: AGENT_WRITABLE,
            programs,
            readable: &[],
            connect_ports: &self.agent_ports(extra_ports),
        };
        let prepared = self.prepare(template, &place)?;
        Ok(prepared.map(|p| {
            let mut cmd = Command::new(&self.agency);
            cmd.arg("sandbox-exec")
                .arg("--policy")
                .arg(&p.policy)
                .arg("--await-command")
                .env_clear()
                .current_dir(spawn_dir);
            Standby {
                command: cmd,
                program: p.program,
                cgroup: p.cgroup,
            }
        }))
    }

    /// The policy of one confined spawn in `place`, written into its
    /// spawn directory, and its cgroup; `None` when confinement is off.
    fn prepare(
        &self,
        std: &std::process::Command,
        place: &Place<'_>,
    ) -> Result<Option<Prepared>, ConfineError> {
        let Place {
            cgroup,
            spawn_dir,
            writable,
            programs,
            readable,
            connect_ports,
        } = *place;
        let mode = match &self.mode {
            // Blocking (a probe, the cgroups' directories), like the rest
            // of `prepare`.
            Mode::Idle => self.opened.get_or_init(|| {
                open_cgroups(&self.home, &self.sandbox)
                    .unwrap_or_else(|refused| Mode::Unavailable(refused.to_string()))
            }),
            m => m,
        };
        let cgroups = match mode {
            Mode::Off => return Ok(None),
            Mode::Unavailable(why) => {
                return Err(ConfineError(format!(
                    "the sandbox is unavailable on this machine: {why}"
                )));
            }
            Mode::Idle => {
                return Err(ConfineError("no agent runtime is configured".to_owned()));
            }
            Mode::On(c) => c,
        };
        let path_env = path_of(std);
        let cwd = std.get_current_dir().map(Path::to_owned);
        let program = find_program(std.get_program(), path_env.as_deref(), cwd.as_deref())
            .ok_or_else(|| {
                ConfineError(format!(
                    "the program {:?} was not found in PATH",
                    std.get_program()
                ))
            })?;
        let mut read_only = self.system_read_only.clone();
        let mut wanted = vec![self.agency.clone(), program.clone()];
        for p in programs {
            let found = find_program(OsStr::new(p), path_env.as_deref(), cwd.as_deref())
                .ok_or_else(|| ConfineError(format!("the program {p:?} was not found in PATH")))?;
            wanted.push(found);
        }
        for p in &wanted {
            self.program_paths(p, path_env.as_deref(), 0, &mut read_only)?;
        }
        let dirs = self.dirs.load();
        for t in &dirs.toolchains {
            read_only.push(self.granted("sandbox.toolchains", t)?);
        }
        // A tool's source folder is the user's choice, like a toolchain,
        // and checked the same way: one holding the home (an organisation
        // kept around its Agency home) would hand the tool admin.token.
        for d in readable {
            read_only.push(self.granted("the tool's folder", d)?);
        }
        let mut read_write = writable_dirs(spawn_dir, writable)?;
        read_write.extend(agency_sandbox::system_read_write_files());
        for d in &dirs.read_write {
            read_write.push(self.granted("sandbox.read_write", d)?);
        }
        read_only.sort();
        read_only.dedup();
        let mut connect_ports = connect_ports.to_vec();
        connect_ports.sort_unstable();
        connect_ports.dedup();
        let cgroup = cgroups
            .create(cgroup, &self.limits)
            .map_err(|e| ConfineError(format!("failed to create the agent's cgroup: {e}")))?;
        let policy = Policy {
            read_write,
            read_only,
            connect_ports,
            limits: self.limits,
            cgroup_procs: cgroup.procs_files(),
            // A network namespace of its own in which only the allowed
            // ports of 127.0.0.1 lead anywhere (to the host's loopback,
            // through the forwarder): Landlock alone filters ports, not
            // addresses, so a remote host on the daemon's port number
            // would be reachable.
            isolate_network: true,
        };
        let written = policy
            .to_json()
            .map_err(|e| ConfineError(e.to_string()))
            .and_then(|json| {
                write_private(spawn_dir, POLICY_FILE, json.as_bytes())
                    .map_err(|e| ConfineError(e.to_string()))
            });
        let file = match written {
            Ok(f) => f,
            Err(e) => {
                let _ = cgroup.remove();
                return Err(e);
            }
        };
        Ok(Some(Prepared {
            policy: file,
            program,
            cgroup,
        }))
    }

    /// The mode in force: `Idle`'s opened mode once there is one.
    fn current(&self) -> &Mode {
        match (&self.mode, self.opened.get()) {
            (Mode::Idle, Some(opened)) => opened,
            (m, _) => m,
        }
    }

    /// A configured path, canonical, checked again against the home (a
    /// symbolic link may lead into it); it must exist.
    fn granted(&self, key: &str, p: &Path) -> Result<PathBuf, ConfineError> {
        let real = std::fs::canonicalize(p)
            .map_err(|e| ConfineError(format!("{key}: {} cannot be used: {e}", p.display())))?;
        if let Some(why) = overlaps_home(&real, &self.home) {
            return Err(ConfineError(format!(
                "{key}: {} (really {}) {why}",
                p.display(),
                real.display()
            )));
        }
        Ok(real)
    }

    /// What running `program` needs to read: the file itself, its install
    /// directory (a Node package's directory, the prefix above a `bin/`,
    /// else its own directory), and the same for the interpreter its `#!`
    /// line names (`env NAME` looked up in `path`), three levels at most.
    /// A directory that would be too broad (the root, a directory holding
    /// the Agency home or the user's home) is left out: the file alone is
    /// granted. A program inside the Agency home is refused.
    fn program_paths(
        &self,
        program: &Path,
        path: Option<&OsStr>,
        depth: u8,
        out: &mut Vec<PathBuf>,
    ) -> Result<(), ConfineError> {
        let real = std::fs::canonicalize(program).map_err(|e| {
            ConfineError(format!(
                "the program {} cannot be used: {e}",
                program.display()
            ))
        })?;
        if let Some(why) = overlaps_home(&real, &self.home) {
            return Err(ConfineError(format!(
                "the program {} {why}",
                program.display()
            )));
        }
        if let Some(dir) = install_dir(&real).filter(|d| !self.too_broad(d)) {
            out.push(dir);
        }
        out.push(real.clone());
        if depth < 3
            && let Some(interp) = interpreter(&real, path)
        {
            self.program_paths(&interp, path, depth + 1, out)?;
        }
        Ok(())
    }

    fn too_broad(&self, dir: &Path) -> bool {
        let user_home = std::env::var_os("HOME").map(PathBuf::from);
        dir.parent().is_none()
            || overlaps_home(dir, &self.home).is_some()
            || user_home.is_some_and(|h| h.starts_with(dir))
    }
}

/// The policy's file name in a spawn directory.
pub const POLICY_FILE: &str = "sandbox.json";

/// The read-write directories `names` beneath `spawn_dir`, made if
/// missing. Each name is one plain component: a path reaching back up
/// would make the spawn directory (and its policy) writable.
fn writable_dirs(spawn_dir: &Path, names: &[&str]) -> Result<Vec<PathBuf>, ConfineError> {
    names
        .iter()
        .map(|name| {
            let mut parts = Path::new(name).components();
            if !matches!(
                (parts.next(), parts.next()),
                (Some(std::path::Component::Normal(_)), None)
            ) {
                return Err(ConfineError(format!(
                    "the writable directory {name:?} is not a plain name beneath the spawn directory"
                )));
            }
            let dir = spawn_dir.join(name);
            std::fs::create_dir_all(&dir).map_err(|e| {
                ConfineError(format!("failed to create {}: {e}", dir.display()))
            })?;
            Ok(dir)
        })
        .collect()
}

/// Probe the sandbox and open this home's cgroups (`agency-<hash of the
/// home>`), killing whatever a crashed daemon left in them. Refused: a
/// configured memory limit no controller keeps (the groups just made are
/// removed again).
fn open_cgroups(
    home: &Path,
    sandbox: &SandboxConfig,
) -> Result<Mode, agency_config::sandbox::UnenforceableMemory> {
    match agency_sandbox::probe() {
        Err(e) => return Ok(Mode::Unavailable(e.to_string())),
        Ok(p) if !p.problems().is_empty() => {
            return Ok(Mode::Unavailable(p.problems().join("; ")));
        }
        Ok(_) => {}
    }
    let hash = blake3::hash(home.as_os_str().as_encoded_bytes()).to_hex();
    let name = format!("agency-{}", &hash.as_str()[..12]);
    let cgroups = match Cgroups::open(&name) {
        Ok(c) => c,
        Err(e) => {
            return Ok(Mode::Unavailable(format!(
                "failed to open the cgroups {name}: {e}"
            )));
        }
    };
    if let Err(refused) = sandbox.check_memory(cgroups.memory_hierarchy()) {
        if let Err(e) = cgroups.remove() {
            tracing::warn!(error = %e, "failed to remove the daemon's cgroups");
        }
        return Err(refused);
    }
    match cgroups.reap_all() {
        Ok(0) => {}
        Ok(n) => tracing::warn!(
            cgroups = n,
            "killed the processes a previous daemon left in {n} agent cgroup(s)"
        ),
        Err(e) => {
            tracing::warn!(error = %e, "failed to reap the agent cgroups a previous daemon left")
        }
    }
    Ok(Mode::On(cgroups))
}

/// Kill every process in an agent's cgroup (a stop request, after its
/// process group had its grace period).
pub async fn kill(cgroup: Arc<AgentCgroup>) {
    let done = tokio::task::spawn_blocking(move || cgroup.kill()).await;
    match done {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "failed to kill an agent's cgroup"),
        Err(e) => tracing::warn!(error = %e, "failed to kill an agent's cgroup"),
    }
}

/// After an agent stopped (its process group is gone): kill whatever of
/// it is left in its cgroup (a `setsid` or double-forked child), wait
/// (bounded) for the cgroup to empty, and remove it.
pub async fn release(cgroup: Arc<AgentCgroup>) {
    let done = tokio::task::spawn_blocking(move || cgroup.remove()).await;
    match done {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "failed to remove an agent's cgroup"),
        Err(e) => tracing::warn!(error = %e, "failed to remove an agent's cgroup"),
    }
}

/// The exit status `agency sandbox-exec` ends with when it cannot apply
/// the policy (it then runs nothing).
const SANDBOX_FAILED: i32 = 125;

/// The run's reason when `agency sandbox-exec` could not confine the
/// agent: its exit status and the `failed to apply the sandbox: …` line it
/// printed (into the captured output).
pub fn sandbox_failure(status: Option<i32>, log: Option<&[u8]>) -> Option<String> {
    if status != Some(SANDBOX_FAILED) {
        return None;
    }
    let log = String::from_utf8_lossy(log?);
    let line = log
        .lines()
        .find(|l| l.contains("failed to apply the sandbox"))?;
    Some(format!("failed: {}; {WAY_OUT}", line.trim()))
}

/// `agency sandbox-exec --policy FILE -- PROGRAM ARGS…` with `cmd`'s
/// environment (every runtime starts from a cleared one, so its explicit
/// variables are all of it) and working directory.
fn wrap(cmd: &std::process::Command, agency: &Path, policy: &Path, program: &Path) -> Command {
    let mut w = Command::new(agency);
    w.arg("sandbox-exec")
        .arg("--policy")
        .arg(policy)
        .arg("--")
        .arg(program)
        .args(cmd.get_args())
        .env_clear();
    for (k, v) in cmd.get_envs() {
        if let Some(v) = v {
            w.env(k, v);
        }
    }
    if let Some(d) = cmd.get_current_dir() {
        w.current_dir(d);
    }
    w
}

/// The program `cmd` runs, as its policy grants it: looked up in the
/// command's PATH (and working directory) like `execvp`.
pub fn resolved_program(cmd: &std::process::Command) -> Option<PathBuf> {
    find_program(
        cmd.get_program(),
        path_of(cmd).as_deref(),
        cmd.get_current_dir(),
    )
}

/// The PATH `cmd` runs with (every runtime sets it explicitly), which the
/// policy's program lookup reads.
pub fn path_of(cmd: &std::process::Command) -> Option<OsString> {
    cmd.get_envs()
        .find(|(k, _)| *k == "PATH")
        .and_then(|(_, v)| v.map(OsStr::to_owned))
}

/// `program` as `execvp` finds it: as given when it holds a slash
/// (relative to `cwd`), else the first executable file of that name in a
/// directory of `path`.
fn find_program(program: &OsStr, path: Option<&OsStr>, cwd: Option<&Path>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    let given = Path::new(program);
    if program.as_encoded_bytes().contains(&b'/') {
        let p = match cwd {
            Some(d) if given.is_relative() => d.join(given),
            _ => given.to_owned(),
        };
        return executable(&p).then_some(p);
    }
    std::env::split_paths(path?)
        .filter(|d| d.is_absolute())
        .map(|d| d.join(given))
        .find(|p| executable(p))
}

/// The interpreter a script's `#!` line names; for `env [-S] NAME`, NAME
/// looked up in `path`.
fn interpreter(file: &Path, path: Option<&OsStr>) -> Option<PathBuf> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(file).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut words = line.split_whitespace();
    let first = PathBuf::from(words.next()?);
    if first.file_name() != Some(OsStr::new("env")) {
        return Some(first);
    }
    let name = words.find(|w| !w.starts_with('-'))?;
    find_program(&OsString::from(name), path, None)
}

/// Where a program's own files lie: the nearest directory above it (up to
/// four levels) holding a `package.json` (a Node package, e.g. Claude
/// Code's), else the prefix above a `bin/` directory, else its directory.
fn install_dir(real: &Path) -> Option<PathBuf> {
    if let Some(pkg) = real
        .ancestors()
        .skip(1)
        .take(4)
        .find(|d| d.join("package.json").is_file())
    {
        return Some(pkg.to_owned());
    }
    let dir = real.parent()?;
    if dir.file_name() == Some(OsStr::new("bin")) {
        return dir.parent().map(Path::to_owned);
    }
    Some(dir.to_owned())
}

#[path = "confine_toolchain.rs"]
mod toolchain;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
#[path = "confine_tests.rs"]
mod tests;
