//! Host payload → the question(s) to ask (SPEC §6 items 1, 2 and 7).
//!
//! Pure functions: the same payload always yields the same key, prompt and digest, so a
//! repeated identical request reuses its question and two different parallel requests in
//! one session never supersede each other.

pub use crate::model::fields::{project_of, truncate};
use serde_json::{json, Map, Value};

use crate::model::digest::hex_sha256;
use crate::model::interaction::{BODY_MAX, CHOICES_MAX, PROMPT_MAX, TEXT_MAX_LIMIT};

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
/// Longest choice detail the broker takes.
const DETAIL_MAX: usize = 500;
/// How much of an agent's own description of a call the one-line prompt keeps: it is the
/// agent's claim, not what runs (that is the body, never cut).
const DESCRIPTION_MAX: usize = 300;

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

/// A call that cannot be shown whole (SPEC §13.1): no question, and an `input_required`
/// notification telling the person to answer at the terminal.
fn too_large(host: Host, project: Option<&str>) -> Plan {
    Plan::TooLarge {
        notification: too_large_notification(host, project),
    }
}

fn too_large_notification(host: Host, project: Option<&str>) -> Value {
    let title = match &project {
        Some(p) => format!("{} needs you at the terminal in {p}", host.display_name()),
        None => format!("{} needs you at the terminal", host.display_name()),
    };
    json!({
        "title": truncate(&title, 200),
        "message": format!(
            "{} needs you at the terminal: the request is too large to show remotely",
            host.display_name()
        ),
        "type": "input_required",
        "priority": "high",
        "agent": host.as_str(),
        "project": project,
    })
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
    /// For AskUserQuestion: a multiSelect question (its answer joins several labels).
    pub multi: bool,
}

/// What a tool call looks like to the person: a one-line summary and, whole, what runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Shown {
    pub prompt: String,
    pub body: Option<String>,
}

/// What the hook will ask for one payload.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// One permission question. `suggestions` (Claude only) back the "Always allow" choice.
    Permission {
        question: Question,
        suggestions: Option<Value>,
    },
    /// Claude AskUserQuestion: one question per entry (single or multi choice, with
    /// "Other"), all must be answered.
    Questions {
        questions: Vec<Question>,
        tool_input: Value,
    },
    /// What runs does not fit a question (SPEC §13.1): no question; this notification
    /// sends the person to the terminal.
    TooLarge { notification: Value },
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
    let shown = describe(
        host,
        tool,
        input,
        obj.get("mcp_server"),
        ctx.project.as_deref(),
    );
    let suggestions = match (host, obj.get("permission_suggestions")) {
        (Host::Claude, Some(Value::Array(s))) if !s.is_empty() => Some(Value::Array(s.clone())),
        _ => None,
    };
    let mut body = shown.body;
    let mut choices = vec![json!({"id": "allow-once", "label": "Allow once"})];
    if let Some(s) = &suggestions {
        // The rules in full: as the detail when they fit, else at the end of the body.
        let rules = describe_suggestions(s);
        let detail = if rules.chars().count() <= DETAIL_MAX {
            rules
        } else {
            let text = body.get_or_insert_with(String::new);
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            text.push_str(&format!("If you choose Always allow:\n{rules}"));
            "Also applies the rules listed at the end of the request".to_string()
        };
        choices.push(json!({
            "id": "allow-always",
            "label": "Always allow",
            "detail": detail,
        }));
    }
    choices.push(json!({"id": "deny", "label": "Deny"}));
    if !fits(&shown.prompt, body.as_deref()) {
        return Ok(too_large(host, ctx.project.as_deref()));
    }
    let fingerprint = json!([tool, canonical(input)]);
    let mut question = ctx.question(
        "permission",
        &shown.prompt,
        choices,
        &fingerprint,
        "needs permission",
    );
    question.request["body"] = json!(body);
    Ok(Plan::Permission {
        question,
        suggestions,
    })
}

/// Whether a question can show all of this: nothing is ever cut (SPEC §13.1).
fn fits(prompt: &str, body: Option<&str>) -> bool {
    let n = prompt.trim().chars().count();
    (1..=PROMPT_MAX).contains(&n) && body.is_none_or(|b| b.chars().count() <= BODY_MAX)
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
        let prompt = prompt.trim();
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
            multi: false,
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
        let Some(mut q) = one_question(ctx, input, index, item)? else {
            return Ok(too_large(ctx.host, ctx.project.as_deref()));
        };
        q.question_text = Some(item["question"].as_str().unwrap_or("").to_string());
        questions.push(q);
    }
    Ok(Plan::Questions {
        questions,
        tool_input: input.clone(),
    })
}

/// One AskUserQuestion entry as a question: a choice kind with "Other" (Claude's dialog
/// always offers it), or a text question. `None` when it cannot be shown whole.
fn one_question(
    ctx: &Context<'_>,
    input: &Value,
    index: usize,
    item: &Value,
) -> Result<Option<Question>, PayloadError> {
    let text = item["question"]
        .as_str()
        .filter(|t| !t.trim().is_empty())
        .ok_or(PayloadError::UnsupportedQuestion("a question has no text"))?;
    let prompt = match item["header"].as_str().filter(|h| !h.trim().is_empty()) {
        Some(h) => format!("{}: {}", h.trim(), text.trim()),
        None => text.trim().to_string(),
    };
    let fingerprint = json!(["AskUserQuestion", index, canonical(input)]);
    let mut body = Vec::new();
    if let Some(d) = item["description"]
        .as_str()
        .filter(|d| !d.trim().is_empty())
    {
        body.push(d.to_string());
    }
    let kind = item["kind"].as_str().unwrap_or("choice");
    if kind == "text" {
        let body = (!body.is_empty()).then(|| body.join("\n\n"));
        if !fits(&prompt, body.as_deref()) {
            return Ok(None);
        }
        let mut q = ctx.question("text", &prompt, Vec::new(), &fingerprint, "has a question");
        q.request["body"] = json!(body);
        q.request["text_max_length"] = json!(TEXT_MAX_LIMIT);
        return Ok(Some(q));
    }
    if kind != "choice" {
        return Err(PayloadError::UnsupportedQuestion(
            "a question of an unknown kind",
        ));
    }
    let options = item["options"]
        .as_array()
        .filter(|o| (2..=CHOICES_MAX).contains(&o.len()))
        .ok_or(PayloadError::UnsupportedQuestion(
            "options must number 2 to 12",
        ))?;
    let multi = item["multiSelect"].as_bool() == Some(true);
    let mut choices = Vec::new();
    let mut labels = Vec::new();
    let mut long_details = false;
    for (n, option) in options.iter().enumerate() {
        let label = option["label"]
            .as_str()
            .filter(|l| !l.trim().is_empty())
            .ok_or(PayloadError::UnsupportedQuestion("an option has no label"))?;
        if label.trim().chars().count() > 200 {
            return Ok(None);
        }
        let id = format!("option-{}", n + 1);
        let mut choice = json!({"id": id, "label": label.trim()});
        let description = option["description"].as_str().map(str::trim).unwrap_or("");
        if description.chars().count() > DETAIL_MAX {
            long_details = true;
        } else if !description.is_empty() {
            choice["detail"] = json!(description);
        }
        choices.push(choice);
        labels.push((id, label.to_string()));
    }
    // What a detail cannot hold, and the previews Claude's dialog shows, go in the body.
    for (n, option) in options.iter().enumerate() {
        let mut part = Vec::new();
        if long_details {
            part.push(
                option["description"]
                    .as_str()
                    .unwrap_or("")
                    .trim()
                    .to_string(),
            );
        }
        if let Some(p) = option["preview"].as_str().filter(|p| !p.trim().is_empty()) {
            part.push(p.to_string());
        }
        let part: Vec<String> = part.into_iter().filter(|p| !p.is_empty()).collect();
        if !part.is_empty() {
            body.push(format!(
                "{}. {}\n{}",
                n + 1,
                labels[n].1.trim(),
                part.join("\n")
            ));
        }
    }
    let body = (!body.is_empty()).then(|| body.join("\n\n"));
    if !fits(&prompt, body.as_deref()) {
        return Ok(None);
    }
    let kind = if multi {
        "multi_choice"
    } else {
        "single_choice"
    };
    let mut q = ctx.question(kind, &prompt, choices, &fingerprint, "has a question");
    q.request["body"] = json!(body);
    q.request["allow_other"] = json!(true);
    q.request["other_max_length"] = json!(TEXT_MAX_LIMIT);
    if multi {
        // Claude's dialog takes any number of options, and "Other" beside them.
        q.request["min_selections"] = json!(1);
        q.request["max_selections"] = json!(options.len() + 1);
    }
    q.option_labels = labels;
    q.multi = multi;
    Ok(Some(q))
}

/// What a tool call looks like to the person (SPEC §13.1): a one-line prompt and a body
/// holding, whole and exact, what runs.
pub fn describe(
    host: Host,
    tool: &str,
    input: &Value,
    mcp_server: Option<&Value>,
    project: Option<&str>,
) -> Shown {
    let s = |k: &str| one_line(input[k].as_str().unwrap_or(""));
    let exact = |k: &str| input[k].as_str().unwrap_or("").to_string();
    let within = project
        .map(|p| format!(" in {}", one_line(p)))
        .unwrap_or_default();
    let shown = |prompt: String, body: String| Shown {
        prompt,
        body: (!body.is_empty()).then_some(body),
    };
    match tool {
        "Bash" => {
            let description = s("description");
            if host == Host::Codex {
                if let Some(domain) = description.strip_prefix("network-access ") {
                    let prompt = format!("Allow network access to {}?", domain.trim());
                    return shown(prompt, exact("command"));
                }
            }
            let mut prompt = format!("Run a command{within}?");
            if !description.is_empty() {
                prompt.push_str(&format!(" — {}", truncate(&description, DESCRIPTION_MAX)));
            }
            shown(prompt, exact("command"))
        }
        "apply_patch" => {
            let patch = exact("command");
            let files = patch
                .lines()
                .filter(|l| {
                    ["*** Add File: ", "*** Update File: ", "*** Delete File: "]
                        .iter()
                        .any(|p| l.starts_with(p))
                })
                .count();
            let prompt = match files {
                1 => format!("Apply a patch to 1 file{within}?"),
                n => format!("Apply a patch to {n} files{within}?"),
            };
            shown(prompt, patch)
        }
        "Edit" => {
            let all = input["replace_all"].as_bool() == Some(true);
            let prompt = match all {
                true => format!("Edit {} (every occurrence)?", s("file_path")),
                false => format!("Edit {}?", s("file_path")),
            };
            shown(prompt, edit_diff(&exact("file_path"), input))
        }
        "MultiEdit" => {
            let edits = input["edits"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            let file = exact("file_path");
            let body: Vec<String> = edits
                .iter()
                .enumerate()
                .map(|(n, e)| format!("Edit {} of {}\n{}", n + 1, edits.len(), edit_diff(&file, e)))
                .collect();
            let prompt = format!("Make {} edits to {}?", edits.len(), s("file_path"));
            shown(prompt, body.join("\n"))
        }
        "Write" => {
            let content = exact("content");
            let prompt = format!(
                "Write {} ({} lines)?",
                s("file_path"),
                content.lines().count()
            );
            shown(prompt, content)
        }
        "ExitPlanMode" => shown("Approve this plan?".into(), exact("plan")),
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
            let prompt = format!(
                "Call MCP tool {} on server {}?",
                one_line(&name),
                one_line(&server)
            );
            shown(prompt, pretty_json(input))
        }
        _ => shown(format!("Allow {}?", one_line(tool)), pretty_json(input)),
    }
}

/// An Edit's change as a unified diff of `old_string` → `new_string`, every line of both
/// shown, with `replace_all` stated.
fn edit_diff(file: &str, edit: &Value) -> String {
    let old = edit["old_string"].as_str().unwrap_or("");
    let new = edit["new_string"].as_str().unwrap_or("");
    let diff = similar::TextDiff::from_lines(old, new);
    let mut out = match edit["replace_all"].as_bool() {
        Some(true) => "replace_all: true (every occurrence in the file is replaced)\n",
        _ => "replace_all: false (one occurrence is replaced)\n",
    }
    .to_string();
    // Edit strings rarely end in a newline; say so only when the two ends differ.
    let hint = old.ends_with('\n') != new.ends_with('\n');
    out.push_str(
        &diff
            .unified_diff()
            .context_radius(usize::MAX / 4)
            .missing_newline_hint(hint)
            .header(file, file)
            .to_string(),
    );
    out
}

fn pretty_json(input: &Value) -> String {
    serde_json::to_string_pretty(input).unwrap_or_default()
}

/// White space (newlines included) folded into single spaces: prompts are one line.
fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Claude's "Always allow" suggestions in full: every rule with its behavior, every mode
/// and directory, and where each is saved. An entry of a type we do not know is shown as
/// its JSON, so nothing it would do is left out.
fn describe_suggestions(suggestions: &Value) -> String {
    let list = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .map(|x| match x.as_str() {
                Some(s) => s.to_string(),
                None => x.to_string(),
            })
            .collect()
    };
    let rules = |v: &Value| -> String {
        let rules: Vec<String> = v
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
        rules.join(", ")
    };
    let lines: Vec<String> = suggestions
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| {
            let dest = s["destination"].as_str().unwrap_or("settings");
            let behavior = s["behavior"].as_str().unwrap_or("allow");
            let what = match s["type"].as_str().unwrap_or("") {
                "addRules" => format!("add {behavior} rules: {}", rules(&s["rules"])),
                "replaceRules" => {
                    format!("replace the {behavior} rules with: {}", rules(&s["rules"]))
                }
                "removeRules" => format!("remove {behavior} rules: {}", rules(&s["rules"])),
                "setMode" => format!("switch to {} mode", s["mode"].as_str().unwrap_or("?")),
                "addDirectories" => {
                    format!("allow access to {}", list(&s["directories"]).join(", "))
                }
                "removeDirectories" => {
                    format!("remove access to {}", list(&s["directories"]).join(", "))
                }
                _ => return format!("- {}", canonical(s)),
            };
            format!("- {what} (saved to {dest})")
        })
        .collect();
    format!("Also:\n{}", lines.join("\n"))
}

fn str_field<'a>(obj: &'a Map<String, Value>, name: &str) -> Option<&'a str> {
    obj.get(name)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
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
