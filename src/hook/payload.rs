//! Host payload → the question(s) to ask (SPEC §6 items 1, 2 and 7).
//!
//! Pure functions: the same payload always yields the same key, prompt and digest, so a
//! repeated identical request reuses its question and two different parallel requests in
//! one session never supersede each other.

use serde_json::{json, Map, Value};

use crate::model::digest::hex_sha256;

/// Which host runs us. Decides the decision format and the extras offered, and (setup)
/// which files our hook goes into.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Host {
    /// Claude Code (`settings.json`)
    Claude,
    /// OpenAI Codex CLI (`hooks.json`)
    Codex,
}

impl Host {
    pub const ALL: [Host; 2] = [Host::Claude, Host::Codex];

    pub fn parse(s: &str) -> Option<Host> {
        match s {
            "claude" => Some(Host::Claude),
            "codex" => Some(Host::Codex),
            _ => None,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Host::Claude => "claude",
            Host::Codex => "codex",
        }
    }
    /// The name people know the host by, for messages.
    pub fn display_name(self) -> &'static str {
        match self {
            Host::Claude => "Claude Code",
            Host::Codex => "Codex",
        }
    }
}

/// Largest host payload read from stdin.
pub const MAX_PAYLOAD: usize = 1024 * 1024;
const PROMPT_MAX: usize = 2000;

/// Why a payload cannot become a question (the hook then stays silent).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("stdin is not a JSON object")]
    NotAnObject,
    #[error("payload has no tool_name")]
    NoToolName,
    #[error("AskUserQuestion payload cannot be asked remotely: {0}")]
    UnsupportedQuestion(&'static str),
}

/// One question to open, with what is needed to turn its answer into a decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// The `POST /v1/interactions/request` body.
    pub request: Value,
    /// The `POST /v1/notifications` body (its `interaction_id` is filled in later).
    pub notification: Value,
    /// For AskUserQuestion: the question text and the label of each choice id.
    pub option_labels: Vec<(String, String)>,
    pub question_text: Option<String>,
}

/// What the hook will ask for one payload.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// One permission question. `suggestions` (Claude only) back the "Always allow" choice.
    Permission {
        question: Question,
        suggestions: Option<Value>,
    },
    /// Claude AskUserQuestion: one single-choice question per entry, all must be answered.
    Questions {
        questions: Vec<Question>,
        tool_input: Value,
    },
}

/// Reads a host payload into a plan. `ttl` covers the hook's wait budget.
pub fn plan(host: Host, payload: &Value, ttl_seconds: u64) -> Result<Plan, PayloadError> {
    let obj = payload.as_object().ok_or(PayloadError::NotAnObject)?;
    let tool = str_field(obj, "tool_name").ok_or(PayloadError::NoToolName)?;
    let empty = Value::Object(Map::new());
    let input = obj.get("tool_input").unwrap_or(&empty);
    let ctx = Context {
        host,
        session_id: str_field(obj, "session_id"),
        turn_id: str_field(obj, "turn_id"),
        project: str_field(obj, "cwd").and_then(project_of),
        ttl_seconds,
    };
    if host == Host::Claude && tool == "AskUserQuestion" {
        return ask_user_question(&ctx, input);
    }
    let prompt = permission_prompt(host, tool, input, obj.get("mcp_server"));
    let suggestions = match (host, obj.get("permission_suggestions")) {
        (Host::Claude, Some(Value::Array(s))) if !s.is_empty() => Some(Value::Array(s.clone())),
        _ => None,
    };
    let mut choices = vec![json!({"id": "allow-once", "label": "Allow once"})];
    if let Some(s) = &suggestions {
        choices.push(json!({
            "id": "allow-always",
            "label": "Always allow",
            "detail": truncate(&describe_suggestions(s), 500),
        }));
    }
    choices.push(json!({"id": "deny", "label": "Deny"}));
    let fingerprint = json!([tool, canonical(input)]);
    let question = ctx.question(
        "permission",
        &prompt,
        choices,
        &fingerprint,
        "needs permission",
    );
    Ok(Plan::Permission {
        question,
        suggestions,
    })
}

struct Context<'a> {
    host: Host,
    session_id: Option<&'a str>,
    turn_id: Option<&'a str>,
    project: Option<String>,
    ttl_seconds: u64,
}

impl Context<'_> {
    fn question(
        &self,
        kind: &str,
        prompt: &str,
        choices: Vec<Value>,
        fingerprint: &Value,
        what: &str,
    ) -> Question {
        let key = self.key(fingerprint);
        let prompt = truncate(prompt.trim(), PROMPT_MAX);
        let first_line = prompt.lines().next().unwrap_or("").to_string();
        let title = match &self.project {
            Some(p) => format!("{} {what} in {p}", self.host.display_name()),
            None => format!("{} {what}", self.host.display_name()),
        };
        let notification_type = if kind == "permission" {
            "permission_required"
        } else {
            "input_required"
        };
        Question {
            request: json!({
                "key": key,
                "agent": self.host.as_str(),
                "project": self.project,
                "session_id": self.session_id,
                "turn_id": self.turn_id,
                "kind": kind,
                "prompt": prompt,
                "choices": choices,
                "ttl_seconds": self.ttl_seconds,
                "owner_lease": true,
            }),
            notification: json!({
                "title": truncate(&title, 200),
                "message": truncate(&first_line, 4000),
                "type": notification_type,
                "priority": "high",
                "agent": self.host.as_str(),
                "project": self.project,
                "key": format!("{key}-notify"),
            }),
            option_labels: Vec::new(),
            question_text: None,
        }
    }

    /// The key binds the host, the project, the full session id and the tool call's
    /// content; hashed because it must stay within 100 characters.
    fn key(&self, fingerprint: &Value) -> String {
        let material = json!([self.project, self.session_id, fingerprint]).to_string();
        format!(
            "{}-{}",
            self.host.as_str(),
            &hex_sha256(material.as_bytes())[..48]
        )
    }
}

fn ask_user_question(ctx: &Context<'_>, input: &Value) -> Result<Plan, PayloadError> {
    let items = input["questions"]
        .as_array()
        .filter(|q| !q.is_empty())
        .ok_or(PayloadError::UnsupportedQuestion("no questions"))?;
    let mut questions = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        if item["multiSelect"].as_bool() == Some(true) {
            return Err(PayloadError::UnsupportedQuestion("multiSelect"));
        }
        let text = item["question"]
            .as_str()
            .filter(|t| !t.trim().is_empty())
            .ok_or(PayloadError::UnsupportedQuestion("a question has no text"))?;
        let options = item["options"]
            .as_array()
            .filter(|o| (2..=12).contains(&o.len()))
            .ok_or(PayloadError::UnsupportedQuestion(
                "options must number 2 to 12",
            ))?;
        let mut choices = Vec::new();
        let mut labels = Vec::new();
        for (n, option) in options.iter().enumerate() {
            let label = option["label"]
                .as_str()
                .filter(|l| !l.trim().is_empty())
                .ok_or(PayloadError::UnsupportedQuestion("an option has no label"))?;
            if label.chars().count() > 200 {
                return Err(PayloadError::UnsupportedQuestion(
                    "an option label is too long",
                ));
            }
            let id = format!("option-{}", n + 1);
            let mut choice = json!({"id": id, "label": label.trim()});
            if let Some(d) = option["description"]
                .as_str()
                .filter(|d| !d.trim().is_empty())
            {
                choice["detail"] = json!(truncate(d.trim(), 500));
            }
            choices.push(choice);
            labels.push((id, label.to_string()));
        }
        let prompt = match item["header"].as_str().filter(|h| !h.trim().is_empty()) {
            Some(h) => format!("{}: {}", h.trim(), text.trim()),
            None => text.trim().to_string(),
        };
        let fingerprint = json!(["AskUserQuestion", index, canonical(input)]);
        let mut q = ctx.question(
            "single_choice",
            &prompt,
            choices,
            &fingerprint,
            "has a question",
        );
        q.option_labels = labels;
        q.question_text = Some(text.to_string());
        questions.push(q);
    }
    Ok(Plan::Questions {
        questions,
        tool_input: input.clone(),
    })
}

/// The question shown to the person for a tool call.
pub fn permission_prompt(
    host: Host,
    tool: &str,
    input: &Value,
    mcp_server: Option<&Value>,
) -> String {
    let s = |k: &str| input[k].as_str().unwrap_or("").trim().to_string();
    match tool {
        "Bash" => {
            let command = s("command");
            let description = s("description");
            if host == Host::Codex {
                if let Some(domain) = description.strip_prefix("network-access ") {
                    return format!("Allow network access to {}?\n\n$ {command}", domain.trim());
                }
            }
            let mut p = format!("Run this command?\n\n$ {command}");
            if !description.is_empty() {
                p.push_str(&format!("\n\n{description}"));
            }
            p
        }
        "apply_patch" => format!("Apply this patch?\n\n{}", s("command")),
        "Edit" => {
            let mut p = format!("Edit {}?\n\n", s("file_path"));
            p.push_str(&preview_lines(&s("old_string"), "- "));
            p.push('\n');
            p.push_str(&preview_lines(&s("new_string"), "+ "));
            if input["replace_all"].as_bool() == Some(true) {
                p.push_str("\n\n(replace every occurrence)");
            }
            p
        }
        "MultiEdit" => {
            let n = input["edits"].as_array().map_or(0, Vec::len);
            format!("Make {n} edits to {}?", s("file_path"))
        }
        "Write" => {
            let content = input["content"].as_str().unwrap_or("");
            format!(
                "Write {} ({} lines)?\n\n{}",
                s("file_path"),
                content.lines().count(),
                preview_lines(content, "")
            )
        }
        "ExitPlanMode" => format!("Approve this plan?\n\n{}", s("plan")),
        _ if tool.starts_with("mcp__") => {
            let rest = &tool["mcp__".len()..];
            let (server, name) = match rest.split_once("__") {
                Some((server, name)) => (server.to_string(), name.to_string()),
                None => (rest.to_string(), String::new()),
            };
            let server = mcp_server
                .and_then(|m| m["name"].as_str())
                .map(str::to_string)
                .unwrap_or(server);
            format!(
                "Call MCP tool {name} on server {server}?\n\n{}",
                pretty_args(input)
            )
        }
        _ => format!("Allow {tool}?\n\n{}", pretty_args(input)),
    }
}

/// The first lines of a text, each with a prefix, so a preview stays short.
fn preview_lines(text: &str, prefix: &str) -> String {
    const MAX_LINES: usize = 12;
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = lines
        .iter()
        .take(MAX_LINES)
        .map(|l| format!("{prefix}{l}"))
        .collect();
    if lines.len() > MAX_LINES {
        out.push(format!(
            "{prefix}… ({} more lines)",
            lines.len() - MAX_LINES
        ));
    }
    out.join("\n")
}

fn pretty_args(input: &Value) -> String {
    match input.as_object() {
        Some(map) if !map.is_empty() => map
            .iter()
            .map(|(k, v)| match v {
                Value::String(s) => format!("{k}: {s}"),
                other => format!("{k}: {other}"),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => "(no arguments)".into(),
    }
}

fn describe_suggestions(suggestions: &Value) -> String {
    let parts: Vec<String> = suggestions
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let dest = s["destination"].as_str().unwrap_or("settings");
            match s["type"].as_str().unwrap_or("") {
                "addRules" => {
                    let rules: Vec<String> = s["rules"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(|r| {
                            let tool = r["toolName"].as_str().unwrap_or("?");
                            match r["ruleContent"].as_str() {
                                Some(c) => format!("{tool}({c})"),
                                None => tool.to_string(),
                            }
                        })
                        .collect();
                    format!("allow {} ({dest})", rules.join(", "))
                }
                "setMode" => format!(
                    "switch to {} mode ({dest})",
                    s["mode"].as_str().unwrap_or("?")
                ),
                "addDirectories" => format!(
                    "allow access to {} ({dest})",
                    s["directories"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                other => format!("{other} ({dest})"),
            }
        })
        .collect();
    format!("Also: {}", parts.join("; "))
}

fn str_field<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    obj.get(name)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// The project is the last segment of `cwd`.
fn project_of(cwd: &str) -> Option<String> {
    let last = cwd
        .trim_end_matches(['/', '\\'])
        .rsplit(['/', '\\'])
        .next()?;
    (!last.is_empty()).then(|| truncate(last, 200))
}

/// Cuts to at most `max` characters, marking the cut with `…`.
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max - 1).collect();
    out.push('…');
    out
}

/// Key-sorted compact JSON: hosts re-serialise tool inputs (key order, defaults), so
/// requests are compared by content, never by bytes.
pub fn canonical(v: &Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let mut out = Map::new();
            for k in keys {
                out.insert(k.clone(), canonical(&map[k]));
            }
            Value::Object(out)
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}
