//! Borderless tables fitted to the terminal (see `layout`), and tree
//! drawings for the handler tree and the outcome DAG: pure functions, so
//! every layout is unit-testable.

use std::collections::{BTreeMap, BTreeSet};

use comfy_table::{ContentArrangement, Table, presets};

use super::layout;

/// A borderless table, columns two spaces apart, no trailing blanks (so
/// snapshots and `diff`s of the output stay clean). Never wraps: a pipe
/// gets whole lines. Every cell is one line with its control characters
/// made visible (`safe_text::line`): cells hold text agents wrote.
///
/// Unless `--wide` (see [`layout`]): a listing (a table with a header)
/// shows ids as short unique prefixes, and every table fits the terminal,
/// its widest cells cut with `…` (a note under it says so).
pub fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    table_within(layout::get().width, header, rows)
}

/// [`table`] fitted to `max` columns (for a table printed indented).
pub fn table_within(max: usize, header: &[&str], rows: Vec<Vec<String>>) -> String {
    let l = layout::get();
    let mut rows: Vec<Vec<String>> = rows
        .into_iter()
        .map(|r| {
            r.iter()
                .map(|c| crate::safe_text::line(c))
                .collect::<Vec<_>>()
        })
        .collect();
    if !l.wide && !header.is_empty() {
        layout::shorten_ids(&mut rows);
    }
    let cut = !l.wide && fit_cells(max, header, &mut rows);
    let mut t = Table::new();
    t.load_preset(presets::NOTHING)
        .set_content_arrangement(ContentArrangement::Disabled);
    if !header.is_empty() {
        t.set_header(header.iter().copied());
    }
    for r in rows {
        t.add_row(r);
    }
    for c in t.column_iter_mut() {
        c.set_padding((0, 2));
    }
    let mut s: String = t
        .to_string()
        .lines()
        .map(|l| format!("{}\n", l.trim_end()))
        .collect();
    if s.is_empty() {
        s.push('\n');
    }
    if cut {
        s.push_str(CUT_NOTE);
    }
    s
}

/// Printed under a table whose cells were cut to fit.
pub const CUT_NOTE: &str = "(long cells are cut to fit; --wide shows them whole, --json as data)\n";

/// Cut the cells of the widest columns so that every line fits `max`
/// columns; whether any cell was cut. Columns of ids (and tree drawings of
/// them) are never cut: a cut id could not be typed back.
fn fit_cells(max: usize, header: &[&str], rows: &mut [Vec<String>]) -> bool {
    let n = rows
        .iter()
        .map(Vec::len)
        .max()
        .unwrap_or(0)
        .max(header.len());
    let mut natural = vec![0; n];
    for (i, h) in header.iter().enumerate() {
        natural[i] = layout::width(h);
    }
    for r in rows.iter() {
        for (i, c) in r.iter().enumerate() {
            natural[i] = natural[i].max(layout::width(c));
        }
    }
    let floors: Vec<usize> = (0..n)
        .map(|i| layout::floor(header.get(i).copied().unwrap_or(""), natural[i]))
        .collect();
    let keep: Vec<bool> = (0..n)
        .map(|i| rows.iter().filter_map(|r| r.get(i)).all(|c| is_id_cell(c)))
        .collect();
    let Some(widths) = layout::fit(&natural, &floors, &keep, max) else {
        return false;
    };
    let mut cut = false;
    for r in rows.iter_mut() {
        for (i, c) in r.iter_mut().enumerate() {
            if layout::width(c) > widths[i] {
                *c = layout::cut(c, widths[i]);
                cut = true;
            }
        }
    }
    cut
}

/// A cell that is an id (perhaps under a tree drawing), or empty or `-`.
fn is_id_cell(c: &str) -> bool {
    let id = c.trim_start_matches(['│', '├', '└', '─', ' ']);
    id.is_empty()
        || id == "-"
        || (id.len() <= 36 && id.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-'))
}

/// One line of a tree drawing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeLine<K> {
    /// Box-drawing indentation, e.g. `"│   └── "`.
    pub prefix: String,
    pub id: K,
    /// The node was drawn earlier (it has several parents): its subtree is
    /// not drawn again.
    pub repeat: bool,
}

/// Draw a forest depth-first: `roots` first, children in the order given.
/// A node reached again is drawn again (under each parent) but marked as a
/// repeat and not expanded, which also makes cycles harmless. Nodes of
/// `all` not reachable from `roots` are drawn afterwards as extra roots, so
/// nothing the API returned is silently dropped.
pub fn tree<K: Ord + Copy>(
    roots: &[K],
    children: &BTreeMap<K, Vec<K>>,
    all: &[K],
) -> Vec<TreeLine<K>> {
    let mut out = Vec::new();
    let mut seen = BTreeSet::new();
    let unreached = all.iter().filter(|k| !roots.contains(k));
    for start in roots.iter().chain(unreached) {
        if seen.contains(start) && !roots.contains(start) {
            continue;
        }
        // An explicit stack: a long chain of outcomes must not overflow the
        // call stack. Entries: node, its own prefix, its children's indent.
        let mut stack = vec![(*start, String::new(), String::new())];
        while let Some((id, prefix, indent)) = stack.pop() {
            let repeat = !seen.insert(id);
            out.push(TreeLine { prefix, id, repeat });
            if repeat {
                continue;
            }
            let kids = children.get(&id).map(Vec::as_slice).unwrap_or_default();
            for (i, k) in kids.iter().enumerate().rev() {
                let last = i + 1 == kids.len();
                let own = format!("{indent}{}", if last { "└── " } else { "├── " });
                let next = format!("{indent}{}", if last { "    " } else { "│   " });
                stack.push((*k, own, next));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draw(roots: &[u32], edges: &[(u32, u32)], all: &[u32]) -> String {
        let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (p, c) in edges {
            children.entry(*p).or_default().push(*c);
        }
        tree(roots, &children, all)
            .into_iter()
            .map(|l| {
                format!(
                    "{}{}{}\n",
                    l.prefix,
                    l.id,
                    if l.repeat { " (repeat)" } else { "" }
                )
            })
            .collect()
    }

    #[test]
    fn tree_indents_by_depth_with_connectors() {
        let s = draw(&[1], &[(1, 2), (1, 3), (2, 4), (2, 5), (3, 6)], &[]);
        assert_eq!(
            s,
            "1\n\
             ├── 2\n\
             │   ├── 4\n\
             │   └── 5\n\
             └── 3\n    \
                 └── 6\n"
        );
    }

    #[test]
    fn a_node_with_two_parents_appears_under_each_and_is_marked_once_repeated() {
        // 4 has parents 2 and 3; its child 5 is drawn only the first time.
        let s = draw(&[1], &[(1, 2), (1, 3), (2, 4), (3, 4), (4, 5)], &[]);
        assert_eq!(
            s,
            "1\n\
             ├── 2\n\
             │   └── 4\n\
             │       └── 5\n\
             └── 3\n    \
                 └── 4 (repeat)\n"
        );
    }

    #[test]
    fn cycles_terminate_and_unreached_nodes_are_not_dropped() {
        let s = draw(&[1], &[(1, 2), (2, 1), (7, 8)], &[1, 2, 7, 8]);
        assert_eq!(s, "1\n└── 2\n    └── 1 (repeat)\n7\n└── 8\n");
    }

    #[test]
    fn tables_have_no_borders_padding_or_trailing_blanks() {
        let t = table(
            &["A", "LONGER"],
            vec![
                vec!["x".into(), "y".into()],
                vec!["wide cell".into(), String::new()],
            ],
        );
        assert_eq!(t, "A          LONGER\nx          y\nwide cell\n");
    }
}
