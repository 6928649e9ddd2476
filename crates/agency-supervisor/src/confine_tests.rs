//! Tests of `confine.rs`: program grants, fail-closed modes, and the
//! standby's policy against a direct spawn's (kept apart so that the
//! module stays readable).

use super::*;

fn confiner(home: &Path) -> Confiner {
    Confiner {
        mode: Mode::Off,
        opened: std::sync::OnceLock::new(),
        sandbox: SandboxConfig::default(),
        home: home.to_owned(),
        agency: PathBuf::from("/bin/true"),
        dirs: agency_config::live::Live::default(),
        limits: Limits::default(),
        ports: Vec::new(),
        system_read_only: agency_sandbox::system_read_only(),
    }
}

/// A program's directory is granted with it, unless that would grant
/// the Agency home: a program beside the home gets the file alone, a
/// program inside it (an agent could have planted it) is refused.
#[test]
fn a_program_never_brings_the_home_into_the_sandbox() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let home = root.join("home");
    std::fs::create_dir_all(home.join("run")).unwrap();
    let c = confiner(&home);
    let exe = |p: &Path| {
        std::fs::write(p, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    // Beside the home: its directory holds the home, so the file alone.
    let beside = root.join("agent.sh");
    exe(&beside);
    let mut out = Vec::new();
    c.program_paths(&beside, None, 0, &mut out).unwrap();
    assert!(out.contains(&beside), "{out:?}");
    assert!(!out.iter().any(|p| home.starts_with(p)), "{out:?}");
    // The interpreter of its #! line comes along.
    assert!(
        out.iter().any(|p| p.ends_with("sh") || p.ends_with("dash")),
        "{out:?}"
    );
    // In a directory of its own: that directory.
    std::fs::create_dir_all(root.join("tool")).unwrap();
    let own = root.join("tool").join("run.sh");
    exe(&own);
    let mut out = Vec::new();
    c.program_paths(&own, None, 0, &mut out).unwrap();
    assert!(out.contains(&root.join("tool")), "{out:?}");
    // Inside the home, or reached through a link into it: refused.
    let inside = home.join("run").join("evil.sh");
    exe(&inside);
    let link = root.join("tool").join("link.sh");
    std::os::unix::fs::symlink(&inside, &link).unwrap();
    for p in [&inside, &link] {
        let e = c.program_paths(p, None, 0, &mut Vec::new()).unwrap_err();
        assert!(e.to_string().contains("inside the Agency home"), "{e}");
        assert!(e.to_string().contains("agents.sandbox = \"off\""), "{e}");
    }
    // A configured toolchain that turns out to lead into the home.
    let sneaky = root.join("sneaky");
    std::os::unix::fs::symlink(&home, &sneaky).unwrap();
    let e = c.granted("sandbox.toolchains", &sneaky).unwrap_err();
    assert!(e.to_string().contains("is the Agency home"), "{e}");
    assert!(
        c.granted("sandbox.toolchains", &root.join("missing"))
            .is_err()
    );
}

/// Fail closed: on a machine that cannot confine, no command is
/// handed back, only the cause and the way out; `off` hands the
/// command back untouched.
#[test]
fn an_unavailable_sandbox_refuses_every_spawn() {
    let dir = tempfile::tempdir().unwrap();
    let spec = SpawnSpec {
        handler: agency_core::HandlerId::new_random(),
        agent: agency_core::AgentId::new_random(),
        token: "t".into(),
        mcp_url: "http://127.0.0.1:1/mcp".into(),
        workspace: dir.path().join("workspace"),
        run_dir: dir.path().join("run"),
        system_prompt: String::new(),
        initial_message: String::new(),
        mcp_servers: vec![],
        launcher: "/bin/true".into(),
        launch_nonces: Default::default(),
        egress_proxy: None,
        upstream: None,
        keep_warm_ms: 0,
    };
    let mut c = confiner(&dir.path().join("home"));
    c.mode = Mode::Unavailable("Landlock is not available".into());
    assert_eq!(c.status(), "unavailable: Landlock is not available");
    let e = c
        .confine(Command::new("/bin/true"), &spec, &[], &[])
        .unwrap_err()
        .to_string();
    assert!(e.contains("Landlock is not available"), "{e}");
    assert!(e.contains("agents.sandbox = \"off\""), "{e}");
    c.mode = Mode::Off;
    assert_eq!(c.status(), "off");
    let (cmd, cgroup) = c
        .confine(Command::new("/bin/true"), &spec, &[], &[])
        .unwrap();
    assert_eq!(cmd.as_std().get_program(), "/bin/true");
    assert!(cgroup.is_none());
}

/// Issue 31: with no agent runtime nothing is opened at start, and the
/// first confined process that is not an agent (a pipeline's live
/// ToolRunner) opens the sandbox then, confined like any other, instead
/// of being refused. (Real cgroups, as below.)
#[test]
fn issue31_an_idle_sandbox_opens_for_its_first_confined_process() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let mut c = confiner(&home);
    c.mode = Mode::Idle;
    assert!(c.opened.get().is_none());
    let spawn_dir = dir.path().join("spawn");
    std::fs::create_dir_all(&spawn_dir).unwrap();
    let (cmd, cgroup) = c
        .confine_in(
            Command::new("/bin/true"),
            &Place {
                cgroup: "issue31-idle",
                spawn_dir: &spawn_dir,
                writable: &["work"],
                programs: &[],
                readable: &[],
                connect_ports: &[],
            },
        )
        .unwrap();
    assert_eq!(cmd.as_std().get_args().next().unwrap(), "sandbox-exec");
    assert!(spawn_dir.join(POLICY_FILE).is_file());
    assert!(matches!(c.opened.get(), Some(Mode::On(_))));
    assert_eq!(c.status(), "on");
    cgroup.unwrap().remove().unwrap();
    c.shutdown();
}

/// Issue 15 item 3: a standby's policy grants exactly what a direct
/// spawn's would, in its own directory and cgroup, and its command
/// runs no program until it is sent one. (Real cgroups: the machines
/// this project runs on have them, as the sandbox tests need.)
#[test]
fn issue_15_a_standby_gets_the_policy_a_direct_spawn_would() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let home = root.join("home");
    let name = format!("agency-test-standby-{}", std::process::id());
    let mut c = confiner(&home);
    c.mode = Mode::On(Cgroups::open(&name).unwrap());
    c.agency = PathBuf::from("/bin/true");
    c.ports = vec![4242];
    let mut cmd = std::process::Command::new("sh");
    cmd.env("PATH", "/usr/bin:/bin").arg("-c").arg("true");
    let (direct_dir, standby_dir) = (home.join("run/a"), home.join("run/standby-b"));
    for d in [&direct_dir, &standby_dir] {
        std::fs::create_dir_all(d.join("run")).unwrap();
    }
    let programs = ["env".to_owned()];
    let (wrapped, direct_cg) = c
        .confine_in(
            Command::from(cmd),
            &Place {
                cgroup: "direct",
                spawn_dir: &direct_dir,
                writable: AGENT_WRITABLE,
                programs: &programs,
                readable: &[],
                connect_ports: &[4242, 4343],
            },
        )
        .unwrap();
    let mut template = std::process::Command::new("sh");
    template.env("PATH", "/usr/bin:/bin");
    let sb = c
        .standby(&template, &standby_dir, &programs, &[4343])
        .unwrap()
        .unwrap();
    let load = |d: &Path| Policy::load(&d.join(POLICY_FILE)).unwrap();
    let (direct, standby) = (load(&direct_dir), load(&standby_dir));
    let args: Vec<String> = sb
        .command
        .as_std()
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let envs = sb.command.as_std().get_envs().count();
    let direct_args: Vec<String> = wrapped
        .as_std()
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    // Removed before any assertion can fail, so a failure leaves no
    // cgroup behind.
    for cg in [direct_cg.unwrap(), sb.cgroup] {
        cg.remove().unwrap();
    }
    if let Mode::On(cgroups) = &c.mode {
        cgroups.remove().unwrap();
    }
    // The same grants, with each spawn's own directory and cgroup.
    let ours = |p: &Policy, d: &Path| {
        let mut q = p.clone();
        q.read_write.retain(|x| !x.starts_with(d));
        q.cgroup_procs.clear();
        q
    };
    assert_eq!(ours(&direct, &direct_dir), ours(&standby, &standby_dir));
    assert!(standby.read_write.contains(&standby_dir.join("workspace")));
    assert!(
        !standby
            .read_write
            .iter()
            .any(|p| p.starts_with(&direct_dir))
    );
    // Issue 27: never the spawn directory itself, which holds the policy.
    for (p, d) in [(&direct, &direct_dir), (&standby, &standby_dir)] {
        assert!(!p.read_write.contains(d), "{:?}", p.read_write);
        assert!(
            p.read_write
                .iter()
                .all(|w| w.parent() == Some(d.as_path()) || !w.starts_with(d))
        );
    }
    assert!(standby.isolate_network && !standby.cgroup_procs.is_empty());
    assert!(
        standby
            .cgroup_procs
            .iter()
            .all(|f| f.to_string_lossy().contains("/standby-"))
    );
    assert_ne!(direct.cgroup_procs, standby.cgroup_procs);
    // The program it was built for, and nothing to run until told: no
    // `--`, no program, no environment.
    assert_eq!(Some(sb.program), resolved_program(&template));
    assert_eq!(args.last().map(String::as_str), Some("--await-command"));
    assert!(!args.iter().any(|a| a == "--"), "{args:?}");
    assert_eq!(envs, 0);
    assert!(direct_args.iter().any(|a| a == "--"), "{direct_args:?}");
}

#[test]
fn a_sandbox_exec_that_could_not_apply_the_policy_names_why() {
    let log = b"failed to apply the sandbox: landlock: no ABI 6\n";
    let why = sandbox_failure(Some(125), Some(log)).unwrap();
    assert!(
        why.starts_with("failed: failed to apply the sandbox: landlock"),
        "{why}"
    );
    assert!(why.contains("agents.sandbox = \"off\""), "{why}");
    // Another exit, or 125 from the agent itself, is not this.
    assert_eq!(sandbox_failure(Some(1), Some(log)), None);
    assert_eq!(sandbox_failure(Some(125), Some(b"my own error\n")), None);
    assert_eq!(sandbox_failure(None, None), None);
}

#[test]
fn programs_are_found_as_execvp_would_and_scripts_name_their_interpreter() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("pkg").join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("tool");
    std::fs::write(&script, "#!/usr/bin/env sh\necho hi\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = std::env::join_paths([Path::new("/nonexistent"), &bin]).unwrap();
    assert_eq!(
        find_program(OsStr::new("tool"), Some(&path), None),
        Some(script.clone())
    );
    assert_eq!(find_program(OsStr::new("tool"), None, None), None);
    assert_eq!(
        find_program(
            OsStr::new("./bin/tool"),
            None,
            Some(&dir.path().join("pkg"))
        ),
        Some(dir.path().join("pkg").join("./bin/tool"))
    );
    let sh = interpreter(&script, std::env::var_os("PATH").as_deref()).unwrap();
    assert!(sh.ends_with("sh"), "{}", sh.display());
    // The prefix above bin/, or a Node package's directory.
    assert_eq!(install_dir(&script), Some(dir.path().join("pkg")));
    std::fs::write(dir.path().join("pkg").join("package.json"), "{}").unwrap();
    assert_eq!(install_dir(&script), Some(dir.path().join("pkg")));
    assert_eq!(
        install_dir(Path::new("/usr/bin/env")),
        Some(PathBuf::from("/usr"))
    );
}
