//! The exporter's cursor: the number of the last event whose spans the
//! collector accepted, kept in a small file of the home
//! (`telemetry.cursor`), written whole through a temporary file and a
//! rename so a crash leaves the old value or the new one.

use std::path::Path;

/// `None`: no cursor saved yet.
pub(crate) fn load(path: &Path) -> Result<Option<i64>, String> {
    match std::fs::read_to_string(path) {
        Ok(s) => s.trim().parse::<i64>().map(Some).map_err(|_| {
            format!(
                "failed to read the telemetry cursor {}: {:?} is not an event number",
                path.display(),
                s.trim()
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!(
            "failed to read the telemetry cursor {}: {e}",
            path.display()
        )),
    }
}

pub(crate) fn save(path: &Path, seq: i64) -> Result<(), String> {
    let tmp = path.with_extension("cursor.tmp");
    std::fs::write(&tmp, format!("{seq}\n"))
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| {
            format!(
                "failed to save the telemetry cursor {}: {e}",
                path.display()
            )
        })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_saved_cursor_reads_back_and_garbage_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("telemetry.cursor");
        assert_eq!(super::load(&p).unwrap(), None);
        super::save(&p, 42).unwrap();
        assert_eq!(super::load(&p).unwrap(), Some(42));
        std::fs::write(&p, "x").unwrap();
        assert!(super::load(&p).unwrap_err().contains("not an event number"));
    }
}
