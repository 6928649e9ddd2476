//! The system paths every agent needs: programs and libraries read-only,
//! `/etc` entry by entry without the files that hold secrets, `/proc`
//! (other processes' `environ` and memory stay protected: Landlock denies
//! ptrace-class access outside the sandbox), and single device files —
//! never `/dev` wholesale, since a root process could read `/dev/vda`
//! (the disk holding the database) raw.

use std::path::{Path, PathBuf};

/// Directories of programs and libraries, read-only where present.
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// `/etc` entries (relative to `/etc`) an agent must not read: password
/// hashes, sudo rules, SSH host keys, TLS private keys, keytabs, stored
/// credentials and network secrets, and the machine's unique id.
const ETC_SECRETS: &[&str] = &[
    "shadow",
    "shadow-",
    "gshadow",
    "gshadow-",
    "sudoers",
    "sudoers.d",
    "ssh",
    "ssl/private",
    "pki/tls/private",
    "letsencrypt",
    "krb5.keytab",
    "security/opasswd",
    "machine-id",
    "credstore",
    "credstore.encrypted",
    "NetworkManager/system-connections",
    "wireguard",
    "ipsec.secrets",
    "ipsec.d/private",
    "ppp/chap-secrets",
    "ppp/pap-secrets",
    "docker",
    "containerd",
    ".pwd.lock",
];

/// Device files that must be writable (sinks and sources every shell and
/// runtime opens). Not `/dev/tty`: an agent sharing the daemon's
/// controlling terminal could write to the user's screen or, through
/// `TIOCSTI`, type into it.
const RW_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Device files that are read only.
const RO_DEVICES: &[&str] = &["/dev/random", "/dev/urandom"];

/// Read-only system paths an agent needs, those present on this machine:
/// the program and library directories, every `/etc` entry except the
/// secret-bearing ones, `/proc`, the CPU topology some runtimes read to
/// size their thread pools, and the random devices.
pub fn system_read_only() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = SYSTEM_DIRS
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect();
    let secrets: Vec<PathBuf> = ETC_SECRETS
        .iter()
        .map(|s| Path::new("/etc").join(s))
        .collect();
    etc_entries(Path::new("/etc"), &secrets, &mut out);
    for extra in ["/proc", "/sys/devices/system/cpu"] {
        let p = PathBuf::from(extra);
        if p.exists() {
            out.push(p);
        }
    }
    out.extend(RO_DEVICES.iter().map(PathBuf::from).filter(|p| p.exists()));
    out
}

/// Device files an agent may write (and read): `/dev/null`, `/dev/zero`,
/// `/dev/full`, those present. They go in
/// [`crate::Policy::read_write`] as files.
pub fn system_read_write_files() -> Vec<PathBuf> {
    RW_DEVICES
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect()
}

/// Every entry of `dir`, except the denied ones; a directory holding a
/// denied path is listed entry by entry in turn. Unreadable directories
/// contribute nothing (fail closed).
fn etc_entries(dir: &Path, denied: &[PathBuf], out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if denied.contains(&path) {
            continue;
        }
        if denied.iter().any(|d| d.starts_with(&path)) {
            // A real directory (not a symlink to elsewhere) holding a
            // secret: grant its other entries one by one.
            if path.is_dir() && !path.is_symlink() {
                etc_entries(&path, denied, out);
            }
            continue;
        }
        // Dangling symlinks cannot be granted (nothing to open).
        if path.exists() {
            out.push(path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etc_is_listed_without_its_secrets() {
        let dir = tempfile::tempdir().expect("tempdir");
        let etc = dir.path();
        for f in ["passwd", "shadow", "hosts"] {
            std::fs::write(etc.join(f), "x").expect("write");
        }
        std::fs::create_dir_all(etc.join("ssl/private")).expect("mkdir");
        std::fs::create_dir_all(etc.join("ssl/certs")).expect("mkdir");
        std::fs::write(etc.join("ssl/openssl.cnf"), "x").expect("write");
        std::fs::create_dir_all(etc.join("ssh")).expect("mkdir");
        let denied: Vec<PathBuf> = ["shadow", "ssl/private", "ssh"]
            .iter()
            .map(|s| etc.join(s))
            .collect();
        let mut out = Vec::new();
        etc_entries(etc, &denied, &mut out);
        let rel: Vec<String> = out
            .iter()
            .map(|p| p.strip_prefix(etc).expect("under").display().to_string())
            .collect();
        assert_eq!(rel, ["hosts", "passwd", "ssl/certs", "ssl/openssl.cnf"]);
    }

    #[test]
    fn system_paths_never_include_secrets_or_dev() {
        let ro = system_read_only();
        assert!(ro.iter().any(|p| p == Path::new("/usr")));
        assert!(ro.iter().any(|p| p == Path::new("/proc")));
        for p in &ro {
            assert!(
                p != Path::new("/dev") && p != Path::new("/etc"),
                "{}",
                p.display()
            );
            assert!(
                !p.starts_with("/etc/shadow") && !p.starts_with("/etc/ssh"),
                "{}",
                p.display()
            );
            assert!(!p.starts_with("/etc/ssl/private"), "{}", p.display());
        }
        let rw = system_read_write_files();
        assert!(rw.iter().any(|p| p == Path::new("/dev/null")));
        assert!(
            rw.iter()
                .all(|p| p.starts_with("/dev/") && p != Path::new("/dev/"))
        );
    }
}
