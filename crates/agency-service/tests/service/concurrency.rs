//! N writers, one file: compare-and-set must make every write either a new
//! version or a conflict, with no lost update and no gap.

use std::collections::BTreeSet;
use std::sync::Arc;

use agency_core::Principal;
use agency_service::ServiceError;

use crate::support::Env;

const TASKS: usize = 32;
const WRITES: usize = 200;

#[test]
fn concurrent_cas_writes_commit_exactly_the_winners() {
    let env = Env::new();
    let svc = env.svc.clone();
    let r = env.agent(env.root);
    let file = svc.kb_create(r, "contended", b"v1").unwrap();
    let handles: Vec<_> = (0..TASKS)
        .map(|t| {
            let svc = Arc::clone(&svc);
            // Half the writers act as the root handler's agent, half as the user.
            let who = if t % 2 == 0 { r } else { Principal::User };
            std::thread::spawn(move || {
                let (mut won, mut lost) = (Vec::new(), 0usize);
                for i in 0..WRITES {
                    let cur = svc.kb_read(who, file).unwrap();
                    let body = format!("task {t} write {i}");
                    match svc.kb_write(who, file, body.as_bytes(), cur.version, cur.hash.as_str()) {
                        Ok(v) => won.push((v.version, body)),
                        Err(ServiceError::Conflict {
                            current_version, ..
                        }) => {
                            assert!(
                                current_version > cur.version,
                                "a conflict names a newer version"
                            );
                            lost += 1;
                        }
                        Err(e) => panic!("unexpected error: {e}"),
                    }
                }
                (won, lost)
            })
        })
        .collect();
    let mut wins = Vec::new();
    let mut losses = 0;
    for h in handles {
        let (w, l) = h.join().unwrap();
        wins.extend(w);
        losses += l;
    }
    assert_eq!(
        wins.len() + losses,
        TASKS * WRITES,
        "every attempt either won or got a conflict"
    );
    let history = svc.kb_history(Principal::User, file).unwrap();
    assert_eq!(
        history.len(),
        1 + wins.len(),
        "committed versions equal successful writes"
    );
    let versions: Vec<i64> = history.iter().map(|v| v.version).collect();
    assert_eq!(
        versions,
        (1..=history.len() as i64).collect::<Vec<_>>(),
        "no gaps"
    );
    let won_versions: BTreeSet<i64> = wins.iter().map(|(v, _)| *v).collect();
    assert_eq!(
        won_versions.len(),
        wins.len(),
        "no version was handed to two writers"
    );
    for (v, body) in &wins {
        assert_eq!(
            svc.kb_read_version(Principal::User, file, *v)
                .unwrap()
                .content,
            body.as_bytes()
        );
    }
    assert!(svc.fsck().unwrap().is_clean());
}
