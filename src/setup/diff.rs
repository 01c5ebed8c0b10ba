//! A unified line diff for `--dry-run`: the edit script comes from the `similar` crate
//! (Myers), the output is the classic `---`/`+++`/`@@` text with 3 lines of context.

use std::time::{Duration, Instant};

use similar::{Algorithm, ChangeTag, DiffOp};

/// Lines of context around each change.
const CONTEXT: usize = 3;

/// Past this, the diff is still correct but no longer the shortest (huge files only).
const TIME_LIMIT: Duration = Duration::from_secs(1);

/// A unified diff of `old` → `new` with `---`/`+++` headers; empty when equal.
pub fn unified(old: &str, new: &str, old_name: &str, new_name: &str) -> String {
    if old == new {
        return String::new();
    }
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let deadline = Some(Instant::now() + TIME_LIMIT);
    let ops = similar::capture_diff_slices_deadline(Algorithm::Myers, &a, &b, deadline);
    let mut out = format!("--- {old_name}\n+++ {new_name}\n");
    for hunk in similar::group_diff_ops(ops, CONTEXT) {
        push_hunk(&mut out, &hunk, &a, &b);
    }
    if !old.is_empty() && !new.is_empty() && old.ends_with('\n') != new.ends_with('\n') {
        out.push_str("\\ newline at end of file differs\n");
    }
    out
}

/// One `@@ -start,len +start,len @@` hunk and its lines.
fn push_hunk(out: &mut String, hunk: &[DiffOp], a: &[&str], b: &[&str]) {
    let (Some(first), Some(last)) = (hunk.first(), hunk.last()) else {
        return;
    };
    let old_start = first.old_range().start;
    let new_start = first.new_range().start;
    let old_len = last.old_range().end - old_start;
    let new_len = last.new_range().end - new_start;
    // An empty range names the line before it, as diff(1) does.
    let at = |start: usize, len: usize| if len == 0 { start } else { start + 1 };
    out.push_str(&format!(
        "@@ -{},{old_len} +{},{new_len} @@\n",
        at(old_start, old_len),
        at(new_start, new_len)
    ));
    for change in hunk.iter().flat_map(|op| op.iter_changes(a, b)) {
        out.push(match change.tag() {
            ChangeTag::Equal => ' ',
            ChangeTag::Delete => '-',
            ChangeTag::Insert => '+',
        });
        out.push_str(change.value());
        out.push('\n');
    }
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
