//! `agency demo` is the main job's offline story: it must run to the end,
//! exit 0, and show the three-level organisation and the answer.

#![allow(clippy::unwrap_used)]

use std::process::Command;

#[test]
fn the_demo_story_runs_to_the_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("demo-home");
    let out = Command::new(env!("CARGO_BIN_EXE_agency"))
        .arg("--home")
        .arg(&home)
        .arg("demo")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "demo failed:\n{stdout}\n{stderr}");
    // The three levels, each retired after its boss verified its work.
    for title in ["Soil prepared", "Plants chosen", "Seeds ordered"] {
        let line = stdout
            .lines()
            .find(|l| l.contains(title) && l.contains("deactivated"))
            .unwrap_or_else(|| {
                panic!("no deactivated handler for {title}:\n{stdout}");
            });
        assert!(line.contains("no"), "{line}");
    }
    assert!(
        stdout.contains("└── "),
        "the handler tree is drawn: {stdout}"
    );
    assert!(stdout.matches("completed").count() >= 4, "{stdout}");
    assert!(
        stdout.contains("subject  Your garden plan is ready"),
        "{stdout}"
    );
    assert!(stdout.contains("7 agent runs"), "{stdout}");
    // A second demo in the same home is refused rather than mixed in.
    let again = Command::new(env!("CARGO_BIN_EXE_agency"))
        .arg("--home")
        .arg(&home)
        .arg("demo")
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already an Agency home"));
}

/// Issue 12 item 8: `agency demo --org` stands seed 002's WeatherAgency up
/// from its source files and shows it answering, offline.
#[test]
fn issue12_the_org_demo_shows_the_weather_agency_answering() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("demo-home");
    let out = Command::new(env!("CARGO_BIN_EXE_agency"))
        .arg("--home")
        .arg(&home)
        .args(["demo", "--org"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "demo failed:\n{stdout}\n{stderr}");
    for agent in ["FrontDeskAgent", "WeatherAgent"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(agent) && l.contains("create")),
            "{stdout}"
        );
    }
    assert!(
        stdout.contains(
            "WeatherAgency -> outside party: Hello! In New York it is 12.5 degrees and light rain."
        ),
        "{stdout}"
    );
    assert!(stdout.contains("3 agent runs"), "{stdout}");
    assert!(
        stdout.contains("1 weather API call(s): /current?location=New+York"),
        "{stdout}"
    );
}
