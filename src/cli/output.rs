//! Human and JSON output of the CLI.

use serde_json::Value;

use crate::model::render::{json_for_terminal, render_visible};
use crate::model::Timestamp;

/// Pretty JSON with every invisible or reordering code point as a `\uXXXX` escape
/// (SPEC §13.2): the same JSON, and nothing a terminal would act on.
pub fn print_json(v: &impl serde::Serialize) {
    let json = serde_json::to_string_pretty(v).unwrap_or_default();
    println!("{}", json_for_terminal(&json));
}

fn terminal_width() -> usize {
    std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.parse().ok())
        .filter(|&w: &usize| w >= 60)
        .unwrap_or(120)
}

/// "3s", "5m", "2h", "4d": how long ago an RFC 3339 time was.
pub fn age(rfc3339: &str) -> String {
    let Some(t) = Timestamp::parse_rfc3339(rfc3339) else {
        return "?".into();
    };
    let secs = t.until(Timestamp::now()).as_secs();
    match secs {
        0..=59 => format!("{secs}s"),
        60..=3599 => format!("{}m", secs / 60),
        3600..=86_399 => format!("{}h", secs / 3600),
        _ => format!("{}d", secs / 86_400),
    }
}

/// Rendered under SPEC §13.2 first, so no control character is folded into a space unseen.
fn one_line(s: &str) -> String {
    render_visible(s)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn cut(s: &str, width: usize) -> String {
    if s.chars().count() <= width {
        return format!("{s:width$}");
    }
    let mut out: String = s.chars().take(width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// One aligned line per interaction: id, kind/status, prompt, agent/project, age.
pub fn print_interaction_lines(list: &Value) {
    let items = list.as_array().map(Vec::as_slice).unwrap_or(&[]);
    if items.is_empty() {
        println!("no interactions");
        return;
    }
    let rows: Vec<(String, String, String, String, String)> = items
        .iter()
        .map(|i| {
            let s = |k: &str| i[k].as_str().unwrap_or("").to_string();
            let who = match i["project"].as_str() {
                Some(p) => format!("{}/{p}", s("agent")),
                None => s("agent"),
            };
            (
                s("id"),
                format!("{}/{}", s("kind"), s("status")),
                one_line(&s("prompt")),
                who,
                age(&s("created_at")),
            )
        })
        .collect();
    let w_kind = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
    let w_who = rows
        .iter()
        .map(|r| r.3.chars().count())
        .max()
        .unwrap_or(0)
        .min(30);
    let fixed = 32 + 2 + w_kind + 2 + 2 + w_who + 2 + 4;
    let w_prompt = terminal_width().saturating_sub(fixed).max(20);
    for (id, kind, prompt, who, age) in rows {
        println!(
            "{id}  {kind:w_kind$}  {}  {}  {age:>4}",
            cut(&prompt, w_prompt),
            cut(&who, w_who)
        );
    }
}

pub fn print_notification_lines(list: &Value) {
    let items = list.as_array().map(Vec::as_slice).unwrap_or(&[]);
    if items.is_empty() {
        println!("no notifications");
        return;
    }
    for n in items {
        let s = |k: &str| n[k].as_str().unwrap_or("").to_string();
        println!(
            "{}  {:9}  {:20}  {}  {:>4}",
            s("id"),
            s("status"),
            cut(&s("type"), 20),
            cut(&one_line(&s("title")), 60),
            age(&s("created_at"))
        );
    }
}
