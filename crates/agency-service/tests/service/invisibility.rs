//! A file a handler holds no capability on does not exist for it: every
//! operation answers exactly as for a UUID that was never used.

use agency_core::{FileId, Level};

use crate::support::Env;

#[test]
fn a_file_without_capability_is_indistinguishable_from_a_missing_one() {
    let env = Env::new();
    let svc = &env.svc;
    let r = env.agent(env.root);
    let a = env.outcome(env.root, "A", &[env.root.root()]);
    let h = svc.delegate(r, a, &[]).unwrap().handler;
    let p = env.agent(h);
    let secret = svc
        .kb_create(r, "Quarterly secret plans", b"top secret")
        .unwrap();
    let missing = FileId::new_random();
    let hash = svc.kb_read(r, secret).unwrap().hash;

    let normalise = |s: String, id: FileId| s.replace(&id.to_string(), "<ID>");
    type Op<'a> = Box<dyn Fn(FileId) -> String + 'a>;
    let ops: Vec<(&str, Op)> = vec![
        (
            "read",
            Box::new(|f| svc.kb_read(p, f).unwrap_err().to_string()),
        ),
        (
            "read_version",
            Box::new(|f| svc.kb_read_version(p, f, 1).unwrap_err().to_string()),
        ),
        (
            "history",
            Box::new(|f| svc.kb_history(p, f).unwrap_err().to_string()),
        ),
        (
            "write",
            Box::new(|f| {
                svc.kb_write(p, f, b"x", 1, hash.as_str())
                    .unwrap_err()
                    .to_string()
            }),
        ),
        (
            "audit",
            Box::new(|f| svc.kb_audit(p, f, None).unwrap_err().to_string()),
        ),
        (
            "level",
            Box::new(|f| svc.kb_level(p, f).unwrap_err().to_string()),
        ),
        (
            "attach",
            Box::new(|f| {
                svc.mail_send(
                    p,
                    agency_core::MailTarget::Handler(env.root),
                    &agency_service::MailBody::File {
                        file: f,
                        subject: None,
                    },
                )
                .unwrap_err()
                .to_string()
            }),
        ),
        (
            "grant",
            Box::new(|f| {
                svc.grant(
                    p,
                    h,
                    &agency_service::GrantRequest {
                        resource: agency_core::Resource::Kb(f),
                        level: Level::Read,
                        delegatable: false,
                    },
                )
                .unwrap_err()
                .to_string()
            }),
        ),
    ];
    for (name, op) in &ops {
        let for_secret = normalise(op(secret), secret);
        let for_missing = normalise(op(missing), missing);
        assert_eq!(for_secret, for_missing, "{name}");
        assert!(!for_secret.contains("Quarterly"), "{name}: {for_secret}");
    }
    assert!(
        svc.kb_list(p, None, None)
            .unwrap()
            .iter()
            .all(|f| f.id != secret)
    );
    assert!(
        svc.kb_browse(p, "quarterly", None, None)
            .unwrap()
            .is_empty()
    );
    assert!(
        svc.kb_browse(p, "", None, None)
            .unwrap()
            .iter()
            .all(|f| f.id != secret)
    );
}
