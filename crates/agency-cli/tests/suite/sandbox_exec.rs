//! Issue 10 items 3 and 6: escape attempts from inside `agency
//! sandbox-exec`, the real binary, each next to a control showing that the
//! same attempt succeeds unconfined (so each test fails if the protection
//! is removed). A temporary directory plays the agent's run directory
//! (read-write) and a sibling plays `$AGENCY_HOME` with an `admin.token`.
//!
//! These tests need what the project's machines have: root, Landlock ABI
//! 6+, cgroups with a pids controller, `/usr/bin/python3`.

#![allow(clippy::unwrap_used)]

use crate::sandbox_run;

use std::ffi::OsStr;
use std::io::Read;
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use agency_sandbox::Cgroups;
use sandbox_run::{
    PYTHON, Sandbox, TOKEN, TestCgroups, alive, denied, eventually, ok, refused, show, text,
};

/// Error numbers the probes print (Linux).
const EPERM: i32 = 1;
const EAGAIN: i32 = 11;
const EACCES: i32 = 13;

#[test]
fn the_workspace_is_read_write() {
    let sb = Sandbox::new();
    let out = ok(&sb.sh(
        "echo hi > f && mkdir -p d/e && mv f d/e/g && cat d/e/g && ln -s d/e/g l && cat l \
         && rm -r d l && echo x > \"$TMPDIR/t\" && cat \"$TMPDIR/t\" && ls /usr/bin/env >/dev/null",
    ));
    assert_eq!(out, "hi\nhi\nx\n");
}

#[test]
fn agency_home_cannot_be_read() {
    let sb = Sandbox::new();
    let token = sb.home.join("admin.token");
    let script = format!("cat '{}'", token.display());
    assert_eq!(ok(&sb.sh_unconfined(&script)), TOKEN, "control");
    let o = sb.sh(&script);
    denied(&o);
    assert!(!text(&o.stdout).contains(TOKEN));
    assert!(
        text(&o.stderr).contains("Permission denied"),
        "{}",
        show(&o)
    );
    // Nor listed, nor another agent's run directory next to ours.
    std::fs::create_dir_all(sb.root.join("run/other")).unwrap();
    std::fs::write(sb.root.join("run/other/token"), TOKEN).unwrap();
    denied(&sb.sh(&format!("ls '{}'", sb.home.display())));
    denied(&sb.sh("cat ../other/token"));
    denied(&sb.sh("ls .."));
}

#[test]
fn nothing_outside_can_be_written() {
    let sb = Sandbox::new();
    let outside = std::env::temp_dir().join(format!("agency-escape-{}", std::process::id()));
    let token = sb.home.join("admin.token");
    for script in [
        format!("echo x > '{}'", outside.display()),
        format!("echo x > '{}'", token.display()),
        format!("rm -f '{}'", token.display()),
        format!("mkdir '{}/new'", sb.home.display()),
        format!("mv '{}' .", token.display()),
        format!("ln '{}' hard", token.display()),
        "echo x > /etc/agency-escape".to_owned(),
    ] {
        denied(&sb.sh(&script));
    }
    assert!(!outside.exists());
    assert!(!Path::new("/etc/agency-escape").exists());
    assert_eq!(std::fs::read_to_string(&token).unwrap(), TOKEN);
    assert!(!sb.home.join("new").exists() && !sb.ws.join("hard").exists());
    // The control: the same write outside works unconfined.
    ok(&sb.sh_unconfined(&format!("echo x > '{}'", outside.display())));
    std::fs::remove_file(&outside).unwrap();
}

#[test]
fn descriptors_opened_outside_are_not_inherited() {
    let sb = Sandbox::new();
    // A parent that leaks a descriptor on the token (a shell's `exec 3<`
    // is not close-on-exec): the program must not read through it.
    let token = sb.home.join("admin.token");
    let policy = sb.root.join("leak-policy.json");
    std::fs::write(&policy, sb.policy().to_json().unwrap()).unwrap();
    let script = format!(
        "exec 3< '{}'; '{}' sandbox-exec --policy '{}' -- sh -c 'cat <&3'",
        token.display(),
        env!("CARGO_BIN_EXE_agency"),
        policy.display()
    );
    let o = sb.sh_unconfined(&script);
    denied(&o);
    assert!(!text(&o.stdout).contains(TOKEN), "{}", show(&o));
    // The control: the same leak without the sandbox reads the token.
    let o = sb.sh_unconfined(&format!("exec 3< '{}'; sh -c 'cat <&3'", token.display()));
    assert_eq!(ok(&o), TOKEN);
}

#[test]
fn symlinks_out_of_the_workspace_lead_nowhere() {
    let sb = Sandbox::new();
    // Planted from outside, as if the workspace came with it.
    std::os::unix::fs::symlink(&sb.home, sb.ws.join("planted")).unwrap();
    assert_eq!(
        ok(&sb.sh_unconfined("cat planted/admin.token")),
        TOKEN,
        "control"
    );
    let o = sb.sh("cat planted/admin.token");
    denied(&o);
    assert!(!text(&o.stdout).contains(TOKEN));
    // Made from inside.
    let o = sb.sh(&format!(
        "ln -s '{}' mine && cat mine",
        sb.home.join("admin.token").display()
    ));
    denied(&o);
    assert!(!text(&o.stdout).contains(TOKEN));
}

/// Connect to 127.0.0.1:`port` from Python; prints "connected" or the
/// error number.
fn connect_script(port: u16) -> String {
    format!(
        "import socket\ns = socket.socket()\ntry:\n    s.connect(('127.0.0.1', {port}))\n    print('connected')\nexcept OSError as e:\n    print('errno', e.errno)\n"
    )
}

#[test]
fn tcp_reaches_only_the_granted_ports() {
    let sb = Sandbox::new();
    let granted = TcpListener::bind("127.0.0.1:0").unwrap();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let (gp, op) = (
        granted.local_addr().unwrap().port(),
        other.local_addr().unwrap().port(),
    );
    let mut policy = sb.policy();
    policy.connect_ports = vec![gp];
    let run = |port| ok(&sb.run(&policy, &[PYTHON, "-c", &connect_script(port)]));
    assert_eq!(run(gp), "connected\n");
    assert_eq!(run(op), format!("errno {}\n", EACCES));
    // The control: unconfined, the other port answers.
    let mut cmd = Command::new(PYTHON);
    cmd.arg("-c").arg(connect_script(op));
    sb.env(&mut cmd);
    assert_eq!(ok(&cmd.output().unwrap()), "connected\n");
    // Listening is refused too.
    let o = ok(&sb.run(
        &policy,
        &[
            PYTHON,
            "-c",
            "import socket\ns = socket.socket()\ntry:\n    s.bind(('127.0.0.1', 0)); print('bound')\nexcept OSError as e:\n    print('errno', e.errno)\n",
        ],
    ));
    assert_eq!(o, format!("errno {}\n", EACCES));
}

#[test]
fn no_udp_raw_or_unix_sockets() {
    let sb = Sandbox::new();
    let receiver = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = receiver.local_addr().unwrap().port();
    let script = format!(
        "import socket\n\
         def attempt(name, f):\n\
         \x20   try:\n\
         \x20       f(); print(name, 'ok')\n\
         \x20   except OSError as e:\n\
         \x20       print(name, 'errno', e.errno)\n\
         attempt('udp', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {port})))\n\
         attempt('udp6', lambda: socket.socket(socket.AF_INET6, socket.SOCK_DGRAM))\n\
         attempt('raw', lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP))\n\
         attempt('sctp', lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM, 132))\n\
         attempt('unix', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))\n\
         attempt('pair_dgram', lambda: socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM))\n\
         attempt('packet', lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW))\n\
         attempt('pair_stream', lambda: socket.socketpair())\n\
         attempt('tcp', lambda: socket.socket())\n"
    );
    let expected = format!(
        "udp errno {e}\nudp6 errno {e}\nraw errno {e}\nsctp errno {e}\nunix errno {e}\npair_dgram errno {e}\npacket errno {e}\npair_stream ok\ntcp ok\n",
        e = EPERM
    );
    assert_eq!(
        ok(&sb.run(&sb.policy(), &[PYTHON, "-c", &script])),
        expected
    );
    // The control: unconfined, the datagram arrives.
    let mut cmd = Command::new(PYTHON);
    cmd.arg("-c").arg(&script);
    sb.env(&mut cmd);
    assert!(ok(&cmd.output().unwrap()).starts_with("udp ok\n"));
    let mut buf = [0u8; 4];
    assert_eq!(receiver.recv(&mut buf).unwrap(), 1);
}

#[test]
fn processes_outside_cannot_be_signalled_or_inspected() {
    let sb = Sandbox::new();
    let me = std::process::id();
    for script in [format!("kill -0 {me}"), format!("cat /proc/{me}/environ")] {
        ok(&sb.sh_unconfined(&format!("{script} > /dev/null")));
        let o = sb.sh(&script);
        denied(&o);
        assert!(!text(&o.stdout).contains("PATH="), "{}", show(&o));
    }
    // Its own processes it may signal and inspect.
    ok(&sb.sh("sleep 5 & kill $! && cat /proc/self/environ > /dev/null"));
}

#[test]
fn root_inside_has_no_capabilities() {
    let sb = Sandbox::new();
    let status = ok(&sb.run(&sb.policy(), &["cat", "/proc/self/status"]));
    for field in ["CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"] {
        let line = status
            .lines()
            .find(|l| l.starts_with(field))
            .unwrap_or_else(|| panic!("no {field} in {status}"));
        assert!(line.ends_with("0000000000000000"), "{line}");
    }
    assert!(status.contains("NoNewPrivs:\t1"), "{status}");
    assert!(status.contains("Seccomp:\t2"), "{status}");
    // Still uid 0, but powerless: chown needs CAP_CHOWN, a namespace is
    // refused, and a nested exec gains nothing back.
    std::fs::write(sb.ws.join("f"), "x").unwrap();
    ok(&sb.sh_unconfined("chown 12345 f && chown 0 f"));
    denied(&sb.sh("chown 12345 f"));
    ok(&sb.sh_unconfined("unshare -U true"));
    denied(&sb.sh("unshare -U true"));
    denied(&sb.sh("unshare -n true"));
    let nested = ok(&sb.sh("id -u; sh -c 'grep CapEff /proc/self/status'"));
    assert_eq!(nested, "0\nCapEff:\t0000000000000000\n");
}

#[test]
fn a_policy_that_cannot_be_applied_runs_nothing() {
    let sb = Sandbox::new();
    let marker = sb.ws.join("ran");
    let script = format!("touch '{}'", marker.display());
    let mut missing_path = sb.policy();
    missing_path.read_write.push(sb.root.join("does-not-exist"));
    let mut missing_cgroup = sb.policy();
    missing_cgroup.cgroup_procs =
        vec!["/sys/fs/cgroup/unified/agency-no-such-group/cgroup.procs".into()];
    let mut whole_fs = sb.policy();
    whole_fs.read_only.push("/".into());
    for (policy, step) in [
        (missing_path, "landlock: open"),
        (missing_cgroup, "join cgroup"),
        (whole_fs, "policy"),
    ] {
        let o = sb.run(&policy, &["sh", "-c", &script]);
        refused(&o, step);
        assert!(!marker.exists(), "the program ran: {}", show(&o));
    }
    // A policy file that is not a policy.
    let bad = sb.root.join("bad.json");
    std::fs::write(&bad, r#"{"read_write": []}"#).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_agency"))
        .args([
            OsStr::new("sandbox-exec"),
            OsStr::new("--policy"),
            bad.as_os_str(),
        ])
        .args(["--", "sh", "-c", &script])
        .output()
        .unwrap();
    refused(&o, "policy");
    assert!(!marker.exists());
    // And the same script does run under a policy that applies.
    ok(&sb.sh(&script));
    assert!(marker.exists());
}

#[test]
fn a_program_the_sandbox_hides_is_not_run() {
    let sb = Sandbox::new();
    let prog = sb.home.join("prog");
    std::fs::write(&prog, "#!/bin/sh\necho escaped\n").unwrap();
    std::fs::set_permissions(&prog, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let o = sb.run(&sb.policy(), &[prog.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(126), "{}", show(&o));
    assert!(!text(&o.stdout).contains("escaped"));
    let o = sb.run(&sb.policy(), &["no-such-program-anywhere"]);
    assert_eq!(o.status.code(), Some(127), "{}", show(&o));
}

#[test]
fn the_process_count_is_bounded() {
    let sb = Sandbox::new();
    let cgroups = TestCgroups::new();
    let (group, policy) = cgroups.confine("agent", 16, sb.policy());
    // A bounded bomb: 100 forks, each child sleeping (without our pipes).
    let script = "import os, time\n\
        n = 0\n\
        for i in range(100):\n\
        \x20   try:\n\
        \x20       pid = os.fork()\n\
        \x20   except OSError as e:\n\
        \x20       print('refused after', n, 'errno', e.errno); break\n\
        \x20   if pid == 0:\n\
        \x20       os.closerange(0, 3); time.sleep(120); os._exit(0)\n\
        \x20   n += 1\n\
        else:\n\
        \x20   print('all', n)\n";
    let out = ok(&sb.run(&policy, &[PYTHON, "-c", script]));
    let n: u64 = out
        .strip_prefix("refused after ")
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("the forks were not bounded: {out}"));
    assert!(n < 16, "{out}");
    assert!(out.ends_with(&format!("errno {}\n", EAGAIN)), "{out}");
    // The sleepers are still there, inside the group; killing it ends them.
    let pids = group.pids().unwrap();
    assert_eq!(pids.len() as u64, n, "{pids:?}");
    group.remove().unwrap();
    assert!(eventually(|| pids.iter().all(|p| !alive(*p))));
}

#[test]
fn a_fork_bomb_is_contained_and_ends() {
    let sb = Sandbox::new();
    let cgroups = TestCgroups::new();
    let (group, policy) = cgroups.confine("agent", 24, sb.policy());
    // Before unleashing the classic, make sure its bound is in place.
    let bounded = group.procs_files().iter().any(|f| {
        std::fs::read_to_string(f.with_file_name("pids.max")).is_ok_and(|m| m.trim() == "24")
    });
    assert!(bounded, "no pids.max of 24 in {:?}", group.procs_files());
    let errors = sb.root.join("bomb.err");
    let mut bomb = sb
        .command(
            &policy,
            &[
                "sh",
                "-c",
                "while [ ! -e go ]; do sleep 0.01; done; f() { f | f & }; f",
            ],
        )
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&errors).unwrap())
        .spawn()
        .unwrap();
    // And that it is inside the group before it starts.
    let pid = i32::try_from(bomb.id()).unwrap();
    if !eventually(|| group.pids().unwrap().contains(&pid)) {
        let _ = bomb.kill();
        panic!("the bomb never joined its group");
    }
    std::fs::write(sb.ws.join("go"), "").unwrap();
    // We stay responsive while it rages, and it never exceeds its bound;
    // each shell whose fork is refused exits, so the bomb burns out.
    let mut most = 0;
    let ended = eventually(|| {
        assert!(Command::new("true").status().unwrap().success());
        let n = group.pids().unwrap().len();
        most = most.max(n);
        n == 0
    });
    if !ended {
        group.kill().unwrap();
    }
    let _ = bomb.wait();
    assert!(ended, "the bomb did not end");
    assert!(most <= 24, "{most} processes");
    let errors = std::fs::read_to_string(&errors).unwrap();
    assert!(errors.contains("Cannot fork"), "{errors}");
}

#[test]
fn a_setsid_grandchild_dies_with_its_group() {
    let sb = Sandbox::new();
    let cgroups = TestCgroups::new();
    let (group, policy) = cgroups.confine("agent", 64, sb.policy());
    // Double fork into a new session: reparented away from the agent, in
    // no process group the supervisor knows.
    ok(&sb.run(
        &policy,
        &[
            "sh",
            "-c",
            "setsid sh -c 'sleep 300 & echo $! > pid' < /dev/null > /dev/null 2>&1",
        ],
    ));
    let pid_file = sb.ws.join("pid");
    assert!(eventually(
        || std::fs::read_to_string(&pid_file).is_ok_and(|s| s.ends_with('\n'))
    ));
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(pid));
    let mut stat = String::new();
    std::fs::File::open(format!("/proc/{pid}/stat"))
        .unwrap()
        .read_to_string(&mut stat)
        .unwrap();
    group.kill().unwrap();
    let died = eventually(|| !alive(pid));
    if !died {
        // Do not leave it behind when the test fails.
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    assert!(died, "pid {pid} survived the group kill ({stat})");
}

#[test]
fn cgroups_left_behind_are_reaped() {
    let sb = Sandbox::new();
    let cgroups = TestCgroups::new();
    let (group, policy) = cgroups.confine("agent", 64, sb.policy());
    ok(&sb.run(&policy, &["sh", "-c", "sleep 300 > /dev/null 2>&1 &"]));
    let pids = group.pids().unwrap();
    assert_eq!(pids.len(), 1, "{pids:?}");
    // A restarted daemon opens the same parent and reaps what it finds.
    let again = Cgroups::open(cgroups.0.name()).unwrap();
    assert_eq!(again.reap_all().unwrap(), 1);
    assert!(eventually(|| !alive(pids[0])));
    assert!(group.is_empty());
}

#[test]
fn a_group_is_removed_before_its_zombie_is_reaped() {
    // The daemon may remove an agent's group before it has waited for the
    // agent process (its child), whose zombie then lingers a moment.
    let sb = Sandbox::new();
    let cgroups = TestCgroups::new();
    let (group, policy) = cgroups.confine("agent", 64, sb.policy());
    let mut child = sb
        .command(&policy, &["sleep", "300"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let pid = i32::try_from(child.id()).unwrap();
    assert!(eventually(|| group.pids().unwrap().contains(&pid)));
    group.remove().unwrap();
    assert!(!alive(pid));
    assert!(group.procs_files().iter().all(|f| !f.exists()));
    assert!(!child.wait().unwrap().success());
}

/// x86_64 numbers of system calls the filter denies, called with harmless
/// arguments through libc's `syscall()`.
#[cfg(target_arch = "x86_64")]
#[test]
fn kernel_attack_surface_is_refused() {
    let calls = [
        ("io_uring_setup", 425, EPERM),
        ("bpf", 321, EPERM),
        ("perf_event_open", 298, EPERM),
        ("keyctl", 250, EPERM),
        ("add_key", 248, EPERM),
        ("userfaultfd", 323, EPERM),
        ("mount", 165, EPERM),
        ("fsopen", 430, EPERM),
        ("setns", 308, EPERM),
        ("ptrace", 101, EPERM),
        ("process_vm_readv", 310, EPERM),
        ("init_module", 175, EPERM),
        // ENOSYS, so that libc falls back to clone, whose flags are seen.
        ("clone3", 435, 38),
    ];
    let mut script = String::from(
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nlibc.syscall.restype = ctypes.c_long\n",
    );
    for (name, nr, _) in &calls {
        // ptrace(PTRACE_PEEKDATA, pid 0): no process 0, nothing traced.
        let args = if *name == "ptrace" {
            "2, 0, 0, 0"
        } else {
            "0, 0, 0, 0"
        };
        script.push_str(&format!(
            "r = libc.syscall({nr}, {args}); print('{name}', 'ok' if r >= 0 else ctypes.get_errno())\n"
        ));
    }
    let inside = ok(&sb_run_python(&script, true));
    let outside = ok(&sb_run_python(&script, false));
    for ((name, _, errno), (i, o)) in calls.iter().zip(inside.lines().zip(outside.lines())) {
        assert_eq!(i, format!("{name} {errno}"), "inside:\n{inside}");
        assert_ne!(
            o,
            format!("{name} {errno}"),
            "the control already fails:\n{outside}"
        );
    }
}

#[cfg(target_arch = "x86_64")]
fn sb_run_python(script: &str, confined: bool) -> Output {
    let sb = Sandbox::new();
    if confined {
        sb.run(&sb.policy(), &[PYTHON, "-c", script])
    } else {
        let mut cmd = Command::new(PYTHON);
        cmd.arg("-c").arg(script);
        sb.env(&mut cmd);
        cmd.output().unwrap()
    }
}
