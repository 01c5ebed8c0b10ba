//! `agentnotify demo`: a sample permission request through the real hook, answered by you.

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::answer::Question;
use super::CliError;
use crate::client;
use crate::model::Interaction;
use crate::paths::Paths;

const SAMPLE: &str = include_str!("../../hooks/fixtures/claude-bash.json");

pub async fn run(a: super::args::DemoArgs) -> Result<(), CliError> {
    let paths = Paths::from_env()?;
    let hook = hook_executable()?;
    let session = format!("demo-{}", crate::model::new_id());
    let mut payload: Value = serde_json::from_str(SAMPLE).expect("the sample is valid JSON");
    payload["session_id"] = Value::String(session.clone());
    payload["cwd"] = Value::String("/home/you/demo-project".into());

    println!(
        "Sending a sample Claude Code permission request through {} …",
        hook.display()
    );
    let mut child = tokio::process::Command::new(&hook)
        .args([
            "claude",
            "ask-permission",
            "--timeout",
            &a.timeout.to_string(),
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| CliError::Other(format!("cannot run {}: {e}", hook.display())))?;
    let mut stdin = child.stdin.take().expect("piped");
    stdin
        .write_all(payload.to_string().as_bytes())
        .await
        .map_err(|e| CliError::Other(format!("cannot feed the hook: {e}")))?;
    drop(stdin);

    let client = client::attach_or_spawn(&paths).await?;
    let question = find_question(&client, &session).await?;
    let id = question.id.as_str();
    println!("\nThe agent asks (interaction {id}):\n");
    print!(
        "{}",
        super::answer::as_text(&Question::from_record(&question)?)
    );
    println!("\nAnswer it from another terminal:\n\n    agentnotify answer\n");
    println!("or in one go with one of:\n");
    for choice in &question.question.choices {
        println!(
            "    agentnotify answer {id} --choice {}    # {}",
            super::answer::shown(&choice.id),
            super::answer::shown(&choice.label)
        );
    }
    println!("\nOr answer it in your browser: run `agentnotify ui` in another terminal.");
    println!("\nWaiting up to {} s for your answer…", a.timeout);

    let mut out = String::new();
    let mut stdout = child.stdout.take().expect("piped");
    let _ = stdout.read_to_string(&mut out).await;
    let _ = child.wait().await;
    if out.trim().is_empty() {
        println!("\nThe hook printed nothing: Claude Code would show its own prompt (no answer, or the question ended).");
    } else {
        println!(
            "\nThe hook printed this decision for Claude Code:\n\n{}",
            out.trim()
        );
    }
    Ok(())
}

/// The hook's question, found by the demo's unique session id.
async fn find_question(client: &client::Client, session: &str) -> Result<Interaction, CliError> {
    let query = [("session", session.to_string())];
    for _ in 0..250 {
        if let Some(q) = client.list_interactions(&query).await?.into_iter().next() {
            return Ok(q);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Err(CliError::Other(
        "the hook did not open its question within 5 s; see the hook log".into(),
    ))
}

pub(super) fn hook_executable() -> Result<std::path::PathBuf, CliError> {
    let name = format!("agentnotify-hook{}", std::env::consts::EXE_SUFFIX);
    let me = std::env::current_exe().map_err(|e| CliError::Other(e.to_string()))?;
    let sibling = me.with_file_name(&name);
    if sibling.is_file() {
        return Ok(sibling);
    }
    Err(CliError::Other(format!(
        "cannot find {name} next to {}; install both binaries together",
        me.display()
    )))
}
