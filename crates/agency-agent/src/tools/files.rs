//! The file tools: `read_file` (line-numbered, a window of lines),
//! `write_file` (whole content, parent directories created) and
//! `edit_file` (replace an exact string that must be unique unless
//! `replace_all`, as Claude Code's Edit does: an ambiguous edit is refused
//! rather than guessed).

use serde_json::Value;

use super::common::{Args, Ctx, Outcome, ToolError, read_text};

/// Lines `read_file` shows when no `limit` is given.
const DEFAULT_LINES: u64 = 2000;

/// A line longer than this is cut in `read_file`'s output.
const MAX_LINE_CHARS: usize = 2000;

/// `read_file` stops adding lines past this many bytes of output and says
/// where to continue.
const MAX_READ_OUTPUT: usize = 50_000;

pub(crate) fn read_file(ctx: &Ctx, input: &Value) -> Outcome {
    let a = Args::new(input, &["path", "offset", "limit"])?;
    let arg = a.str("path")?;
    let path = ctx.resolve("path", arg)?;
    let shown = ctx.show(&path);
    let offset = a.opt_u64("offset")?.unwrap_or(1);
    let limit = a.opt_u64("limit")?.unwrap_or(DEFAULT_LINES);
    if offset == 0 {
        return Err(ToolError::invalid(
            "`offset` counts lines from 1 (the first line is 1)",
        ));
    }
    if limit == 0 {
        return Err(ToolError::invalid("`limit` must be at least 1"));
    }
    let bytes = read_text("read", &shown, &path)?;
    let text = String::from_utf8_lossy(&bytes);
    if text.is_empty() {
        return Ok(format!("{shown} is empty (0 lines)"));
    }
    let lines: Vec<&str> = text
        .strip_suffix('\n')
        .unwrap_or(&text)
        .split('\n')
        .collect();
    let total = lines.len() as u64;
    if offset > total {
        return Err(ToolError::invalid(format!(
            "failed to read {shown} from line {offset}: it has {total} lines"
        )));
    }
    let mut out = String::new();
    let first = offset;
    let mut next = offset;
    while next <= total && next - first < limit {
        if out.len() >= MAX_READ_OUTPUT {
            break;
        }
        let line = lines[(next - 1) as usize];
        let line = line.strip_suffix('\r').unwrap_or(line);
        out.push_str(&format!("{next:>6}\t"));
        match line.char_indices().nth(MAX_LINE_CHARS) {
            Some((cut, _)) => {
                out.push_str(&line[..cut]);
                out.push_str(&format!(
                    " … [line cut: {} characters]",
                    line.chars().count()
                ));
            }
            None => out.push_str(line),
        }
        out.push('\n');
        next += 1;
    }
    if next <= total {
        out.push_str(&format!(
            "[lines {first}–{} of {total}; continue with offset={next}]\n",
            next - 1
        ));
    }
    if matches!(text, std::borrow::Cow::Owned(_)) {
        out.push_str("[the file is not valid UTF-8: invalid bytes are shown as �]\n");
    }
    Ok(out)
}

pub(crate) fn write_file(ctx: &Ctx, input: &Value) -> Outcome {
    let a = Args::new(input, &["path", "content"])?;
    let path = ctx.resolve("path", a.str("path")?)?;
    let content = a.str("content")?;
    let shown = ctx.show(&path);
    match std::fs::metadata(&path) {
        Ok(m) if m.is_dir() => {
            return Err(ToolError::refused(format!(
                "failed to write {shown}: it is a directory"
            )));
        }
        // A FIFO or a device: writing could block or do anything.
        Ok(m) if !m.is_file() => {
            return Err(ToolError::refused(format!(
                "failed to write {shown}: it is not a regular file"
            )));
        }
        _ => {}
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .map_err(|e| ToolError::io("create the directories of", &shown, &e))?;
    }
    let existed = path.exists();
    std::fs::write(&path, content).map_err(|e| ToolError::io("write", &shown, &e))?;
    let lines = content.lines().count();
    Ok(format!(
        "{} {shown} ({} bytes, {lines} line{})",
        if existed { "replaced" } else { "created" },
        content.len(),
        if lines == 1 { "" } else { "s" }
    ))
}

pub(crate) fn edit_file(ctx: &Ctx, input: &Value) -> Outcome {
    let a = Args::new(input, &["path", "old_string", "new_string", "replace_all"])?;
    let path = ctx.resolve("path", a.str("path")?)?;
    let old = a.str("old_string")?;
    let new = a.str("new_string")?;
    let replace_all = a.bool("replace_all", false)?;
    let shown = ctx.show(&path);
    if old.is_empty() {
        return Err(ToolError::invalid(
            "`old_string` is empty; use write_file to create or replace a whole file",
        ));
    }
    if old == new {
        return Err(ToolError::invalid(
            "`old_string` and `new_string` are the same; there is nothing to change",
        ));
    }
    let bytes = read_text("edit", &shown, &path)?;
    let text = String::from_utf8(bytes).map_err(|_| {
        ToolError::refused(format!(
            "failed to edit {shown}: it is not valid UTF-8 text"
        ))
    })?;
    let count = text.matches(old).count();
    if count == 0 {
        return Err(ToolError::not_found(format!(
            "failed to edit {shown}: `old_string` was not found; read the file again and copy the text exactly, whitespace and indentation included"
        )));
    }
    if count > 1 && !replace_all {
        return Err(ToolError::invalid(format!(
            "failed to edit {shown}: `old_string` occurs {count} times; include more of the surrounding text to make it unique, or set replace_all to replace every occurrence"
        )));
    }
    let edited = if replace_all {
        text.replace(old, new)
    } else {
        text.replacen(old, new, 1)
    };
    std::fs::write(&path, &edited).map_err(|e| ToolError::io("write", &shown, &e))?;
    Ok(format!(
        "edited {shown}: replaced {count} occurrence{}",
        if count == 1 { "" } else { "s" }
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn read_numbers_lines_and_windows() {
        let (dir, ctx) = Ctx::temp();
        std::fs::write(dir.path().join("f.txt"), "one\ntwo\r\nthree\n").unwrap();
        let out = read_file(&ctx, &json!({"path": "f.txt"})).unwrap();
        assert_eq!(out, "     1\tone\n     2\ttwo\n     3\tthree\n");
        let out = read_file(&ctx, &json!({"path": "f.txt", "offset": 2, "limit": 1})).unwrap();
        assert_eq!(
            out,
            "     2\ttwo\n[lines 2–2 of 3; continue with offset=3]\n"
        );
        let e = read_file(&ctx, &json!({"path": "f.txt", "offset": 4})).unwrap_err();
        assert!(e.message.contains("it has 3 lines"), "{e}");
        assert!(read_file(&ctx, &json!({"path": "f.txt", "offset": 0})).is_err());
        // An absolute path reads the same file.
        let abs = dir.path().join("f.txt");
        let out = read_file(&ctx, &json!({"path": abs.to_str().unwrap(), "limit": 1})).unwrap();
        assert!(out.starts_with("     1\tone\n"), "{out}");
        std::fs::write(dir.path().join("empty"), "").unwrap();
        assert_eq!(
            read_file(&ctx, &json!({"path": "empty"})).unwrap(),
            "empty is empty (0 lines)"
        );
    }

    #[test]
    fn read_refuses_binary_missing_directories_and_huge_files() {
        let (dir, ctx) = Ctx::temp();
        std::fs::write(dir.path().join("b.bin"), b"\x7fELF\0\0\x01").unwrap();
        let e = read_file(&ctx, &json!({"path": "b.bin"})).unwrap_err();
        assert_eq!(e.kind, "refused");
        assert!(e.message.contains("looks binary"), "{e}");
        let e = read_file(&ctx, &json!({"path": "nope.txt"})).unwrap_err();
        assert_eq!(e.kind, "not_found");
        assert!(e.message.starts_with("failed to read nope.txt"), "{e}");
        let e = read_file(&ctx, &json!({"path": "."})).unwrap_err();
        assert!(e.message.contains("is a directory"), "{e}");
        let big = std::fs::File::create(dir.path().join("big")).unwrap();
        big.set_len(super::super::common::MAX_FILE_BYTES + 1)
            .unwrap();
        let e = read_file(&ctx, &json!({"path": "big"})).unwrap_err();
        assert!(e.message.contains("MiB"), "{e}");
    }

    #[test]
    fn read_cuts_long_lines_and_long_output() {
        let (dir, ctx) = Ctx::temp();
        let long = "x".repeat(MAX_LINE_CHARS + 5);
        std::fs::write(dir.path().join("long"), &long).unwrap();
        let out = read_file(&ctx, &json!({"path": "long"})).unwrap();
        assert!(out.contains("[line cut: 2005 characters]"), "{out}");
        let many: String = (0..1000)
            .map(|i| format!("{i} {}\n", "y".repeat(100)))
            .collect();
        std::fs::write(dir.path().join("many"), &many).unwrap();
        let out = read_file(&ctx, &json!({"path": "many"})).unwrap();
        assert!(out.len() < MAX_READ_OUTPUT + 500, "{}", out.len());
        let tail = out.lines().last().unwrap();
        assert!(
            tail.starts_with("[lines 1–") && tail.contains("continue with offset="),
            "{tail}"
        );
    }

    #[test]
    fn write_creates_parents_and_replaces() {
        let (dir, ctx) = Ctx::temp();
        let out = write_file(
            &ctx,
            &json!({"path": "a/b/c.txt", "content": "hi\nthere\n"}),
        )
        .unwrap();
        assert_eq!(out, "created a/b/c.txt (9 bytes, 2 lines)");
        let out = write_file(&ctx, &json!({"path": "a/b/c.txt", "content": "bye"})).unwrap();
        assert!(out.starts_with("replaced"), "{out}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("a/b/c.txt")).unwrap(),
            "bye"
        );
        let e = write_file(&ctx, &json!({"path": "a", "content": "x"})).unwrap_err();
        assert!(e.message.contains("is a directory"), "{e}");
        let e = write_file(&ctx, &json!({"path": "/dev/null", "content": "x"})).unwrap_err();
        assert!(e.message.contains("not a regular file"), "{e}");
        let e = write_file(&ctx, &json!({"path": "x"})).unwrap_err();
        assert!(e.message.contains("missing argument `content`"), "{e}");
    }

    #[test]
    fn edit_replaces_one_exact_unique_string() {
        let (dir, ctx) = Ctx::temp();
        let f = dir.path().join("code.rs");
        std::fs::write(&f, "let a = 1;\nlet b = 1;\n").unwrap();
        let e = edit_file(
            &ctx,
            &json!({"path": "code.rs", "old_string": "let c", "new_string": "x"}),
        )
        .unwrap_err();
        assert_eq!(e.kind, "not_found");
        assert!(e.message.contains("was not found"), "{e}");
        let e = edit_file(
            &ctx,
            &json!({"path": "code.rs", "old_string": "= 1;", "new_string": "= 2;"}),
        )
        .unwrap_err();
        assert!(e.message.contains("occurs 2 times"), "{e}");
        // Refused edits change nothing.
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            "let a = 1;\nlet b = 1;\n"
        );
        let out = edit_file(
            &ctx,
            &json!({"path": "code.rs", "old_string": "a = 1", "new_string": "a = 2"}),
        )
        .unwrap();
        assert_eq!(out, "edited code.rs: replaced 1 occurrence");
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            "let a = 2;\nlet b = 1;\n"
        );
        let out = edit_file(&ctx, &json!({"path": "code.rs", "old_string": "let", "new_string": "const", "replace_all": true})).unwrap();
        assert_eq!(out, "edited code.rs: replaced 2 occurrences");
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            "const a = 2;\nconst b = 1;\n"
        );
    }

    #[test]
    fn edit_refuses_empty_noop_binary_and_missing() {
        let (dir, ctx) = Ctx::temp();
        std::fs::write(dir.path().join("t"), "text").unwrap();
        std::fs::write(dir.path().join("b"), b"a\0b").unwrap();
        let cases = [
            (
                json!({"path": "t", "old_string": "", "new_string": "x"}),
                "write_file",
            ),
            (
                json!({"path": "t", "old_string": "te", "new_string": "te"}),
                "the same",
            ),
            (
                json!({"path": "b", "old_string": "a", "new_string": "c"}),
                "looks binary",
            ),
            (
                json!({"path": "gone", "old_string": "a", "new_string": "c"}),
                "failed to edit gone",
            ),
            (
                json!({"path": "t", "old": "a", "new_string": "c"}),
                "unknown argument `old`",
            ),
        ];
        for (input, needle) in cases {
            let e = edit_file(&ctx, &input).unwrap_err();
            assert!(e.message.contains(needle), "{input}: {e}");
        }
        assert_eq!(std::fs::read(dir.path().join("b")).unwrap(), b"a\0b");
    }
}
