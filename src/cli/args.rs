//! The `agentnotify` command line (SPEC §5), as clap definitions.

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "agentnotify",
    version,
    about = "Answer your AI coding agent's permission requests and questions from anywhere",
    long_about = "agentnotify keeps one durable record per question an agent asks, accepts at most one \
answer (first valid wins), and lets you answer from this terminal, a web page or a phone.\n\n\
Start here: `agentnotify demo` sends a sample permission request through the real hook; \
`agentnotify ui` opens the live web page where you answer questions with one click; \
`agentnotify answer` answers them in this terminal.",
    after_help = format!(
        "Exit codes: {}. Errors go to stderr as one line with their code.",
        crate::exit::TABLE
    )
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the broker in the foreground (the same program hooks start on demand).
    Daemon(DaemonArgs),
    /// Ask, list, wait for and answer questions.
    #[command(subcommand)]
    Interactions(InteractionsCommand),
    /// Post, list and resolve notifications.
    #[command(subcommand)]
    Notify(NotifyCommand),
    /// Answer a pending question in this terminal: pick it, read it whole, choose.
    #[command(
        long_about = "Answer a pending question in this terminal.\n\n\
Without an id, lists the pending questions, newest first (arrow keys or a number to open \
one). The question is shown whole: its prompt and body wrapped and scrollable \
(PgUp/PgDn), invisible and control characters shown as \u{27e8}U+XXXX\u{27e9}. Choose with the arrow \
keys or a number and press Enter; Space or a number ticks choices of a multi-choice \
question; text answers and \"Other\" are typed in. The answer is bound to exactly the \
question shown: if it changed, ended or was answered elsewhere meanwhile, nothing is \
applied and you are told what the broker recorded.\n\n\
With an id and --choice or --text, prints the question and answers it at once.",
        after_help = "Examples:\n  agentnotify answer\n  agentnotify answer <id>\n  \
agentnotify answer <id> --choice allow-once\n  agentnotify answer <id> --choice a --choice c\n  \
agentnotify answer <id> --text \"Use the staging database\""
    )]
    Answer(AnswerArgs),
    /// Send a sample permission request through the real hook and show the decision.
    Demo(DemoArgs),
    /// Open the local web page that shows questions live and answers them in one click.
    ///
    /// Prints a one-time link (it works once, within 2 minutes) and opens it in your
    /// browser; following it signs this browser in for 12 hours.
    Ui(UiArgs),
    /// Show whether the broker runs, where, and how many questions are pending.
    Status(JsonFlag),
    /// Ask the running broker to exit once nothing is pending.
    Stop,
    /// Print the loopback API's bearer token (creating it on first use).
    Token(TokenArgs),
    /// Answer from a phone: relay providers and routes, the reference Relay, a device client.
    #[command(subcommand)]
    Relay(crate::cli::relay::RelayCommand),
    /// Get notified: desktop, ntfy (phone) and webhook channels, and which questions go where.
    #[command(subcommand)]
    Channels(crate::cli::channels::ChannelsCommand),
    /// Set everything up, guided: your agents' hooks, where questions reach you, a test question.
    ///
    /// Re-runnable: what is set up already is kept and shown. Every file is named before it is
    /// written. Ends with doctor's summary.
    Setup(crate::cli::guide::SetupArgs),
    /// Print a shell completion script for agentnotify or agentnotify-hook.
    Completions(crate::cli::manual::CompletionsArgs),
    /// Write the man pages of agentnotify and agentnotify-hook into a folder.
    Man(crate::cli::manual::ManArgs),
    /// Run Pi in RPC mode with its dialogs also answerable from anywhere.
    Pi(PiArgs),
    /// OpenClaw: answer its Gateway's exec approvals from anywhere.
    #[command(subcommand)]
    Openclaw(crate::cli::openclaw::OpenclawCommand),
}

#[derive(Debug, Args)]
#[command(
    long_about = "Run Pi in RPC mode with its dialogs also answerable from anywhere.\n\n\
Your RPC client talks to Pi through this command unchanged. Every dialog Pi opens \
(select, confirm, input, editor) is also asked as a question; the first answer wins, \
from your client or from anywhere else. A question that expires dismisses the dialog.",
    after_help = "Example:\n  agentnotify pi -- pi --mode rpc --no-session"
)]
pub struct PiArgs {
    /// Lifetime in seconds of a question for a dialog without its own timeout (30-3600).
    #[arg(long, value_name = "S", default_value_t = crate::pi::rpc::DEFAULT_TTL_SECS,
          value_parser = clap::value_parser!(u64).range(30..=3600))]
    pub ttl: u64,
    /// Pi's command line, after `--`.
    #[arg(last = true, required = true, value_name = "PI COMMAND")]
    pub command: Vec<std::ffi::OsString>,
}

#[derive(Debug, Args)]
pub struct AnswerArgs {
    /// The question's id (default: pick one of the pending questions).
    pub id: Option<String>,
    /// Answer with this choice id at once (repeat it for a multi-choice question).
    #[arg(long = "choice", value_name = "ID", requires = "id")]
    pub choices: Vec<String>,
    /// Answer with this text at once (a text question, or "Other" where offered).
    #[arg(long, value_name = "TEXT", requires = "id", allow_hyphen_values = true)]
    pub text: Option<String>,
}

#[derive(Debug, Args)]
pub struct DaemonArgs {
    /// Port on 127.0.0.1 (default 47821, falling back to an ephemeral port when taken; 0 = ephemeral).
    #[arg(long)]
    pub port: Option<u16>,
    /// Started by a client: exit after the idle time with nothing pending.
    #[arg(long)]
    pub on_demand: bool,
    /// Idle seconds before an on-demand broker exits (default: config, else 900).
    #[arg(long, value_name = "S")]
    pub idle_exit_seconds: Option<u64>,
    /// POST requests per second allowed across all clients (default: config, else 30).
    #[arg(long, value_name = "N")]
    pub rate_limit: Option<u32>,
    /// Burst size of the POST rate limit (default: config, else 60).
    #[arg(long, value_name = "N")]
    pub rate_burst: Option<u32>,
}

#[derive(Debug, Args)]
pub struct JsonFlag {
    /// Print JSON instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct UiArgs {
    /// Only print the link; do not try to open a browser.
    #[arg(long)]
    pub print: bool,
}

#[derive(Debug, Args)]
pub struct TokenArgs {
    /// Print the token file's path instead of the token.
    #[arg(long)]
    pub path: bool,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Seconds the demo question stays open.
    #[arg(long, default_value_t = 300)]
    pub timeout: u64,
}

#[derive(Debug, Subcommand)]
#[command(
    after_help = "Every command starts the broker on demand. `get`, `request`, `wait`, `respond` and \
`cancel` print the record as JSON. To answer, take `request_digest` and `nonce` from `get`.\n\n\
Example:\n  agentnotify interactions request --kind permission --prompt \"Deploy to prod?\" \\\n    \
--choice allow-once:\"Allow once\" --choice deny:\"Deny\" --agent codex --project shop --session sess-1\n  \
agentnotify interactions list --pending\n  \
agentnotify interactions respond <id> --response-id r1 --digest <request_digest> --nonce <nonce> --choice deny"
)]
pub enum InteractionsCommand {
    /// Open a question (or reuse the pending one with the same key and content).
    Request(RequestArgs),
    /// List questions, newest first.
    List(ListArgs),
    /// Show one question as JSON.
    Get(IdArg),
    /// Wait until a question is answered or ends, or the timeout passes.
    Wait(WaitArgs),
    /// Answer a question (first valid answer wins).
    Respond(RespondArgs),
    /// Withdraw a pending question.
    Cancel(IdArg),
    /// Re-send a question to the enabled relay routes (idempotent per provider).
    Publish(IdArg),
    /// Fetch answers from the relay once, by hand (the broker also polls by itself).
    PollResponses(PollArgs),
}

#[derive(Debug, Args)]
pub struct IdArg {
    /// The interaction id (32 hex characters).
    pub id: String,
}

#[derive(Debug, Args)]
pub struct RequestArgs {
    /// permission, single_choice, multi_choice or text.
    #[arg(long, default_value = "permission")]
    pub kind: String,
    /// The question, exactly as the person should see it (1-2000 characters).
    #[arg(long)]
    pub prompt: String,
    /// What actually runs, shown whole under the prompt (at most 16,384 characters).
    #[arg(long)]
    pub body: Option<String>,
    /// multi_choice: fewest choices an answer takes (default 1).
    #[arg(long = "min-selections", value_name = "N")]
    pub min_selections: Option<u32>,
    /// multi_choice: most choices an answer takes (default all).
    #[arg(long = "max-selections", value_name = "N")]
    pub max_selections: Option<u32>,
    /// Choice kinds: also accept an "Other" text answer.
    #[arg(long = "allow-other")]
    pub allow_other: bool,
    /// Longest "Other" text (1-2000, default 500).
    #[arg(long = "other-max", value_name = "N")]
    pub other_max: Option<u32>,
    /// An answer choice as ID:LABEL (repeatable; permission defaults to allow-once and deny).
    #[arg(long = "choice", value_name = "ID:LABEL")]
    pub choices: Vec<String>,
    /// Extra detail for a choice as ID:DETAIL (repeatable).
    #[arg(long = "choice-detail", value_name = "ID:DETAIL")]
    pub choice_details: Vec<String>,
    /// Longest text answer (text questions; 1-2000, default 500).
    #[arg(long = "text-max", value_name = "N")]
    pub text_max: Option<u32>,
    /// Seconds until the question expires (30-3600, default 600).
    #[arg(long, value_name = "S")]
    pub ttl: Option<u64>,
    /// Logical identity: the same key and content reuses the pending question.
    #[arg(long)]
    pub key: Option<String>,
    /// The agent asking, shown with the question (e.g. claude, codex).
    #[arg(long)]
    pub agent: Option<String>,
    /// The project the question is about, shown with it.
    #[arg(long)]
    pub project: Option<String>,
    /// The agent's session id; keeps questions of parallel sessions apart.
    #[arg(long)]
    pub session: Option<String>,
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only pending questions.
    #[arg(long)]
    pub pending: bool,
    /// Only this status: pending, answered, expired, cancelled or superseded.
    #[arg(long)]
    pub status: Option<String>,
    /// Only questions from this agent.
    #[arg(long)]
    pub agent: Option<String>,
    /// Only questions about this project.
    #[arg(long)]
    pub project: Option<String>,
    /// Only questions from this session.
    #[arg(long)]
    pub session: Option<String>,
    /// At most this many (1-500, default 100).
    #[arg(long)]
    pub limit: Option<u32>,
    /// Print JSON instead of aligned lines.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct WaitArgs {
    /// The interaction id (32 hex characters).
    pub id: String,
    /// Seconds to wait (1-300).
    #[arg(long, default_value_t = 120)]
    pub timeout: u64,
}

#[derive(Debug, Args)]
pub struct RespondArgs {
    /// The interaction id (32 hex characters).
    pub id: String,
    /// Idempotency key: repeating an accepted answer with it replays the result.
    /// Default: a new random one.
    #[arg(long, allow_hyphen_values = true)]
    pub response_id: Option<String>,
    /// The question's request_digest (from `get`): proves which question you answer.
    #[arg(long, allow_hyphen_values = true)]
    pub digest: String,
    /// The question's nonce (from `get`). Nonces are base64url and may start with `-`.
    #[arg(long, allow_hyphen_values = true)]
    pub nonce: String,
    /// The chosen choice id.
    #[arg(long, conflicts_with = "text", required_unless_present_any = ["text", "choice_ids"])]
    pub choice: Option<String>,
    /// A multi_choice answer: the chosen ids, comma-separated (with --text for an "Other").
    #[arg(long = "choice-ids", value_delimiter = ',', conflicts_with = "choice")]
    pub choice_ids: Option<Vec<String>>,
    /// The text answer (text questions), or the "Other" text of a question that allows one.
    #[arg(long, allow_hyphen_values = true)]
    pub text: Option<String>,
    /// Who answers (default cli).
    #[arg(long, default_value = "cli")]
    pub source: String,
    /// Device id of the answering device, if any.
    #[arg(long)]
    pub device: Option<String>,
}

#[derive(Debug, Args)]
pub struct PollArgs {
    /// Only this relay provider (default: every enabled one).
    #[arg(long)]
    pub provider: Option<String>,
    /// Print JSON instead of one line per provider.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum NotifyCommand {
    /// Post a notification (a matching active key updates it in place).
    Send(SendArgs),
    /// List notifications, newest first.
    List(NotifyListArgs),
    /// Show one notification as JSON.
    Get(IdArg),
    /// Mark a notification resolved.
    Resolve(IdArg),
    /// Dismiss a notification.
    Dismiss(IdArg),
}

#[derive(Debug, Args)]
pub struct SendArgs {
    /// A short headline (1-200 characters).
    #[arg(long)]
    pub title: String,
    /// The body (1-4000 characters).
    #[arg(long)]
    pub message: String,
    /// permission_required, input_required, completed, error, info…
    #[arg(long = "type")]
    pub kind: Option<String>,
    /// low, normal, high or critical.
    #[arg(long)]
    pub priority: Option<String>,
    /// The agent this is about.
    #[arg(long)]
    pub agent: Option<String>,
    /// The project this is about.
    #[arg(long)]
    pub project: Option<String>,
    /// De-duplication key: a new notification with the key of an active one updates it.
    #[arg(long)]
    pub key: Option<String>,
}

#[derive(Debug, Args)]
pub struct NotifyListArgs {
    /// active, resolved or dismissed.
    #[arg(long)]
    pub status: Option<String>,
    /// Only notifications about this agent.
    #[arg(long)]
    pub agent: Option<String>,
    /// Only notifications about this project.
    #[arg(long)]
    pub project: Option<String>,
    /// At most this many (1-500, default 100).
    #[arg(long)]
    pub limit: Option<u32>,
    /// Print JSON instead of aligned lines.
    #[arg(long)]
    pub json: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nonces are base64url: one in 32 starts with `-`, and must still be accepted as the
    /// value of `--nonce` (and so must such a digest, response id or text answer).
    #[test]
    fn respond_takes_values_that_start_with_a_hyphen() {
        let cli = Cli::try_parse_from([
            "agentnotify",
            "interactions",
            "respond",
            "0123",
            "--response-id",
            "-r1",
            "--digest",
            "-d",
            "--nonce",
            "-7Lsua-fCM7R8bF5",
            "--text",
            "- item",
        ])
        .expect("parses");
        let Command::Interactions(InteractionsCommand::Respond(a)) = cli.command else {
            panic!("not respond");
        };
        assert_eq!(a.nonce, "-7Lsua-fCM7R8bF5");
        assert_eq!(a.digest, "-d");
        assert_eq!(a.response_id.as_deref(), Some("-r1"));
        assert_eq!(a.text.as_deref(), Some("- item"));
        let cli = Cli::try_parse_from([
            "agentnotify",
            "interactions",
            "respond",
            "0123",
            "--digest",
            "d",
            "--nonce",
            "-abc",
            "--choice",
            "deny",
        ])
        .expect("parses");
        let Command::Interactions(InteractionsCommand::Respond(a)) = cli.command else {
            panic!("not respond");
        };
        assert_eq!(
            (a.nonce.as_str(), a.choice.as_deref()),
            ("-abc", Some("deny"))
        );
    }
}
