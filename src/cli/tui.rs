//! The screens of `agentnotify answer`: a picker over the pending questions and the question
//! itself, whole (prompt and body wrapped and scrollable, never cut), with its choices.
//!
//! ratatui draws, crossterm reads keys on a thread of its own (its reads block), and the
//! async loop waits for a key, a clock tick, or the question ending elsewhere. Every string
//! from a record is rendered (`answer::shown`) before it is drawn; ratatui itself would
//! silently drop control characters, which is exactly what must not happen unseen.

use std::future::Future;
use std::time::Duration;

use crate::model::Interaction;
use ratatui::crossterm::event::{
    self, DisableBracketedPaste, EnableBracketedPaste, Event, KeyCode, KeyEvent, KeyEventKind,
    KeyModifiers,
};
use ratatui::crossterm::execute;
use ratatui::layout::{Constraint, Layout};
use ratatui::style::{Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Padding, Paragraph};
use ratatui::{DefaultTerminal, Frame};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use unicode_width::UnicodeWidthChar;

use super::answer::{heading, lines_label, shown, Answer, Question};
use super::output::age;
use super::CliError;
use crate::client::Client;
use crate::model::render::{display_segments, Segment};
use crate::model::Timestamp;

/// How the question screen ended.
pub enum Asked {
    Answer(Answer),
    /// The question left `pending` elsewhere while shown; its record.
    Ended(Box<Interaction>),
    Back,
    Quit,
}

/// The terminal in raw mode on the alternate screen; restored on drop, also on a panic.
pub struct Tui {
    terminal: DefaultTerminal,
    keys: UnboundedReceiver<Event>,
}

impl Tui {
    pub fn start() -> std::io::Result<Tui> {
        let terminal = ratatui::try_init()?;
        let _ = execute!(std::io::stdout(), EnableBracketedPaste);
        let (tx, keys) = unbounded_channel();
        std::thread::spawn(move || {
            while let Ok(e) = event::read() {
                if tx.send(e).is_err() {
                    break;
                }
            }
        });
        Ok(Tui { terminal, keys })
    }

    fn draw(&mut self, f: impl FnOnce(&mut Frame)) -> Result<(), CliError> {
        self.terminal
            .draw(f)
            .map(|_| ())
            .map_err(|e| CliError::Other(format!("cannot draw on the terminal: {e}")))
    }

    async fn next(&mut self, tick: &mut tokio::time::Interval) -> Option<Event> {
        tokio::select! {
            e = self.keys.recv() => e,
            _ = tick.tick() => None,
        }
    }

    /// The picker: pending questions newest first, refreshed every 2 s. `None`: quit.
    pub async fn pick(&mut self, client: &Client) -> Result<Option<String>, CliError> {
        let query = [("pending", "true".to_string())];
        let mut items = Vec::new();
        let mut cursor = 0usize;
        let mut tick = tokio::time::interval(Duration::from_secs(2));
        loop {
            match self.next(&mut tick).await {
                None => {
                    let selected = items.get(cursor).map(|q: &Interaction| q.id.clone());
                    items = client.list_interactions(&query).await?;
                    cursor = items
                        .iter()
                        .position(|q| Some(&q.id) == selected.as_ref())
                        .unwrap_or(cursor.min(items.len().saturating_sub(1)));
                }
                Some(Event::Key(k)) if k.kind != KeyEventKind::Release => {
                    let id_at = |i: usize| items.get(i).map(|q| q.id.as_str());
                    match k.code {
                        KeyCode::Char('c') if k.modifiers.contains(KeyModifiers::CONTROL) => {
                            return Ok(None)
                        }
                        KeyCode::Esc | KeyCode::Char('q') => return Ok(None),
                        KeyCode::Up => cursor = cursor.saturating_sub(1),
                        KeyCode::Down if cursor + 1 < items.len() => cursor += 1,
                        KeyCode::Enter => {
                            if let Some(id) = id_at(cursor) {
                                return Ok(Some(id.to_string()));
                            }
                        }
                        KeyCode::Char(d @ '1'..='9') => {
                            let i = d as usize - '1' as usize;
                            if let Some(id) = id_at(i) {
                                return Ok(Some(id.to_string()));
                            }
                        }
                        _ => {}
                    }
                }
                Some(_) => {}
            }
            self.draw(|f| draw_picker(f, &items, cursor))?;
        }
    }

    /// The question screen, until an answer is chosen, the person leaves, or `ended`
    /// reports that the question ended elsewhere.
    pub async fn ask<F>(&mut self, q: &Question, ended: &mut F) -> Result<Asked, CliError>
    where
        F: Future<Output = Result<Interaction, tokio::task::JoinError>> + Unpin,
    {
        let mut form = Form::new(q);
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            self.draw(|f| draw_question(f, &mut form))?;
            let event = tokio::select! {
                e = self.next(&mut tick) => e,
                record = &mut *ended => {
                    if let Ok(record) = record {
                        return Ok(Asked::Ended(Box::new(record)));
                    }
                    None
                }
            };
            let step = match event {
                Some(Event::Key(k)) if k.kind != KeyEventKind::Release => form.key(k),
                Some(Event::Paste(text)) => {
                    form.type_text(&text);
                    Step::Stay
                }
                _ => Step::Stay,
            };
            match step {
                Step::Stay => {}
                Step::Submit(a) => return Ok(Asked::Answer(a)),
                Step::Back => return Ok(Asked::Back),
                Step::Quit => return Ok(Asked::Quit),
            }
        }
    }
}

impl Drop for Tui {
    fn drop(&mut self) {
        let _ = execute!(std::io::stdout(), DisableBracketedPaste);
        ratatui::restore();
    }
}

/// What a key did on the question screen.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    Stay,
    Submit(Answer),
    Back,
    Quit,
}

/// The question screen's state: which row the cursor is on, what is ticked or typed, how far
/// the question is scrolled. Pure, so the keys are tested without a terminal.
pub struct Form<'q> {
    q: &'q Question,
    cursor: usize,
    checked: Vec<bool>,
    text: String,
    scroll: usize,
    /// Lines of the question pane at the last draw (for PgUp/PgDn).
    page: usize,
    hint: Option<String>,
}

impl<'q> Form<'q> {
    pub fn new(q: &'q Question) -> Form<'q> {
        Form {
            q,
            cursor: 0,
            checked: vec![false; q.choices.len()],
            text: String::new(),
            scroll: 0,
            page: 10,
            hint: None,
        }
    }

    /// Rows to choose from: every choice, then "Other" where offered.
    fn rows(&self) -> usize {
        self.q.choices.len() + usize::from(self.q.allows_other())
    }

    /// Whether keys go into the text box (a text question, or the cursor on "Other").
    fn typing(&self) -> bool {
        self.q.is_text() || (self.q.allows_other() && self.cursor == self.q.choices.len())
    }

    pub fn type_text(&mut self, s: &str) {
        if !self.typing() {
            return;
        }
        let max = self.q.text_max.unwrap_or(0);
        for c in s.chars() {
            if self.text.chars().count() >= max {
                self.hint = Some(format!("The answer may be at most {max} characters."));
                break;
            }
            self.text.push(c);
        }
    }

    pub fn key(&mut self, k: KeyEvent) -> Step {
        self.hint = None;
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        match k.code {
            KeyCode::Char('c') if ctrl => return Step::Quit,
            KeyCode::Esc => return Step::Back,
            KeyCode::Up => self.cursor = self.cursor.saturating_sub(1),
            KeyCode::Down if self.cursor + 1 < self.rows() => self.cursor += 1,
            KeyCode::PageDown => self.scroll += self.page.max(1),
            KeyCode::PageUp => self.scroll = self.scroll.saturating_sub(self.page.max(1)),
            KeyCode::Enter => return self.submit(),
            KeyCode::Backspace if self.typing() => {
                self.text.pop();
            }
            KeyCode::Char(c) if self.typing() && !ctrl => self.type_text(&c.to_string()),
            KeyCode::Char('q') => return Step::Quit,
            KeyCode::Char(' ') if self.q.is_multi() && self.cursor < self.q.choices.len() => {
                self.checked[self.cursor] ^= true;
            }
            KeyCode::Char(d @ '1'..='9') => {
                let i = d as usize - '1' as usize;
                if i < self.rows() {
                    self.cursor = i;
                    if self.q.is_multi() && i < self.q.choices.len() {
                        self.checked[i] ^= true;
                    }
                }
            }
            _ => {}
        }
        Step::Stay
    }

    fn submit(&mut self) -> Step {
        let text = (!self.text.trim().is_empty()).then(|| self.text.clone());
        let q = self.q;
        if q.is_text() {
            return match text {
                Some(t) => Step::Submit(Answer {
                    choice_ids: vec![],
                    text: Some(t),
                }),
                None => self.refuse("Type an answer first."),
            };
        }
        if q.is_multi() {
            let ids: Vec<String> = q
                .choices
                .iter()
                .zip(&self.checked)
                .filter(|(_, on)| **on)
                .map(|(c, _)| c.id.clone())
                .collect();
            let (min, max) = q.selections.unwrap_or((1, q.choices.len()));
            // An "Other" text counts as one selection (SPEC §13.3).
            let count = ids.len() + usize::from(text.is_some());
            if count < min || count > max {
                let other = if q.allows_other() {
                    ", an Other text counts as one"
                } else {
                    ""
                };
                return self.refuse(&format!(
                    "Choose {} (Space or a number ticks a choice{other}).",
                    bounds(min, max)
                ));
            }
            return Step::Submit(Answer {
                choice_ids: ids,
                text,
            });
        }
        if self.typing() {
            return match text {
                Some(t) => Step::Submit(Answer {
                    choice_ids: vec![],
                    text: Some(t),
                }),
                None => self.refuse("Type your answer first."),
            };
        }
        Step::Submit(Answer {
            choice_ids: vec![q.choices[self.cursor].id.clone()],
            text: None,
        })
    }

    fn refuse(&mut self, why: &str) -> Step {
        self.hint = Some(why.to_string());
        Step::Stay
    }
}

/// "1", "1 to 3", "at least 2": how many choices a multi-choice question takes.
fn bounds(min: usize, max: usize) -> String {
    match (min, max) {
        (a, b) if a == b => format!("exactly {a}"),
        (a, b) => format!("{a} to {b}"),
    }
}

/// A piece of text and the style it is drawn in.
type Piece = (String, Style);

/// A record's text as styled pieces, cut by the model's rendering (SPEC §13.2): code points
/// shown by name and words that mix scripts stand out from the text around them.
fn pieces(s: &str, base: Style) -> Vec<Piece> {
    display_segments(s)
        .into_iter()
        .map(|seg| match seg {
            Segment::Text { text } => (text, base),
            Segment::Escaped { text, .. } => (text, base.black().on_yellow()),
            Segment::MixedScriptWord { text, .. } => (text, base.red().underlined()),
        })
        .collect()
}

/// The words that mix scripts in `s`, each with the scripts it mixes.
fn mixed_words(s: &str) -> Vec<(String, Vec<String>)> {
    display_segments(s)
        .into_iter()
        .filter_map(|seg| match seg {
            Segment::MixedScriptWord { text, scripts } => Some((text, scripts)),
            _ => None,
        })
        .collect()
}

/// Splits styled text into lines of at most `width` columns: at each newline, then at the
/// last space that fits, else inside a word. Tabs become spaces up to the next multiple of
/// 4. Every character is kept (trailing spaces stay at the end of their line).
fn wrap_pieces(pieces: &[Piece], width: usize) -> Vec<Line<'static>> {
    let width = width.max(2);
    // One cell group per character: (what to draw, columns, style).
    let mut lines: Vec<Vec<(String, usize, Style)>> = Vec::new();
    let mut cur: Vec<(String, usize, Style)> = Vec::new();
    let mut cur_w = 0usize;
    let mut col = 0usize;
    let mut last_space: Option<usize> = None;
    for (text, style) in pieces {
        for ch in text.chars() {
            if ch == '\n' {
                lines.push(std::mem::take(&mut cur));
                (cur_w, col, last_space) = (0, 0, None);
                continue;
            }
            let (cell, w) = if ch == '\t' {
                let n = 4 - col % 4;
                (" ".repeat(n), n)
            } else {
                (ch.to_string(), ch.width().unwrap_or(0))
            };
            col += w;
            while cur_w + w > width && !cur.is_empty() {
                let rest = match last_space.take() {
                    Some(at) => cur.split_off(at),
                    None => Vec::new(),
                };
                lines.push(std::mem::replace(&mut cur, rest));
                cur_w = cur.iter().map(|c| c.1).sum();
            }
            cur.push((cell, w, *style));
            cur_w += w;
            if ch == ' ' || ch == '\t' {
                last_space = Some(cur.len());
            }
        }
    }
    lines.push(cur);
    lines
        .into_iter()
        .map(|cells| {
            let mut spans: Vec<Span> = Vec::new();
            let mut run = String::new();
            let mut run_style = Style::new();
            for (cell, _, style) in cells {
                if style != run_style && !run.is_empty() {
                    spans.push(Span::styled(std::mem::take(&mut run), run_style));
                }
                run_style = style;
                run.push_str(&cell);
            }
            if !run.is_empty() {
                spans.push(Span::styled(run, run_style));
            }
            Line::from(spans)
        })
        .collect()
}

/// [`wrap_pieces`] for plain text.
#[cfg(test)]
fn wrap(text: &str, width: usize) -> Vec<String> {
    wrap_pieces(&[(text.to_string(), Style::new())], width)
        .iter()
        .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
        .collect()
}

/// "4:05 left", "1 h 02 min left", "expired".
fn time_left(expires_at: &str) -> String {
    let Some(t) = Timestamp::parse_rfc3339(expires_at) else {
        return String::new();
    };
    let now = Timestamp::now();
    if t.0 <= now.0 {
        return "expired".into();
    }
    let s = now.until(t).as_secs();
    if s >= 3600 {
        format!("{} h {:02} min left", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}:{:02} left", s / 60, s % 60)
    }
}

fn draw_picker(f: &mut Frame, items: &[Interaction], cursor: usize) {
    let [top, list, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let n = items.len();
    let title = match n {
        0 => "agentnotify answer · no questions are waiting".to_string(),
        1 => "agentnotify answer · 1 question is waiting".to_string(),
        n => format!("agentnotify answer · {n} questions are waiting, newest first"),
    };
    f.render_widget(Paragraph::new(title.bold()), top);
    let width = list.width.saturating_sub(4) as usize;
    let mut lines: Vec<Line> = Vec::new();
    if items.is_empty() {
        lines.push(Line::from(
            "No questions are waiting. New ones appear here the moment an agent asks.",
        ));
    }
    for (i, item) in items.iter().enumerate() {
        let Ok(q) = Question::from_record(item) else {
            continue;
        };
        let number = if i < 9 {
            format!("{}.", i + 1)
        } else {
            "  ".into()
        };
        let summary = shown(&q.prompt)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let head = format!(
            "{} {number} {} · asked {} ago · ",
            if i == cursor { "›" } else { " " },
            shown(&heading(&q)),
            age(&q.created_at),
        );
        let room = width.saturating_sub(head.chars().count());
        let line = format!("{head}{}", cut(&summary, room));
        let style = if i == cursor {
            Style::new().reversed()
        } else {
            Style::new()
        };
        lines.push(Line::styled(line, style));
    }
    let block = framed(" Pending questions ");
    f.render_widget(Paragraph::new(lines).block(block), list);
    f.render_widget(
        Paragraph::new("↑↓ move · 1-9 or Enter open · q quit".dim()),
        foot,
    );
}

/// A bordered pane with a title and a column of room inside each side.
fn framed<'a>(title: impl Into<Line<'a>>) -> Block<'a> {
    Block::bordered()
        .title(title)
        .padding(Padding::horizontal(1))
}

/// Cuts to `width` columns with "…" (the picker only; the question screen never cuts).
fn cut(s: &str, width: usize) -> String {
    let mut out = String::new();
    let mut w = 0;
    for c in s.chars() {
        let cw = c.width().unwrap_or(0);
        if w + cw + 1 > width {
            out.push('…');
            return out;
        }
        out.push(c);
        w += cw;
    }
    out
}

fn draw_question(f: &mut Frame, form: &mut Form) {
    let q = form.q;
    let area = f.area();
    let width = area.width as usize;
    // Who asks, and the help or the last hint: wrapped, never cut.
    let top = wrap_pieces(
        &[(
            format!(
                "{} · asked {} ago · {}",
                shown(&heading(q)),
                age(&q.created_at),
                time_left(&q.expires_at)
            ),
            Style::new().bold(),
        )],
        width,
    );
    let help = match &form.hint {
        Some(h) => (h.clone(), Style::new().bold()),
        None if q.is_text() => (
            "type · Enter send · PgUp/PgDn scroll · Esc back · Ctrl-C quit".into(),
            Style::new().dim(),
        ),
        None if q.is_multi() => (
            "↑↓ move · Space/1-9 tick · Enter send · PgUp/PgDn scroll · Esc back · q quit".into(),
            Style::new().dim(),
        ),
        None => (
            "↑↓ or 1-9 choose · Enter send · PgUp/PgDn scroll · Esc back · q quit".into(),
            Style::new().dim(),
        ),
    };
    let foot = wrap_pieces(&[help], width);
    let choice_lines = choice_lines(form, area.width.saturating_sub(4) as usize);
    let choice_rows = choice_lines.len() as u16 + 2;
    let max_choices = (area.height / 2).max(3);
    let [top_area, question, choices, foot_area] = Layout::vertical([
        Constraint::Length(top.len() as u16),
        Constraint::Min(3),
        Constraint::Length(choice_rows.min(max_choices)),
        Constraint::Length(foot.len() as u16),
    ])
    .areas(area);
    f.render_widget(Paragraph::new(top), top_area);

    let lines = question_lines(q, question.width.saturating_sub(4) as usize);
    let inner = question.height.saturating_sub(2) as usize;
    form.page = inner.saturating_sub(1).max(1);
    let last_start = lines.len().saturating_sub(inner);
    form.scroll = form.scroll.min(last_start);
    // When it does not fit, the title says which lines are shown: a tail is never unseen.
    let title = if lines.len() > inner {
        let end = (form.scroll + inner).min(lines.len());
        format!(
            " Question · lines {}-{end} of {} · PgUp/PgDn ",
            form.scroll + 1,
            lines.len()
        )
    } else {
        " Question ".to_string()
    };
    let block = framed(title);
    f.render_widget(
        Paragraph::new(lines)
            .block(block)
            .scroll((form.scroll as u16, 0)),
        question,
    );

    let title = if q.is_text() {
        format!(
            " Your answer ({} / {}) ",
            form.text.chars().count(),
            q.text_max.unwrap_or(0)
        )
    } else if let (true, Some((min, max))) = (q.is_multi(), q.selections) {
        let n = form.checked.iter().filter(|c| **c).count();
        format!(" Choose {} · {n} chosen ", bounds(min, max))
    } else {
        " Answer ".to_string()
    };
    // Keep the cursor's row in view when the choices do not fit.
    let inner_rows = choices.height.saturating_sub(2) as usize;
    let cursor_line = choice_lines
        .iter()
        .position(|(row, _)| *row == Some(form.cursor))
        .unwrap_or(0);
    let offset = cursor_line.saturating_sub(inner_rows.saturating_sub(1));
    let lines: Vec<Line> = choice_lines.into_iter().map(|(_, l)| l).collect();
    f.render_widget(
        Paragraph::new(lines)
            .block(framed(title))
            .scroll((offset as u16, 0)),
        choices,
    );

    f.render_widget(Paragraph::new(foot), foot_area);
}

/// The question pane: the prompt, then the body in a frame with its line count, then the
/// words that mix scripts, named.
fn question_lines(q: &Question, width: usize) -> Vec<Line<'static>> {
    let mut lines = wrap_pieces(&pieces(&q.prompt, Style::new().bold()), width);
    if let Some(body) = &q.body {
        lines.push(Line::from(""));
        lines.push(Line::from(format!("┌─ {}", lines_label(body)).dim()));
        for mut l in wrap_pieces(&pieces(body, Style::new()), width.saturating_sub(2)) {
            l.spans.insert(0, Span::from("│ ").dim());
            lines.push(l);
        }
        lines.push(Line::from("└─".dim()));
    }
    let mut texts = vec![q.prompt.as_str()];
    texts.extend(q.body.as_deref());
    for c in &q.choices {
        texts.push(&c.label);
        texts.extend(c.detail.as_deref());
    }
    let mut mixed: Vec<_> = texts.into_iter().flat_map(mixed_words).collect();
    let mut seen = std::collections::HashSet::new();
    mixed.retain(|(word, _)| seen.insert(word.clone()));
    if !mixed.is_empty() {
        lines.push(Line::from(""));
    }
    for (word, scripts) in mixed {
        let note = format!("⚠ “{word}” mixes scripts: {}", scripts.join(", "));
        lines.extend(wrap_pieces(&[(note, Style::new().red())], width));
    }
    lines
}

/// The choices pane, each line tagged with the row it belongs to.
fn choice_lines(form: &Form, width: usize) -> Vec<(Option<usize>, Line<'static>)> {
    let q = form.q;
    let mut out = Vec::new();
    // A row is its prefix ("› [x] 1. ") and its text, wrapped beside the prefix: lines after
    // the first are indented under the label, and none is wider than the pane.
    let mut push = |row: usize, row_pieces: Vec<Piece>| {
        let Some(((prefix, style), text)) = row_pieces.split_first() else {
            return;
        };
        let indent = " ".repeat(prefix.chars().count());
        let room = width.saturating_sub(indent.len());
        for (i, mut l) in wrap_pieces(text, room).into_iter().enumerate() {
            let head = if i == 0 {
                prefix.clone()
            } else {
                indent.clone()
            };
            l.spans.insert(0, Span::styled(head, *style));
            out.push((Some(row), l));
        }
    };
    if q.is_text() {
        let mut p = vec![("› ".to_string(), Style::new())];
        p.extend(pieces(&form.text, Style::new()));
        p.push(("▏".into(), Style::new()));
        push(0, p);
        return out;
    }
    let number = |i: usize| {
        if i < 9 {
            format!("{}.", i + 1)
        } else {
            "  ".into()
        }
    };
    for (i, c) in q.choices.iter().enumerate() {
        let on = form.cursor == i;
        let base = if on {
            Style::new().reversed()
        } else {
            Style::new()
        };
        let tick = match (q.is_multi(), form.checked[i]) {
            (false, _) => "",
            (true, true) => "[x] ",
            (true, false) => "[ ] ",
        };
        let mark = if on { "›" } else { " " };
        let mut p = vec![(format!("{mark} {tick}{} ", number(i)), base)];
        p.extend(pieces(&c.label, base));
        if let Some(d) = &c.detail {
            p.push(("\n".into(), base));
            p.extend(pieces(d, base));
        }
        push(i, p);
    }
    if q.allows_other() {
        let i = q.choices.len();
        let on = form.cursor == i;
        let base = if on {
            Style::new().reversed()
        } else {
            Style::new()
        };
        let mark = if on { "›" } else { " " };
        let tick = if q.is_multi() { "    " } else { "" };
        let mut p = vec![(format!("{mark} {tick}{} Other: ", number(i)), base)];
        p.extend(pieces(&form.text, base));
        if on {
            p.push(("▏".into(), base));
        }
        push(i, p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn question(kind: &str, extra: Value) -> Question {
        let mut v = json!({
            "kind": kind, "agent": "claude", "prompt": "Pick",
            "choices": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}, {"id": "c", "label": "C"}],
        });
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        let record = crate::model::InteractionRequest::from_json(&v)
            .unwrap()
            .into_interaction(crate::model::Timestamp::now());
        Question::from_record(&record).unwrap()
    }

    fn key(code: KeyCode) -> KeyEvent {
        KeyEvent::new(code, KeyModifiers::NONE)
    }

    fn ids(step: Step) -> (Vec<String>, Option<String>) {
        match step {
            Step::Submit(a) => (a.choice_ids, a.text),
            other => panic!("not submitted: {other:?}"),
        }
    }

    #[test]
    fn wrapping_keeps_every_character() {
        let text = "abc def\tghi jklmnopqrstu\n\nx";
        let lines = wrap(text, 6);
        assert!(lines.iter().all(|l| l.chars().count() <= 6), "{lines:?}");
        assert_eq!(lines.concat(), "abc def ghi jklmnopqrstux");
        assert_eq!(wrap("", 10), vec![String::new()]);
        assert_eq!(wrap("a\nb", 10), vec!["a", "b"]);
        assert_eq!(wrap("aaaaaaaaaa", 4), vec!["aaaa", "aaaa", "aa"]);
        assert_eq!(wrap("one two three", 8), vec!["one two ", "three"]);
    }

    #[test]
    fn choice_rows_wrap_under_their_label_and_never_overflow() {
        let q = question(
            "multi_choice",
            json!({"choices": [
                {"id": "a", "label": "Always allow", "detail": "Also:\n- add allow rules: Bash(npm ci:*)"},
                {"id": "b", "label": "B"}]}),
        );
        let form = Form::new(&q);
        let lines: Vec<String> = choice_lines(&form, 24)
            .into_iter()
            .map(|(_, l)| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect();
        assert!(lines.iter().all(|l| l.chars().count() <= 24), "{lines:#?}");
        assert_eq!(lines[0], "› [ ] 1. Always allow");
        assert_eq!(lines[1], "         Also:");
        assert!(lines[2].starts_with("         - add allow "), "{lines:#?}");
        let all: String = lines.concat().split_whitespace().collect();
        assert!(all.contains("Bash(npmci:*)"), "nothing dropped: {all}");
    }

    #[test]
    fn single_choice_by_arrows_or_numbers() {
        let q = question("single_choice", json!({}));
        let mut f = Form::new(&q);
        f.key(key(KeyCode::Down));
        assert_eq!(ids(f.key(key(KeyCode::Enter))).0, vec!["b"]);
        f.key(key(KeyCode::Char('3')));
        assert_eq!(ids(f.key(key(KeyCode::Enter))).0, vec!["c"]);
        f.key(key(KeyCode::Down));
        assert_eq!(f.cursor, 2, "the cursor stops at the last row");
        assert_eq!(f.key(key(KeyCode::Char('q'))), Step::Quit);
        assert_eq!(f.key(key(KeyCode::Esc)), Step::Back);
    }

    #[test]
    fn multi_choice_ticks_within_the_bounds() {
        let q = question(
            "multi_choice",
            json!({"min_selections": 2, "max_selections": 2}),
        );
        let mut f = Form::new(&q);
        f.key(key(KeyCode::Char(' ')));
        assert_eq!(f.key(key(KeyCode::Enter)), Step::Stay);
        assert!(f.hint.as_deref().unwrap().contains("exactly 2"));
        f.key(key(KeyCode::Char('3')));
        assert_eq!(ids(f.key(key(KeyCode::Enter))).0, vec!["a", "c"]);
    }

    #[test]
    fn other_takes_typed_text_and_text_questions_are_bounded() {
        let q = question(
            "single_choice",
            json!({"allow_other": true, "other_max_length": 4}),
        );
        let mut f = Form::new(&q);
        f.key(key(KeyCode::Char('4')));
        assert!(f.typing());
        for c in "q1 xyz".chars() {
            f.key(key(KeyCode::Char(c)));
        }
        assert_eq!(f.text, "q1 x", "stops at other_max_length");
        f.key(key(KeyCode::Backspace));
        assert_eq!(
            ids(f.key(key(KeyCode::Enter))),
            (vec![], Some("q1 ".into()))
        );

        let t = question("text", json!({"choices": [], "text_max_length": 100}));
        let mut f = Form::new(&t);
        assert_eq!(f.key(key(KeyCode::Enter)), Step::Stay);
        f.type_text("yes, q");
        assert_eq!(ids(f.key(key(KeyCode::Enter))).1.as_deref(), Some("yes, q"));
    }
}
