//! The hook command line we write into host configs, and how we recognise it again.
//!
//! Hosts run the command through a shell (`/bin/sh -c` for Claude, `/bin/bash -c` for
//! Codex), so the executable path is quoted for POSIX shells. Recognition is by meaning,
//! not bytes: any handler whose command runs an executable named `agentnotify-hook` with
//! `ask-permission` is ours, wherever that executable lived when it was installed, so a
//! reinstall from a new location replaces the old entry instead of adding a second one.

use std::path::Path;

use super::host::Host;

/// File name of the bridge executable; the basis of recognising our handlers.
pub const HOOK_EXE_NAME: &str = "agentnotify-hook";

/// Default wait budget of the bridge, in seconds (SPEC §6).
pub const DEFAULT_BUDGET_SECS: u64 = 590;

/// How much longer the host's handler timeout is than the bridge's own budget, so the
/// bridge always answers (or falls back) before the host kills it.
pub const HANDLER_MARGIN_SECS: u64 = 10;

/// Default handler timeout hosts apply when a handler does not name one.
pub const HOST_DEFAULT_TIMEOUT_SECS: u64 = 600;

/// What one installed handler runs: the bridge for a host, with its wait budget.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HookCommand {
    pub host: Host,
    pub exe: String,
    pub budget_secs: u64,
}

impl HookCommand {
    /// The shell command line written into the host config.
    pub fn command_line(&self) -> String {
        self.command_line_for("ask-permission")
    }

    /// The command line running the bridge with another action (`pre-tool-use`).
    pub fn command_line_for(&self, action: &str) -> String {
        format!(
            "{} {} {action} --timeout {}",
            shell_quote(&self.exe),
            self.host.name(),
            self.budget_secs
        )
    }

    /// The handler timeout written next to the command; always above the budget.
    pub fn handler_timeout_secs(&self) -> u64 {
        self.budget_secs + HANDLER_MARGIN_SECS
    }
}

/// Quotes `word` for POSIX shells, leaving ordinary paths readable.
pub fn shell_quote(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:@%+=,".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// Splits a command line into words the way a POSIX shell would for the simple cases we
/// care about (quotes and backslashes; no expansion). `None` when quotes are unbalanced.
pub fn shell_split(line: &str) -> Option<Vec<String>> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '\'' => break,
                        other => word.push(other),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next()? {
                        '"' => break,
                        '\\' => {
                            let next = chars.next()?;
                            if !matches!(next, '"' | '\\' | '$' | '`' | '\n') {
                                word.push('\\');
                            }
                            word.push(next);
                        }
                        other => word.push(other),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(next) = chars.next() {
                    word.push(next);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            other => {
                in_word = true;
                word.push(other);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Some(words)
}

/// A handler command that runs our bridge, as found in a config file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedHookCommand {
    /// The executable as written (after unquoting).
    pub exe: String,
    /// `claude` / `codex` as written before `ask-permission`, if any.
    pub host: Option<String>,
    /// `--timeout` given to the bridge, if any.
    pub budget_secs: Option<u64>,
}

/// Parses `line` if it runs `agentnotify-hook … ask-permission`; `None` for anything else.
pub fn parse_hook_command(line: &str) -> Option<ParsedHookCommand> {
    parse_hook_command_for(line, "ask-permission")
}

/// Parses `line` if it runs `agentnotify-hook … <action>`.
pub fn parse_hook_command_for(line: &str, action: &str) -> Option<ParsedHookCommand> {
    let words = shell_split(line)?;
    // Skip leading `NAME=value` environment assignments.
    let mut rest = words
        .iter()
        .skip_while(|w| is_env_assignment(w))
        .map(String::as_str);
    let exe = rest.next()?;
    let name = Path::new(exe).file_name()?.to_str()?;
    if name != HOOK_EXE_NAME && name != format!("{HOOK_EXE_NAME}.exe") {
        return None;
    }
    let args: Vec<&str> = rest.collect();
    let ask = args.iter().position(|a| *a == action)?;
    let host = ask
        .checked_sub(1)
        .and_then(|i| args.get(i))
        .map(|h| h.to_string());
    let mut budget_secs = None;
    let mut iter = args.iter().skip(ask + 1);
    while let Some(arg) = iter.next() {
        if let Some(value) = arg.strip_prefix("--timeout=") {
            budget_secs = value.parse().ok();
        } else if *arg == "--timeout" {
            budget_secs = iter.next().and_then(|v| v.parse().ok());
        }
    }
    Some(ParsedHookCommand {
        exe: exe.to_string(),
        host,
        budget_secs,
    })
}

fn is_env_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cmd(exe: &str) -> HookCommand {
        HookCommand {
            host: Host::Claude,
            exe: exe.to_string(),
            budget_secs: 590,
        }
    }

    #[test]
    fn plain_paths_are_written_as_is() {
        assert_eq!(
            cmd("/usr/local/bin/agentnotify-hook").command_line(),
            "/usr/local/bin/agentnotify-hook claude ask-permission --timeout 590"
        );
        assert_eq!(cmd("/x").handler_timeout_secs(), 600);
    }

    #[test]
    fn paths_with_spaces_and_quotes_are_quoted_and_round_trip() {
        for exe in [
            "/Users/Jane Doe/bin/agentnotify-hook",
            "/opt/it's here/agentnotify-hook",
            "/tmp/$HOME/`x`/agentnotify-hook",
            "/tmp/ünï/agentnotify-hook",
        ] {
            let line = cmd(exe).command_line();
            let parsed = parse_hook_command(&line).expect("recognised");
            assert_eq!(parsed.exe, exe, "{line}");
            assert_eq!(parsed.host.as_deref(), Some("claude"));
            assert_eq!(parsed.budget_secs, Some(590));
        }
    }

    #[test]
    fn recognises_only_the_bridge() {
        assert!(parse_hook_command("/old/place/agentnotify-hook codex ask-permission").is_some());
        assert!(parse_hook_command("FOO=1 agentnotify-hook claude ask-permission").is_some());
        assert!(parse_hook_command("\"/a b/agentnotify-hook\" claude ask-permission").is_some());
        assert!(parse_hook_command("/bin/agentnotify-hook doctor").is_none());
        assert!(parse_hook_command("/bin/other-hook claude ask-permission").is_none());
        assert!(parse_hook_command("echo agentnotify-hook ask-permission").is_none());
        assert!(parse_hook_command("'unbalanced").is_none());
        assert!(parse_hook_command("").is_none());
    }

    #[test]
    fn reads_the_budget_in_both_spellings() {
        let p = parse_hook_command("/b/agentnotify-hook codex ask-permission --timeout=30");
        assert_eq!(p.unwrap().budget_secs, Some(30));
        let p = parse_hook_command("/b/agentnotify-hook codex ask-permission");
        assert_eq!(p.unwrap().budget_secs, None);
    }

    #[test]
    fn split_handles_backslashes_and_double_quotes() {
        assert_eq!(
            shell_split(r#"a\ b "c \"d\" \x" ''"#).unwrap(),
            vec!["a b", r#"c "d" \x"#, ""]
        );
    }
}
