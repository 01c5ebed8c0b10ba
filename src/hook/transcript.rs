//! Noticing that Claude decided the tool call itself while the hook still waits.
//!
//! In Claude's terminal UI the hook and Claude's own dialog race. When the person answers
//! the dialog (or interrupts), Claude neither signals nor waits for the hook; the question
//! would stay open on every other surface until the hook's budget ran out. Claude does
//! write the call and its result to the session transcript (`transcript_path`, JSON
//! lines), so the hook watches it: the call is the unresolved `tool_use` whose name and
//! input equal the payload's; once a `tool_result` for it appears, the call is decided and
//! the hook withdraws its question and stays silent. Anything unexpected in the file just
//! means the watch never fires — the hook then behaves as without it.

use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

/// How often the transcript's size is checked.
const LOOK_EVERY: Duration = Duration::from_millis(250);
/// How much of the transcript before the hook started is read to find the call.
const TAIL_BYTES: u64 = 1024 * 1024;
/// At most this much is read per look; the rest waits for the next one.
const MAX_READ_PER_LOOK: u64 = 8 * 1024 * 1024;

/// The transcript of one session, watched for the result of one tool call.
pub struct Watch {
    path: PathBuf,
    tool_name: String,
    tool_input: Value,
    /// `tool_use` ids of matching calls that have no result yet.
    open_calls: HashSet<String>,
    /// Bytes of the file already read.
    offset: u64,
    /// The file's length when the hook started: results before it were decided earlier.
    start_len: u64,
    /// The start of a line whose end has not been written yet.
    partial: Vec<u8>,
}

impl Watch {
    /// A watch for the call in a Claude payload; `None` without a transcript. Only looks
    /// at the file's length: the reading waits until the question is open.
    pub fn new(payload: &Value) -> Option<Watch> {
        let path = PathBuf::from(payload.get("transcript_path")?.as_str()?);
        let start_len = regular_file_len(&path)?;
        let offset = start_len.saturating_sub(TAIL_BYTES);
        Some(Watch {
            path,
            tool_name: payload.get("tool_name")?.as_str()?.to_string(),
            tool_input: payload.get("tool_input")?.clone(),
            open_calls: HashSet::new(),
            offset,
            start_len,
            // Starting mid-file, the first line read is a fragment: make it unparseable.
            partial: if offset > 0 {
                b"\0".to_vec()
            } else {
                Vec::new()
            },
        })
    }

    /// Resolves once the transcript shows a result for the call.
    pub async fn decided_elsewhere(mut self) {
        tokio::time::sleep(LOOK_EVERY).await;
        self.read_history();
        loop {
            if self.read_new_lines(u64::MAX) {
                return;
            }
            tokio::time::sleep(LOOK_EVERY).await;
        }
    }

    /// Reads the transcript up to where it ended when the hook started: which matching
    /// calls are still open then.
    fn read_history(&mut self) {
        self.read_new_lines(self.start_len);
    }

    /// Reads what was appended since the last look, up to `limit` bytes into the file;
    /// true if a watched call got a result.
    fn read_new_lines(&mut self, limit: u64) -> bool {
        // Only a regular file: opening a FIFO would block the hook's only thread.
        if regular_file_len(&self.path).is_none() {
            return false;
        }
        let Ok(mut file) = std::fs::File::open(&self.path) else {
            return false;
        };
        let real_len = file.metadata().map(|m| m.len()).unwrap_or(0);
        if real_len < self.offset {
            // Rewritten or truncated: nothing here can be trusted to line up any more.
            self.open_calls.clear();
            self.offset = real_len;
            self.partial.clear();
            return false;
        }
        let len = real_len.min(limit).min(self.offset + MAX_READ_PER_LOOK);
        if len == self.offset || file.seek(SeekFrom::Start(self.offset)).is_err() {
            return false;
        }
        let mut fresh = Vec::new();
        if file
            .take(len - self.offset)
            .read_to_end(&mut fresh)
            .is_err()
        {
            return false;
        }
        self.offset += fresh.len() as u64;
        self.partial.extend_from_slice(&fresh);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return false;
        };
        let complete: Vec<u8> = self.partial.drain(..=end).collect();
        let mut decided = false;
        for line in complete.split(|b| *b == b'\n') {
            if let Ok(entry) = serde_json::from_slice::<Value>(line) {
                decided |= self.note(&entry);
            }
        }
        decided
    }

    /// Updates the open calls from one transcript entry; true if one of them got a result.
    fn note(&mut self, entry: &Value) -> bool {
        let Some(content) = entry
            .get("message")
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
        else {
            return false;
        };
        let mut decided = false;
        for item in content {
            match item.get("type").and_then(Value::as_str) {
                Some("tool_use")
                    if item.get("name").and_then(Value::as_str) == Some(&self.tool_name)
                        && item.get("input") == Some(&self.tool_input) =>
                {
                    if let Some(id) = item.get("id").and_then(Value::as_str) {
                        self.open_calls.insert(id.to_string());
                    }
                }
                Some("tool_result") => {
                    if let Some(id) = item.get("tool_use_id").and_then(Value::as_str) {
                        decided |= self.open_calls.remove(id);
                    }
                }
                _ => {}
            }
        }
        decided
    }
}

/// The length of `path` if it is a regular file.
fn regular_file_len(path: &std::path::Path) -> Option<u64> {
    let meta = std::fs::metadata(path).ok()?;
    meta.is_file().then_some(meta.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::io::Write;

    fn tool_use(id: &str, command: &str) -> String {
        json!({"type": "assistant", "message": {"content": [
            {"type": "tool_use", "id": id, "name": "Bash", "input": {"command": command}}
        ]}})
        .to_string()
            + "\n"
    }

    fn tool_result(id: &str) -> String {
        json!({"type": "user", "message": {"content": [
            {"type": "tool_result", "tool_use_id": id, "content": "ok"}
        ]}})
        .to_string()
            + "\n"
    }

    fn payload(path: &std::path::Path, command: &str) -> Value {
        json!({"transcript_path": path, "tool_name": "Bash", "tool_input": {"command": command}})
    }

    fn look(w: &mut Watch) -> bool {
        w.read_new_lines(u64::MAX)
    }

    fn append(path: &std::path::Path, text: &str) {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn a_result_for_the_open_call_is_noticed_and_an_earlier_identical_call_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t.jsonl");
        // The same command ran once before and is done; now it is asked again.
        append(
            &t,
            &(tool_use("a", "ls") + &tool_result("a") + &tool_use("b", "ls")),
        );
        let mut w = Watch::new(&payload(&t, "ls")).unwrap();
        w.read_history();
        assert!(!look(&mut w), "nothing new yet");
        append(&t, &tool_use("c", "pwd"));
        append(&t, &tool_result("c"));
        assert!(!look(&mut w), "another call's result is not ours");
        append(&t, &tool_result("b"));
        assert!(look(&mut w), "our call's result");
    }

    #[test]
    fn the_call_may_be_written_after_the_hook_started_and_lines_may_arrive_in_pieces() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t.jsonl");
        append(&t, "");
        let mut w = Watch::new(&payload(&t, "ls")).unwrap();
        w.read_history();
        append(&t, &tool_use("b", "ls"));
        assert!(!look(&mut w));
        let result = tool_result("b");
        let (head, tail) = result.split_at(20);
        append(&t, head);
        assert!(!look(&mut w), "half a line is not a result");
        append(&t, tail);
        assert!(look(&mut w));
    }

    #[test]
    fn no_transcript_or_other_input_means_no_watch_or_no_firing() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t.jsonl");
        assert!(Watch::new(&payload(&t, "ls")).is_none(), "missing file");
        assert!(Watch::new(&payload(dir.path(), "ls")).is_none(), "a folder");
        assert!(
            Watch::new(&payload(std::path::Path::new("/dev/null"), "ls")).is_none(),
            "a device"
        );
        assert!(Watch::new(&json!({"tool_name": "Bash"})).is_none());
        append(&t, &tool_use("b", "ls -la"));
        let mut w = Watch::new(&payload(&t, "ls")).unwrap();
        w.read_history();
        append(&t, "not json\n");
        append(&t, &tool_result("b"));
        assert!(!look(&mut w), "a different input is a different call");
    }

    #[test]
    fn a_rewritten_transcript_stops_the_watch_from_firing() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t.jsonl");
        append(&t, &tool_use("b", "ls"));
        let mut w = Watch::new(&payload(&t, "ls")).unwrap();
        w.read_history();
        std::fs::write(&t, "").unwrap();
        assert!(!look(&mut w));
        append(&t, &tool_result("b"));
        assert!(!look(&mut w));
    }

    #[test]
    fn a_result_written_before_the_first_look_still_counts() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t.jsonl");
        append(&t, &tool_use("b", "ls"));
        let mut w = Watch::new(&payload(&t, "ls")).unwrap();
        // Answered in the terminal before the watch first read the file.
        append(&t, &tool_result("b"));
        w.read_history();
        assert!(look(&mut w));
    }

    #[test]
    fn a_long_transcript_is_read_from_its_tail_only() {
        let dir = tempfile::tempdir().unwrap();
        let t = dir.path().join("t.jsonl");
        let filler = format!(
            "{}\n",
            json!({"type": "user", "message": {"content": "x".repeat(1000)}})
        );
        append(
            &t,
            &filler.repeat((TAIL_BYTES as usize / filler.len()) + 10),
        );
        append(&t, &tool_use("b", "ls"));
        let mut w = Watch::new(&payload(&t, "ls")).unwrap();
        assert!(w.offset > 0, "starts inside the file");
        w.read_history();
        append(&t, &tool_result("b"));
        assert!(look(&mut w));
    }
}
