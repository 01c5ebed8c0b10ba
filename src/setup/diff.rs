//! A small unified line diff for `--dry-run`.
//!
//! Config files are small and edits are local, so a common prefix/suffix trim followed by
//! a plain LCS table is plenty; no extra dependency needed.

/// One line of an edit script.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op<'a> {
    Keep(&'a str),
    Del(&'a str),
    Add(&'a str),
}

/// Beyond this many LCS cells the middle is shown as "all removed, all added".
const MAX_TABLE_CELLS: usize = 4_000_000;

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// A unified diff of `old` → `new` with `---`/`+++` headers; empty when equal.
pub fn unified(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    if old == new {
        return String::new();
    }
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let ops = edit_script(&a, &b);
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    for hunk in hunks(&ops) {
        out.push_str(&hunk);
    }
    if !old.is_empty() && !new.is_empty() && old.ends_with('\n') != new.ends_with('\n') {
        out.push_str("\\ newline at end of file differs\n");
    }
    out
}

fn edit_script<'a>(a: &[&'a str], b: &[&'a str]) -> Vec<Op<'a>> {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (ma, mb) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let mut ops: Vec<Op> = a[..prefix].iter().map(|l| Op::Keep(l)).collect();
    if (ma.len() + 1) * (mb.len() + 1) > MAX_TABLE_CELLS {
        ops.extend(ma.iter().map(|l| Op::Del(l)));
        ops.extend(mb.iter().map(|l| Op::Add(l)));
    } else {
        // lcs[i][j] = length of the LCS of ma[i..] and mb[j..].
        let width = mb.len() + 1;
        let mut lcs = vec![0u32; (ma.len() + 1) * width];
        for i in (0..ma.len()).rev() {
            for j in (0..mb.len()).rev() {
                lcs[i * width + j] = if ma[i] == mb[j] {
                    lcs[(i + 1) * width + j + 1] + 1
                } else {
                    lcs[(i + 1) * width + j].max(lcs[i * width + j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < ma.len() || j < mb.len() {
            if i < ma.len() && j < mb.len() && ma[i] == mb[j] {
                ops.push(Op::Keep(ma[i]));
                i += 1;
                j += 1;
            } else if i < ma.len()
                && (j == mb.len() || lcs[(i + 1) * width + j] >= lcs[i * width + j + 1])
            {
                ops.push(Op::Del(ma[i]));
                i += 1;
            } else {
                ops.push(Op::Add(mb[j]));
                j += 1;
            }
        }
    }
    ops.extend(a[a.len() - suffix..].iter().map(|l| Op::Keep(l)));
    ops
}

fn hunks(ops: &[Op]) -> Vec<String> {
    let changed: Vec<usize> = ops
        .iter()
        .enumerate()
        .filter(|(_, op)| !matches!(op, Op::Keep(_)))
        .map(|(i, _)| i)
        .collect();
    let mut out = Vec::new();
    let mut k = 0;
    while k < changed.len() {
        let start = changed[k].saturating_sub(CONTEXT);
        let mut end = changed[k];
        while k + 1 < changed.len() && changed[k + 1] <= end + 2 * CONTEXT + 1 {
            k += 1;
            end = changed[k];
        }
        let end = (end + CONTEXT + 1).min(ops.len());
        k += 1;
        let (old_start, new_start) = ops[..start].iter().fold((0, 0), |(o, n), op| match op {
            Op::Keep(_) => (o + 1, n + 1),
            Op::Del(_) => (o + 1, n),
            Op::Add(_) => (o, n + 1),
        });
        let mut body = String::new();
        let (mut old_len, mut new_len) = (0, 0);
        for op in &ops[start..end] {
            let (sign, line) = match op {
                Op::Keep(l) => {
                    old_len += 1;
                    new_len += 1;
                    (' ', l)
                }
                Op::Del(l) => {
                    old_len += 1;
                    ('-', l)
                }
                Op::Add(l) => {
                    new_len += 1;
                    ('+', l)
                }
            };
            body.push(sign);
            body.push_str(line);
            body.push('\n');
        }
        let at = |first: usize, len: usize| if len == 0 { first } else { first + 1 };
        out.push(format!(
            "@@ -{},{old_len} +{},{new_len} @@\n{body}",
            at(old_start, old_len),
            at(new_start, new_len)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_have_no_diff() {
        assert_eq!(unified("a\n", "a\n", "x", "y"), "");
    }

    #[test]
    fn shows_an_insertion_with_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8\n";
        let new = "1\n2\n3\n4\nnew\n5\n6\n7\n8\n";
        assert_eq!(
            unified(old, new, "a", "b"),
            "--- a\n+++ b\n@@ -2,6 +2,7 @@\n 2\n 3\n 4\n+new\n 5\n 6\n 7\n"
        );
    }

    #[test]
    fn creating_a_file_diffs_against_nothing() {
        assert_eq!(
            unified("", "x\ny\n", "/dev/null", "f"),
            "--- /dev/null\n+++ f\n@@ -0,0 +1,2 @@\n+x\n+y\n"
        );
    }

    #[test]
    fn far_apart_changes_make_two_hunks() {
        let old: String = (0..20).map(|i| format!("{i}\n")).collect();
        let new: String = (0..20)
            .map(|i| match i {
                2 => "two\n".to_string(),
                17 => "seventeen\n".to_string(),
                _ => format!("{i}\n"),
            })
            .collect();
        let diff = unified(&old, &new, "a", "b");
        assert_eq!(diff.matches("@@ -").count(), 2, "{diff}");
        assert!(diff.contains("-2\n+two\n") && diff.contains("-17\n+seventeen\n"));
    }
}
