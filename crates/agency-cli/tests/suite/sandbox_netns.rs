//! Issue 10 item 3, network: `agency sandbox-exec` with `isolate_network`
//! puts the agent in a network namespace of its own where only the
//! policy's ports on loopback lead anywhere (to the same ports on the
//! host's loopback, through the forwarder). Landlock alone filters ports,
//! not addresses: each test below shows what the namespace adds by the
//! same attempt without it (the control), so each fails if the namespace
//! is removed.
//!
//! These tests need root (a network namespace), Landlock ABI 6+, cgroups
//! with a pids controller, `/usr/bin/python3`. They target only loopback
//! and this machine's own addresses.

#![allow(clippy::unwrap_used)]

use crate::sandbox_run;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Command, Stdio};

use sandbox_run::{PYTHON, Sandbox, TestCgroups, alive, eventually, ok, refused, text};

/// Error numbers the probes print (Linux).
const EACCES: i32 = 13;
const ENETUNREACH: i32 = 101;
const ECONNREFUSED: i32 = 111;

/// A server that reads what a client sends until it half-closes, then
/// answers "NAME BYTES" and closes: one round trip in each direction,
/// naming which server was reached.
fn serve(listener: TcpListener, name: &'static str) {
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut got = Vec::new();
                if conn.read_to_end(&mut got).is_ok() {
                    let all_x = got.iter().all(|b| *b == b'x');
                    let answer = format!("{name} {}{}", got.len(), if all_x { "" } else { " bad" });
                    let _ = conn.write_all(answer.as_bytes());
                }
            });
        }
    });
}

/// Python that, for each address, connects, sends 1 MiB, half-closes and
/// prints the answer, or the error number.
fn probe_script(targets: &[SocketAddr]) -> String {
    let list: Vec<String> = targets
        .iter()
        .map(|a| format!("('{}', {})", a.ip(), a.port()))
        .collect();
    format!(
        "import socket\n\
         for host, port in [{}]:\n\
         \x20   s = socket.socket(socket.AF_INET6 if ':' in host else socket.AF_INET)\n\
         \x20   s.settimeout(60)\n\
         \x20   try:\n\
         \x20       s.connect((host, port))\n\
         \x20       s.sendall(b'x' * 1048576)\n\
         \x20       s.shutdown(socket.SHUT_WR)\n\
         \x20       data = b''\n\
         \x20       while True:\n\
         \x20           d = s.recv(65536)\n\
         \x20           if not d: break\n\
         \x20           data += d\n\
         \x20       print(host, port, data.decode())\n\
         \x20   except OSError as e:\n\
         \x20       print(host, port, 'errno', e.errno)\n",
        list.join(", ")
    )
}

/// This machine's own IPv4 addresses outside 127/8 (the kernel's local
/// routes), to show that they are out of reach from inside.
fn local_addresses() -> Vec<IpAddr> {
    let trie = std::fs::read_to_string("/proc/net/fib_trie").unwrap_or_default();
    let mut found = Vec::new();
    let mut last: Option<IpAddr> = None;
    for line in trie.lines() {
        let t = line.trim();
        if let Some(addr) = t.strip_prefix("|-- ").and_then(|a| a.parse().ok()) {
            last = Some(addr);
        } else if t == "/32 host LOCAL"
            && let Some(a) = last
            && !a.is_loopback()
            && !found.contains(&a)
        {
            found.push(a);
        }
    }
    found
}

fn ipv6() -> bool {
    std::fs::read_to_string("/proc/net/if_inet6").is_ok_and(|s| s.contains(" lo"))
}

#[test]
fn only_the_granted_ports_on_loopback_lead_out() {
    let sb = Sandbox::new();
    let daemon = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = daemon.local_addr().unwrap().port();
    let other = TcpListener::bind("127.0.0.1:0").unwrap();
    let other_port = other.local_addr().unwrap().port();
    // The same port number on other addresses of this machine: Landlock
    // filters the port only, so these stand for a remote host that listens
    // on the daemon's port number.
    let alias = TcpListener::bind(("127.0.0.2", port)).unwrap();
    serve(daemon, "daemon");
    serve(other, "other");
    serve(alias, "alias");
    let mut targets = vec![
        SocketAddr::from(([127, 0, 0, 1], port)),
        SocketAddr::from(([127, 0, 0, 2], port)),
        SocketAddr::from(([127, 0, 0, 1], other_port)),
    ];
    let local = local_addresses()
        .into_iter()
        .find_map(|a| TcpListener::bind((a, port)).ok());
    let has_local = local.is_some();
    if let Some(l) = local {
        targets.push(l.local_addr().unwrap());
        serve(l, "local");
    }
    if ipv6() {
        targets.push(SocketAddr::from(([0, 0, 0, 0, 0, 0, 0, 1], port)));
    }
    let script = probe_script(&targets);
    let answers = |isolate| -> Vec<String> {
        let policy = sb.policy_with(&[port], isolate);
        ok(&sb.run(&policy, &[PYTHON, "-c", &script]))
            .lines()
            .map(|l| l.split_once(' ').unwrap().1.to_owned())
            .collect()
    };
    let mib = 1 << 20;
    let mut expected_inside = vec![
        format!("{port} daemon {mib}"),
        format!("{port} errno {ECONNREFUSED}"),
        format!("{other_port} errno {EACCES}"),
    ];
    let mut expected_outside = vec![
        format!("{port} daemon {mib}"),
        format!("{port} alias {mib}"),
        format!("{other_port} errno {EACCES}"),
    ];
    if has_local {
        expected_inside.push(format!("{port} errno {ENETUNREACH}"));
        expected_outside.push(format!("{port} local {mib}"));
    }
    if ipv6() {
        // A "localhost" URL that resolves to ::1 reaches the daemon too.
        expected_inside.push(format!("{port} daemon {mib}"));
        expected_outside.push(format!("{port} errno {ECONNREFUSED}"));
    }
    assert_eq!(answers(true), expected_inside, "{targets:?}");
    // The control: without the namespace, the same port on another address
    // of this machine is reached.
    assert_eq!(answers(false), expected_outside, "{targets:?}");
}

#[test]
fn the_namespace_has_only_loopback_and_no_listener_leaks_in() {
    let sb = Sandbox::new();
    let daemon = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = daemon.local_addr().unwrap().port();
    let script = "cat /proc/net/dev; readlink /proc/self/ns/net; \
                  ls -l /proc/$$/fd | grep -c socket || true";
    let interfaces = |out: &str| -> Vec<String> {
        out.lines()
            .filter_map(|l| l.split_once(':'))
            .filter(|(name, _)| !name.contains('|'))
            .map(|(name, _)| name.trim().to_owned())
            .filter(|n| !n.starts_with("net"))
            .collect()
    };
    let inside = ok(&sb.run(&sb.policy_with(&[port], true), &["sh", "-c", script]));
    assert_eq!(interfaces(&inside), ["lo"], "{inside}");
    let ours = std::fs::read_link("/proc/self/ns/net").unwrap();
    let lines: Vec<&str> = inside.lines().collect();
    assert!(
        lines.iter().any(|l| l.starts_with("net:[")) && !lines.contains(&ours.to_str().unwrap()),
        "not a namespace of its own: {inside}"
    );
    // The agent holds none of the forwarded listeners (it could accept on
    // them and play the daemon to its own children).
    assert_eq!(lines.last(), Some(&"0"), "{inside}");
    // The control: this machine has more than loopback, the agent without
    // the namespace sees it all.
    let outside = ok(&sb.run(&sb.policy_with(&[port], false), &["sh", "-c", script]));
    assert!(interfaces(&outside).len() > 1, "{outside}");
    assert!(outside.contains(ours.to_str().unwrap()), "{outside}");
}

#[test]
fn the_forwarder_ends_with_the_agent_and_is_out_of_its_reach() {
    let sb = Sandbox::new();
    let cgroups = TestCgroups::new();
    let daemon = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = daemon.local_addr().unwrap().port();
    // The agent's only child, before it starts any, is the forwarder; it
    // tries to kill it and read its environment, then waits for `go`.
    let script = "read k < /proc/$$/task/$$/children; echo $k > fwd; \
        kill -9 $k 2>/dev/null && echo killed; \
        cat /proc/$k/environ >/dev/null 2>&1 && echo read; \
        while [ ! -e go ]; do sleep 0.01; done";
    for ending in ["exit", "killed"] {
        let (group, policy) = cgroups.confine(ending, 64, sb.policy_with(&[port], true));
        let _ = std::fs::remove_file(sb.ws.join("go"));
        let _ = std::fs::remove_file(sb.ws.join("fwd"));
        let mut agent = sb
            .command(&policy, &["sh", "-c", script])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let fwd = sb.ws.join("fwd");
        assert!(eventually(
            || std::fs::read_to_string(&fwd).is_ok_and(|s| s.ends_with('\n'))
        ));
        let pid: i32 = std::fs::read_to_string(&fwd)
            .unwrap()
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("no forwarder: {:?}", std::fs::read_to_string(&fwd)));
        assert!(alive(pid), "the agent killed its forwarder");
        assert!(group.pids().unwrap().contains(&pid), "not in the cgroup");
        match ending {
            "exit" => std::fs::write(sb.ws.join("go"), "").unwrap(),
            _ => agent.kill().unwrap(),
        }
        let out = agent.wait_with_output().unwrap();
        let gone = eventually(|| !alive(pid));
        if !gone {
            let _ = group.kill();
        }
        assert!(gone, "the forwarder outlived the agent ({ending})");
        assert!(eventually(|| group.is_empty()), "{:?}", group.pids());
        assert_eq!(text(&out.stdout), "", "the agent reached its forwarder");
        group.remove().unwrap();
    }
}

#[test]
fn a_namespace_that_cannot_be_made_runs_nothing() {
    // An agent running `sandbox-exec` again, asking for a namespace: the
    // outer sandbox refuses `unshare`, and the inner one fails closed.
    let sb = Sandbox::new();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // In the run directory, where the outer sandbox lets it be read.
    let inner = sb.write_policy(&sb.policy_with(&[port], true), &sb.ws);
    let marker = sb.ws.join("ran");
    let mut outer = sb.policy_with(&[], false);
    outer
        .read_only
        .push(PathBuf::from(env!("CARGO_BIN_EXE_agency")));
    let script = format!(
        "'{}' sandbox-exec --policy '{}' -- touch '{}'",
        env!("CARGO_BIN_EXE_agency"),
        inner.display(),
        marker.display()
    );
    let o = sb.run(&outer, &["sh", "-c", &script]);
    refused(&o, "network namespace: unshare");
    assert!(!marker.exists());
    // The control: the same inner policy applies outside a sandbox.
    let o = Command::new(env!("CARGO_BIN_EXE_agency"))
        .arg("sandbox-exec")
        .arg("--policy")
        .arg(&inner)
        .arg("--")
        .arg("touch")
        .arg(&marker)
        .current_dir(&sb.root)
        .output()
        .unwrap();
    ok(&o);
    assert!(marker.exists());
}
