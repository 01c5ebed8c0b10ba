//! `agentnotify pi [--ttl S] -- pi --mode rpc …`: Pi in RPC mode, its dialogs also asked
//! at the broker.
//!
//! The person's RPC client keeps talking to Pi through us unchanged: its stdin lines go to
//! Pi, Pi's stdout lines come back byte for byte (split on LF only: Pi's framing). Each
//! dialog (`extension_ui_request` select/confirm/input/editor) is also opened as a
//! question; the first answer wins on either side. The broker's answer becomes Pi's
//! `extension_ui_response` (and a later reply from the client for it is dropped); the
//! client's reply goes to Pi and withdraws the question; expiry at the broker dismisses
//! the dialog (`cancelled: true`); a dialog whose own timeout ends (Pi answers it itself),
//! and every open one when Pi exits, is withdrawn. Any broker failure leaves the dialog to
//! the client: nothing is ever answered that nobody answered.

use std::collections::HashMap;
use std::ffi::OsString;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, OnceCell};
use tokio::time::Instant;

use super::ask::{self, AskError};
use super::map::{self, Asked, Context};
use crate::client::{self, Client};
use crate::paths::Paths;

/// Longest line read from either side (a prompt with images can be large).
const MAX_LINE: usize = 64 * 1024 * 1024;
/// A question's lifetime when Pi's dialog has no timeout (it would wait for ever).
pub const DEFAULT_TTL_SECS: u64 = 600;
/// How long, on exit, a question still being opened gets to learn its id and withdraw.
const OPENING_GRACE: Duration = Duration::from_secs(1);

/// Open dialogs by Pi's request id: the broker question (once opened) and its task.
#[derive(Default)]
struct Open {
    dialogs: HashMap<String, Dialog>,
    /// Dialogs the broker answered: the client's later reply for one is dropped.
    answered: std::collections::HashSet<String>,
}

struct Dialog {
    question: Option<String>,
    task: Option<tokio::task::JoinHandle<()>>,
}

type Shared = Arc<Mutex<Open>>;

/// Everything one run shares: the broker client (made on first use), the open dialogs,
/// the line queue into Pi's stdin.
#[derive(Clone)]
struct Run {
    paths: Arc<Paths>,
    client: Arc<OnceCell<Client>>,
    open: Shared,
    to_pi: mpsc::UnboundedSender<Vec<u8>>,
    ctx: Arc<Context>,
    /// Set by a signal: Pi is being ended, so no new dialog is asked.
    closing: Arc<std::sync::atomic::AtomicBool>,
}

/// Runs the wrapper; returns Pi's exit code (1 when Pi cannot be started).
pub fn main(command: Vec<OsString>, ttl_seconds: u64) -> i32 {
    let Some((program, args)) = command.split_first() else {
        eprintln!("agentnotify pi: usage: agentnotify pi [--ttl S] -- pi --mode rpc …");
        return 2;
    };
    let paths = match Paths::from_env() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("agentnotify pi: {e}");
            return 1;
        }
    };
    let _log = crate::logging::init(&paths, "pi", "info");
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("agentnotify pi: cannot start the runtime: {e}");
            return 1;
        }
    };
    let cwd = std::env::current_dir().ok();
    let ctx = Context {
        project: cwd
            .as_deref()
            .and_then(|c| c.to_str())
            .and_then(crate::model::fields::project_of),
        ttl_seconds,
    };
    let code = runtime.block_on(wrap(paths, program, args, ctx));
    // The read of our stdin blocks a thread that nothing can wake: do not wait for it.
    runtime.shutdown_background();
    code
}

async fn wrap(paths: Paths, program: &OsString, args: &[OsString], ctx: Context) -> i32 {
    let mut child = match tokio::process::Command::new(program)
        .args(args)
        .env(super::RPC_ENV, "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "agentnotify pi: cannot start {}: {e}",
                program.to_string_lossy()
            );
            return 1;
        }
    };
    let (Some(mut pi_in), Some(pi_out)) = (child.stdin.take(), child.stdout.take()) else {
        return 1;
    };
    let (to_pi, mut queue) = mpsc::unbounded_channel::<Vec<u8>>();
    let run = Run {
        paths: Arc::new(paths),
        client: Arc::default(),
        open: Shared::default(),
        to_pi,
        ctx: Arc::new(ctx),
        closing: Arc::default(),
    };
    // One writer into Pi's stdin, so lines from both sides never interleave; an empty
    // line is the person's end of input, passed on by closing Pi's stdin.
    let writer = tokio::spawn(async move {
        while let Some(line) = queue.recv().await {
            if line.is_empty() {
                break;
            }
            if pi_in.write_all(&line).await.is_err() || pi_in.flush().await.is_err() {
                break;
            }
        }
    });
    let from_person = tokio::spawn(person_to_pi(run.clone()));
    let forward = tokio::spawn(forward_signals(run.clone(), child.id()));
    // Pi's stdout ends when Pi exits: everything it wrote reaches the person first.
    pi_to_person(run.clone(), pi_out).await;
    let status = child.wait().await.ok();
    from_person.abort();
    forward.abort();
    writer.abort();
    withdraw_all(&run).await;
    let code = status.and_then(|s| {
        use std::os::unix::process::ExitStatusExt;
        s.code().or_else(|| s.signal().map(|n| 128 + n))
    });
    tracing::info!(code = ?code, "pi exited");
    code.unwrap_or(1)
}

/// SIGTERM, SIGINT and SIGHUP to the wrapper are passed on to Pi as SIGTERM, and every
/// open question is withdrawn at once: Pi may take its time to end (1.6.0 waits for an
/// open dialog), but nobody should answer a session that is being ended.
async fn forward_signals(run: Run, pid: Option<u32>) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int), Ok(mut hup), Some(pid)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
        pid.and_then(|p| i32::try_from(p).ok()),
    ) else {
        return;
    };
    loop {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
            _ = hup.recv() => {}
        }
        run.closing.store(true, std::sync::atomic::Ordering::SeqCst);
        // SAFETY: sending a signal to our own child, whose pid we hold until it is reaped.
        unsafe {
            libc::kill(pid, libc::SIGTERM);
        }
        tracing::info!("signal passed on to pi; withdrawing its questions");
        withdraw_all(&run).await;
    }
}

/// The person's lines into Pi. A reply to a dialog withdraws its question; a reply to a
/// dialog the broker already answered is dropped (Pi has its answer).
async fn person_to_pi(run: Run) {
    let mut stdin = BufReader::new(tokio::io::stdin());
    loop {
        let mut line = Vec::new();
        match read_line(&mut stdin, &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if let Some(id) = map::reply_id(&line) {
            let (dialog, already) = {
                let mut open = run.open.lock().expect("not poisoned");
                (open.dialogs.remove(&id), open.answered.remove(&id))
            };
            if already {
                tracing::info!("client replied to a dialog answered remotely; dropped");
                continue;
            }
            if let Some(d) = dialog {
                tracing::info!("client answered a dialog first; withdrawing its question");
                // A question still being opened is withdrawn by its own task.
                if d.question.is_some() {
                    end(&run, d).await;
                }
            }
        }
        if run.to_pi.send(line).is_err() {
            break;
        }
    }
    // The person closed their side: so does Pi's stdin, once the queue is written.
    let _ = run.to_pi.send(Vec::new());
}

/// Pi's lines to the person, unchanged; each dialog among them is also asked remotely.
async fn pi_to_person(run: Run, pi_out: tokio::process::ChildStdout) {
    let mut reader = BufReader::new(pi_out);
    let mut out = tokio::io::stdout();
    loop {
        let mut line = Vec::new();
        match read_line(&mut reader, &mut line).await {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        if out.write_all(&line).await.is_err() || out.flush().await.is_err() {
            break;
        }
        let Ok(record) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        match map::dialog(&record, &run.ctx) {
            Ok(Some(asked)) => start(&run, asked),
            Ok(None) => {}
            Err(why) => tracing::info!(reason = %why, "pi dialog not asked remotely"),
        }
    }
}

/// One LF-terminated line (LF kept), at most [`MAX_LINE`] bytes.
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<usize> {
    use tokio::io::AsyncReadExt;
    let mut limited = reader.take(MAX_LINE as u64);
    limited.read_until(b'\n', line).await
}

fn start(run: &Run, asked: Asked) {
    if run.closing.load(std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let id = asked.ui_id.clone();
    let task = tokio::spawn(ask_dialog(run.clone(), asked));
    let mut open = run.open.lock().expect("not poisoned");
    open.dialogs.insert(
        id,
        Dialog {
            question: None,
            task: Some(task),
        },
    );
}

/// Asks one dialog and replies to Pi when the broker's answer (or expiry) comes first.
async fn ask_dialog(run: Run, asked: Asked) {
    let started = std::time::Instant::now();
    let ttl = asked.request["ttl_seconds"]
        .as_u64()
        .unwrap_or(DEFAULT_TTL_SECS);
    // Pi answers a timed dialog itself at its timeout: the question ends then too.
    let deadline = Instant::now()
        + match asked.timeout_ms {
            Some(ms) => Duration::from_millis(ms),
            None => Duration::from_secs(ttl + 5),
        };
    let outcome = async {
        let client = run
            .client
            .get_or_try_init(|| client::attach_or_spawn(&run.paths))
            .await?
            .clone();
        let question = ask::open(&client, &asked.request, "Pi is asking").await?;
        let still_open = {
            let mut open = run.open.lock().expect("not poisoned");
            match open.dialogs.get_mut(&asked.ui_id) {
                Some(d) => {
                    d.question = Some(question.id.clone());
                    true
                }
                None => false,
            }
        };
        if !still_open {
            // Answered by the client while the question was being opened.
            ask::withdraw(&client, &question.id).await;
            return Err(AskError::Ended("cancelled"));
        }
        tracing::info!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "pi dialog asked"
        );
        ask::answered(&client, &question, deadline).await
    }
    .await;
    let reply = match &outcome {
        Ok(record) => record.response.as_ref().and_then(|r| map::reply(&asked, r)),
        Err(AskError::Ended("expired")) => Some(map::cancelled(&asked.ui_id)),
        Err(_) => None,
    };
    let dialog = {
        let mut open = run.open.lock().expect("not poisoned");
        let d = open.dialogs.remove(&asked.ui_id);
        if d.is_some() && reply.is_some() {
            open.answered.insert(asked.ui_id.clone());
        }
        d
    };
    let Some(mut dialog) = dialog else { return };
    match reply {
        Some(reply) => {
            let mut line = serde_json::to_vec(&reply).expect("a JSON value");
            line.push(b'\n');
            let _ = run.to_pi.send(line);
            tracing::info!(
                elapsed_ms = started.elapsed().as_millis() as u64,
                "pi dialog answered through the broker"
            );
        }
        None => {
            if let Err(why) = &outcome {
                tracing::info!(reason = %why, "pi dialog left to the client");
            }
            dialog.task = None;
            end(&run, dialog).await;
        }
    }
}

/// Ends one dialog's remote side: stops its task and withdraws its question.
async fn end(run: &Run, dialog: Dialog) {
    if let Some(task) = dialog.task {
        task.abort();
    }
    if let (Some(id), Some(client)) = (dialog.question, run.client.get()) {
        ask::withdraw(client, &id).await;
    }
}

/// On the way out: withdraws every open question. A task still opening its question
/// finds its dialog gone and withdraws the question itself; it gets a moment to do so.
async fn withdraw_all(run: &Run) {
    let dialogs: Vec<Dialog> = {
        let mut open = run.open.lock().expect("not poisoned");
        open.dialogs.drain().map(|(_, d)| d).collect()
    };
    let mut opening = Vec::new();
    for d in dialogs {
        match d.question {
            Some(_) => end(run, d).await,
            None => opening.extend(d.task),
        }
    }
    let _ = tokio::time::timeout(OPENING_GRACE, async {
        for task in opening {
            let _ = task.await;
        }
    })
    .await;
}
