//! The `garuda` binary: the stdio server and the offline commands.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};

use garuda::front::native::NativeFront;
use garuda::rpc::{self, ServeEnd, ServerConfig};
use garuda_core::config::{self, Config};

mod demo;
mod probe;

/// Garuda: a context engine for coding agents.
///
/// Editors start `garuda serve` (or plain `garuda` with a pipe on stdin) and speak JSON-RPC 2.0
/// over stdio, in LSP `Content-Length` framing or newline-delimited JSON. See protocol/README.md.
#[derive(Parser, Debug)]
#[command(name = "garuda", version, about, long_about = None)]
struct Cli {
    /// Write logs to this file instead of stderr (stdout carries only protocol messages).
    #[arg(long, global = true, value_name = "PATH")]
    log_file: Option<PathBuf>,
    /// Log filter, e.g. `info`, `garuda=debug` (default: `warn`, or `GARUDA_LOG`).
    #[arg(long, global = true, value_name = "FILTER")]
    log_level: Option<String>,
    /// Use this config file instead of `$XDG_CONFIG_HOME/garuda/config.toml`.
    #[arg(long, global = true, value_name = "PATH")]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve JSON-RPC 2.0 on stdin/stdout (what an editor starts).
    Serve {
        /// Largest accepted frame in bytes (default 64 MiB).
        #[arg(long, value_name = "BYTES")]
        max_frame_bytes: Option<usize>,
    },
    /// Assemble and print the system prompt for a folder, offline; the report goes to stderr.
    Prompt {
        /// The workspace folder.
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Print `{system, sha256, sections, warnings}` as JSON on stdout instead.
        #[arg(long)]
        json: bool,
        /// Turn on a line for an external tool (codeIndex=lookup|all, web); repeatable. Lines about commands and Garuda's own tools follow the session's real state.
        #[arg(long = "feature", value_name = "NAME")]
        features: Vec<String>,
        /// The model named in the identity line.
        #[arg(long, value_name = "SPEC")]
        model: Option<String>,
    },
    /// Run one agent turn headless and print the answer.
    ///
    /// The prompt is the PROMPT argument; `-` (or no PROMPT with a pipe on stdin) reads it
    /// from stdin; with a PROMPT, piped stdin is appended to it as context. A prompt that
    /// begins with `-` goes after `--`.
    ///
    /// Exit codes: 0 done, 1 the turn failed (provider error), 2 usage or configuration error,
    /// 3 stopped because a tool call needed approval and no one could be asked (no terminal;
    /// use --policy), 4 the answer did not match --output-schema (after one repair request),
    /// 5 the step limit was reached (--max-turns, or the built-in 50), 6 --max-budget-usd was
    /// reached, 130 cancelled (Ctrl-C, SIGINT), 143 ended by SIGTERM.
    Exec {
        /// Model spec, e.g. anthropic/claude-sonnet-4-5, ollama/qwen3-coder, replay:PATH (default: `model` in config.toml).
        #[arg(long, value_name = "SPEC")]
        model: Option<String>,
        /// Print every event as one JSON object per line (the `turn/update` events); the last is `finished`.
        #[arg(long)]
        json: bool,
        /// Approval policy: ask, auto-edit, full-auto, plan (default: approval.policy in config.toml).
        #[arg(long, value_name = "P")]
        policy: Option<String>,
        /// Write the provider's responses to a replay cassette.
        #[arg(long, value_name = "PATH")]
        record: Option<PathBuf>,
        /// Continue this session instead of starting one (its workspace and model stay).
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// Continue the workspace's latest session.
        #[arg(long = "continue", short = 'c', conflicts_with = "session")]
        continue_latest: bool,
        /// Start a new session from a copy of this session's history; the original stays as it is.
        #[arg(long, value_name = "ID", conflicts_with_all = ["session", "continue_latest"])]
        fork: Option<String>,
        /// A JSON Schema file: the final answer is asked for in that shape, validated (one repair request), and printed alone on stdout (with --json: `finished.structuredOutput`).
        #[arg(long, value_name = "FILE")]
        output_schema: Option<PathBuf>,
        /// Most model requests in this run; reaching it stops with stop reason `max_turns` (exit 5).
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
        max_turns: Option<u32>,
        /// No further model request once the run's cost reaches this many US dollars (exit 6); needs the model's prices in config.toml.
        #[arg(long, value_name = "USD")]
        max_budget_usd: Option<f64>,
        /// `text` (the prompt) or `stream-json`: one user message per line on stdin, each a turn of the same session (needs --json).
        #[arg(long, value_name = "FORMAT", default_value = "text")]
        input_format: InputFormat,
        /// The workspace folder (default: current folder) followed by the prompt; a single argument is the prompt.
        #[arg(num_args = 0..=2, value_name = "[DIR] [PROMPT|-]")]
        args: Vec<String>,
    },
    /// An offline tour: starts `garuda serve`, opens DIR, shows the instruction files found and
    /// the prompt, runs turns with a scripted model written from what is in DIR (one approval,
    /// answered by the demo), compacts, and says what to try next. DIR is not changed.
    Demo {
        /// The folder to open as a workspace.
        #[arg(default_value = ".")]
        dir: PathBuf,
    },
    /// Garuda's MCP client against one server: start it, list its tools, call each once
    /// (arguments from the schema), print JSON lines. For the MCP conformance suite.
    #[command(hide = true)]
    McpProbe {
        /// A Streamable HTTP URL, or a stdio server's command and arguments (after `--`).
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        target: Vec<String>,
    },
    /// Sign in to (or out of) an MCP server of the config that asks for OAuth sign-in.
    Mcp {
        #[command(subcommand)]
        action: McpAction,
    },
    /// Check the setup offline: the config file, the state folder, and each MCP server's
    /// transport and sign-in.
    Doctor,
    /// Serve the Agent Client Protocol v1 on stdin/stdout (for Zed, JetBrains and other ACP editors).
    ///
    /// Sessions use `$GARUDA_MODEL` when set, else the configured `model`.
    Acp,
    /// Let a workspace's own hooks run: its `.garuda/config.toml` `[hooks]` and, with
    /// `[hooks] import = ["claude"]`, its `.claude/settings.json` and `.claude/settings.local.json`.
    ///
    /// Hooks run outside the command sandbox with your rights: trust only a folder whose hooks
    /// you have read. `trusted.toml` beside the config file records the folder (its identity,
    /// not only its path) and exactly the hooks listed here; when they change they wait for
    /// `garuda trust` again (protocol/HOOKS.md).
    Trust {
        /// The workspace folder (exactly this folder, not the ones below it).
        #[arg(default_value = ".")]
        dir: PathBuf,
        /// Print the trusted folders instead (and old entries that need `garuda trust` again).
        #[arg(long)]
        list: bool,
    },
    /// Print the JSON Schema of the native protocol (protocol/schema.json).
    Schema {
        /// Print the method table as Markdown instead (the list in protocol/README.md).
        #[arg(long)]
        methods: bool,
    },
}

/// `garuda mcp` actions.
#[derive(Subcommand, Debug)]
enum McpAction {
    /// Sign in to server NAME now: prints the sign-in page's URL and waits for the browser
    /// (or runs the headless grant configured in its `oauth` table).
    Login {
        /// The server's name in `[mcp_servers.NAME]`.
        name: String,
    },
    /// Forget the tokens and client kept for server NAME.
    Logout {
        /// The server's name in `[mcp_servers.NAME]`.
        name: String,
    },
}

/// How `garuda exec` reads its user messages.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum InputFormat {
    /// The PROMPT argument (or stdin), one turn.
    Text,
    /// JSON lines on stdin, one turn each.
    StreamJson,
}

fn init_logs(cli: &Cli) -> anyhow::Result<()> {
    let filter = cli
        .log_level
        .clone()
        .or_else(|| std::env::var("GARUDA_LOG").ok())
        .unwrap_or_else(|| "warn".to_string());
    let filter = tracing_subscriber::EnvFilter::try_new(&filter).context("invalid --log-level")?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match &cli.log_file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open log file {}", path.display()))?;
            builder.with_ansi(false).with_writer(Arc::new(file)).init();
        }
        None => builder
            .with_ansi(stderr_wants_colour(
                std::io::stderr().is_terminal(),
                std::env::var_os("NO_COLOR"),
            ))
            .with_writer(std::io::stderr)
            .init(),
    }
    Ok(())
}

/// Colour only for a person at a terminal: an editor reading the pipe would show the escape
/// codes as text. `NO_COLOR` set to anything non-empty turns it off (no-color.org).
fn stderr_wants_colour(is_terminal: bool, no_color: Option<std::ffi::OsString>) -> bool {
    is_terminal && no_color.is_none_or(|v| v.is_empty())
}

/// The config file a server reads, checked: it never stops the server. Each problem goes to
/// the log now and to the client at `initialize`.
fn check_config(cli: &Cli) -> (config::Checked, Option<PathBuf>) {
    let (checked, path) = match &cli.config {
        Some(p) => (Config::check_file(p), Some(p.clone())),
        None => Config::check_user(),
    };
    for p in &checked.problems {
        match p.severity {
            config::Severity::Warning => tracing::warn!("config: {p}"),
            config::Severity::Error => tracing::error!(
                "config: {p} (the server runs; sessions start once the file is fixed)"
            ),
        }
    }
    (checked, path)
}

fn load_config(cli: &Cli) -> anyhow::Result<Config> {
    let cfg = match &cli.config {
        Some(p) => Config::load_file(p)?,
        None => Config::load_user()?,
    };
    Ok(cfg)
}

/// Takes provider keys (and anything named like a credential) out of the environment and
/// every variable off the allow-list out of the block `/proc/<server>/environ` shows, before
/// any thread or command exists, and makes the process non-dumpable, so no command of an
/// ordinary user can read them from `/proc/<server>/environ` or memory; root still can
/// (see garuda_core::sandbox::secrets).
fn keep_secrets_from_commands(cli: &Cli) {
    let mut names: Vec<String> = vec!["ANTHROPIC_API_KEY".into(), "OPENAI_API_KEY".into()];
    // A config error is reported by the command itself; here it only means no extra names.
    if let Ok(cfg) = load_config(cli) {
        names.extend(cfg.providers.values().filter_map(|p| p.api_key_env.clone()));
        // MCP servers' secrets: static tokens, OAuth client secrets and workload JWTs.
        for s in cfg.mcp_servers.values() {
            names.extend(s.bearer_token_env.clone());
            names.extend(s.oauth.client_secret_env.clone());
            names.extend(s.oauth.assertion_env.clone());
        }
    }
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    // SAFETY: called first thing in main, before the runtime or any other thread starts, so
    // nothing else reads or writes the environment meanwhile.
    let secrets = unsafe { garuda_core::sandbox::take_secrets(&names) };
    garuda_core::sandbox::install_secrets(secrets);
    if let Err(e) = garuda_core::sandbox::harden_process() {
        tracing::debug!("could not make the process non-dumpable: {e}");
    }
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    keep_secrets_from_commands(&cli);
    if let Err(e) = init_logs(&cli) {
        eprintln!("garuda: {e:#}");
        return std::process::ExitCode::from(2);
    }
    match run(cli) {
        Ok(code) => std::process::ExitCode::from(code),
        Err(e) => {
            eprintln!("garuda: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<u8> {
    let command = match cli.command {
        Some(ref c) => c,
        None if !std::io::stdin().is_terminal() => &Command::Serve {
            max_frame_bytes: None,
        },
        None => {
            use clap::CommandFactory;
            Cli::command().print_help()?;
            return Ok(0);
        }
    };
    match command {
        Command::Serve { max_frame_bytes } => serve(check_config(&cli), *max_frame_bytes),
        Command::Prompt {
            dir,
            json,
            features,
            model,
        } => garuda_prompt(load_config(&cli)?, dir, *json, features, model.as_deref()),
        Command::Exec {
            model,
            json,
            policy,
            record,
            session,
            continue_latest,
            fork,
            output_schema,
            max_turns,
            max_budget_usd,
            input_format,
            args,
        } => exec(
            load_config(&cli)?,
            ExecArgs {
                model: model.clone(),
                json: *json,
                policy: policy.clone(),
                record: record.clone(),
                session: session.clone(),
                continue_latest: *continue_latest,
                fork: fork.clone(),
                output_schema: output_schema.clone(),
                max_turns: *max_turns,
                max_budget_usd: *max_budget_usd,
                input_format: *input_format,
                args: args.clone(),
                config: cli.config.clone(),
            },
        ),
        Command::Demo { dir } => demo::run(dir),
        Command::McpProbe { target } => probe::run(target),
        Command::Mcp { action } => mcp(&cli, action),
        Command::Doctor => doctor(&cli),
        Command::Acp => acp(check_config(&cli)),
        Command::Trust { dir, list } => trust(&cli, dir, *list),
        Command::Schema { methods: true } => {
            print!("{}", garuda_protocol::methods::methods_markdown());
            Ok(0)
        }
        Command::Schema { methods: false } => {
            println!(
                "{}",
                serde_json::to_string_pretty(&garuda_protocol::generate_schema())?
            );
            Ok(0)
        }
    }
}

/// The sign-in of the config's MCP server `name`, with tokens in the state folder.
fn server_auth(
    cli: &Cli,
    name: &str,
    door: Arc<dyn garuda_core::mcp::oauth::SignInDoor>,
) -> anyhow::Result<garuda_core::mcp::oauth::ServerAuth> {
    use garuda_core::mcp::oauth::{AuthContext, FileStore, ServerAuth};
    let cfg = load_config(cli)?;
    let Some(server) = cfg.mcp_servers.get(name) else {
        let known: Vec<&str> = cfg.mcp_servers.keys().map(String::as_str).collect();
        anyhow::bail!(
            "no MCP server `{name}` in the config (servers: {})",
            if known.is_empty() {
                "none".to_string()
            } else {
                known.join(", ")
            }
        );
    };
    let Some(url) = &server.url else {
        anyhow::bail!("MCP server `{name}` is a stdio server: there is nothing to sign in to");
    };
    let ctx = AuthContext {
        door,
        store: Arc::new(FileStore::new(config::state_dir().join("mcp-auth"))),
        client_secret: None,
        assertion: None,
        client_key_pem: None,
    };
    Ok(ServerAuth::new(name, url, server.oauth.clone(), ctx)?)
}

/// `garuda mcp login NAME` and `garuda mcp logout NAME`.
fn mcp(cli: &Cli, action: &McpAction) -> anyhow::Result<u8> {
    use garuda_core::mcp::oauth::PrintUrl;
    let rt = runtime()?;
    match action {
        McpAction::Login { name } => {
            let auth = server_auth(cli, name, Arc::new(PrintUrl))?;
            match rt.block_on(auth.sign_in()) {
                Ok(()) => {
                    eprintln!(
                        "garuda: signed in to MCP server `{name}`; the token is kept in {} (mode 0600)",
                        config::state_dir().join("mcp-auth").display()
                    );
                    Ok(0)
                }
                Err(e) => {
                    eprintln!("garuda: {e}");
                    Ok(1)
                }
            }
        }
        McpAction::Logout { name } => {
            let auth = server_auth(cli, name, Arc::new(PrintUrl))?;
            if rt.block_on(auth.sign_out())? {
                eprintln!(
                    "garuda: signed out of MCP server `{name}` (its tokens and client are forgotten)"
                );
            } else {
                eprintln!("garuda: no sign-in was kept for MCP server `{name}`");
            }
            Ok(0)
        }
    }
}

/// `garuda doctor`: what can be checked without a network, one line each.
fn doctor(cli: &Cli) -> anyhow::Result<u8> {
    use garuda_core::mcp::McpTransport;
    use garuda_core::mcp::oauth::{FileStore, describe};
    let (checked, path) = check_config(cli);
    let path = path
        .or_else(Config::user_path)
        .map_or_else(|| "(none)".to_string(), |p| p.display().to_string());
    let mut bad = false;
    if checked.problems.is_empty() {
        println!("config: {path}: ok");
    }
    for p in &checked.problems {
        bad |= p.severity == config::Severity::Error;
        println!("config: {p}");
    }
    println!("state: {}", config::state_dir().display());
    let cfg = checked.config.unwrap_or_default();
    let store = FileStore::new(config::state_dir().join("mcp-auth"));
    for (name, server) in &cfg.mcp_servers {
        let line = match server.transport(name) {
            Err(e) => {
                bad = true;
                format!("{e}")
            }
            Ok(_) if !server.enabled => "disabled".to_string(),
            Ok(McpTransport::Stdio { command, .. }) => format!("stdio `{command}`"),
            Ok(McpTransport::Http { url }) => {
                let auth = if let Some(var) = &server.bearer_token_env {
                    format!("static bearer token from `{var}`")
                } else if !server.oauth.is_enabled() {
                    "sign-in turned off".to_string()
                } else {
                    match describe(&store, &url) {
                        s if s == "not signed in" => format!(
                            "not signed in (signs in when the server asks; `garuda mcp login {name}` to do it now)"
                        ),
                        s => s,
                    }
                };
                format!("{url}: {auth}")
            }
        };
        println!("mcp server `{name}`: {line}");
    }
    Ok(if bad { 1 } else { 0 })
}

/// `garuda trust DIR` (and `--list`): the trust file beside the config file in use.
fn trust(cli: &Cli, dir: &Path, list: bool) -> anyhow::Result<u8> {
    use garuda_core::hooks::{HookSet, TrustList};
    let cfg = load_config(cli)?;
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let trusted = TrustList::for_settings(&cfg.hooks, home.as_deref())?;
    if list {
        // stdout: one trusted folder a line, for scripts; old entries that let nothing run
        // any more go to stderr with what to do.
        for e in trusted.entries() {
            println!("{}", e.path.display());
        }
        for (p, source) in trusted.outdated() {
            eprintln!(
                "{} (in {source}) records no hooks and lets none run: run `garuda trust {}`",
                p.display(),
                p.display()
            );
        }
        return Ok(0);
    }
    let file = cfg
        .hooks
        .trust_file
        .clone()
        .context("no config folder (set XDG_CONFIG_HOME or HOME, or pass --config)")?;
    // The folder is opened once: its identity, its hooks and what is recorded all come from
    // this one open folder, whatever happens to the path meanwhile.
    let fs = garuda_core::fsroot::Root::open(dir)?;
    let root = fs.path().to_path_buf();
    let ws_cfg = match fs.read_text(
        Path::new(garuda_core::workspace::WORKSPACE_CONFIG),
        256 * 1024,
    ) {
        Ok(read) => {
            let path = root.join(garuda_core::workspace::WORKSPACE_CONFIG);
            cfg.with_workspace(&read.text, &path)?.0
        }
        Err(_) => cfg.clone(),
    };
    let set = HookSet::load(ws_cfg.hook_config(), &fs, &trusted, home.as_deref());
    let hooks = set.workspace_hooks();
    let added = TrustList::add(&file, &fs, hooks)?;
    if added {
        eprintln!("trusted {} (in {})", root.display(), file.display());
    } else {
        eprintln!(
            "{} was trusted already with these hooks ({})",
            root.display(),
            file.display()
        );
    }
    // Say exactly what was recorded, so trusting is never blind: these hooks and no others
    // may run; any change waits for `garuda trust` again.
    if hooks.is_empty() {
        eprintln!("the workspace defines no hooks; any it adds later wait for `garuda trust`");
    } else {
        eprintln!("its hooks, which run outside the sandbox with your rights:");
    }
    for h in hooks.hooks() {
        eprintln!("  {h}");
    }
    // Loaded again under the new trust, so hooks that cannot run for another reason (an
    // unknown event, a bad matcher) say so; trust was checked first before.
    let now = TrustList::for_settings(&cfg.hooks, home.as_deref())?;
    let set = HookSet::load(ws_cfg.hook_config(), &fs, &now, home.as_deref());
    for s in set.skipped().iter().filter(|s| s.origin.is_workspace()) {
        eprintln!(
            "  (does not run: {} {}: {})",
            s.event,
            s.command.as_deref().unwrap_or("-"),
            s.reason
        );
    }
    for p in set.problems() {
        eprintln!("  {p}");
    }
    Ok(0)
}

/// One thread drives all IO: every request is async or hands its blocking work to the blocking
/// pool, so a second worker would only add cross-thread wake-ups to each round trip.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?)
}

type Input = Box<dyn tokio::io::AsyncRead + Unpin + Send>;
type Output = Box<dyn tokio::io::AsyncWrite + Unpin + Send>;

/// stdin and stdout for a server. When they are pipes (an editor's child process) they are
/// driven by epoll directly; tokio's own stdio goes through its blocking thread pool, which
/// adds two thread hand-offs to every round trip.
fn stdio() -> (Input, Output) {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    let dup = |fd: std::os::fd::BorrowedFd<'_>| fd.try_clone_to_owned().ok();
    let input: Input = match dup(std::io::stdin().as_fd()).map(pipe::Receiver::from_owned_fd) {
        Some(Ok(r)) => Box::new(r),
        _ => Box::new(tokio::io::stdin()),
    };
    let output: Output = match dup(std::io::stdout().as_fd()).map(pipe::Sender::from_owned_fd) {
        Some(Ok(w)) => Box::new(w),
        _ => Box::new(tokio::io::stdout()),
    };
    (input, output)
}

/// Probes the sandbox on a thread of its own (one sandboxed `true`, a few milliseconds), so the
/// first `workspace/open` finds the answer ready instead of waiting for it.
fn probe_sandbox_early() {
    let _ = std::thread::Builder::new()
        .name("garuda-sandbox-probe".into())
        .spawn(|| {
            garuda_core::sandbox::probe();
        });
}

fn serve(
    (checked, path): (config::Checked, Option<PathBuf>),
    max_frame_bytes: Option<usize>,
) -> anyhow::Result<u8> {
    probe_sandbox_early();
    let server_config = server_config(&checked, max_frame_bytes);
    let rt = runtime()?;
    let front = NativeFront::checked(checked, config::state_dir(), path);
    let engine = front.engine().clone();
    let code = rt.block_on(async move {
        let (input, output) = stdio();
        let stop = front.stop.clone();
        let serving = rpc::serve(input, output, front, server_config);
        tokio::select! {
            end = serving => match end {
                ServeEnd::Eof => 0,
                ServeEnd::Exit(code) => code,
            },
            _ = stop.cancelled() => 0,
            code = terminated() => code,
        }
    });
    rt.block_on(engine.end_sessions_at_exit());
    // Whatever ended the server, no command outlives it.
    garuda_core::sandbox::kill_all();
    // Blocking stdin reads and watcher threads must not keep the process alive.
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    Ok(code.clamp(0, 255) as u8)
}

/// The transport's limits from the user's config, read once (a file with errors leaves the
/// defaults); the same for `serve` and `acp`.
fn server_config(checked: &config::Checked, max_frame_bytes: Option<usize>) -> ServerConfig {
    let server = checked
        .config
        .as_ref()
        .map(|c| c.server.clone())
        .unwrap_or_default();
    ServerConfig {
        max_frame_bytes: max_frame_bytes.unwrap_or(server.max_frame_bytes),
        max_in_flight: server.max_in_flight,
        max_long_in_flight: server.max_long_in_flight,
        max_waiting: server.max_waiting,
        max_waiting_bytes: server.max_waiting_bytes,
        overloaded: garuda::rpc::RpcError::new(
            garuda_protocol::codes::OVERLOADED,
            "overloaded, retry",
        ),
        ..ServerConfig::default()
    }
}

/// Resolves when SIGTERM, SIGINT or SIGHUP arrives, with the exit code a shell would report.
async fn terminated() -> i32 {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int), Ok(mut hup)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
        signal(SignalKind::hangup()),
    ) else {
        // Without handlers the default actions apply; the parent-death signal still ends
        // sandboxed commands.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => 143,
        _ = int.recv() => 130,
        _ = hup.recv() => 129,
    }
}

fn acp((checked, path): (config::Checked, Option<PathBuf>)) -> anyhow::Result<u8> {
    probe_sandbox_early();
    let rt = runtime()?;
    let model = std::env::var(garuda::front::acp::MODEL_ENV)
        .ok()
        .filter(|m| !m.is_empty());
    let server_config = server_config(&checked, None);
    let front = garuda::front::acp::AcpFront::checked(checked, config::state_dir(), model, path);
    let engine = front.engine().clone();
    let code = rt.block_on(async move {
        let (input, output) = stdio();
        tokio::select! {
            end = rpc::serve(input, output, front, server_config) => match end {
                ServeEnd::Eof => 0,
                ServeEnd::Exit(code) => code,
            },
            code = terminated() => code,
        }
    });
    rt.block_on(engine.end_sessions_at_exit());
    garuda_core::sandbox::kill_all();
    // Blocking stdin reads and watcher threads must not keep the process alive.
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    Ok(code.clamp(0, 255) as u8)
}

/// `garuda exec`'s options.
struct ExecArgs {
    model: Option<String>,
    json: bool,
    policy: Option<String>,
    record: Option<PathBuf>,
    session: Option<String>,
    continue_latest: bool,
    fork: Option<String>,
    output_schema: Option<PathBuf>,
    max_turns: Option<u32>,
    max_budget_usd: Option<f64>,
    input_format: InputFormat,
    args: Vec<String>,
    /// `--config`, to name the file in messages.
    config: Option<PathBuf>,
}

/// Reads stdin for `garuda exec`: always when the prompt is to come from it, else only when
/// it is a pipe or a file (never a terminal, `/dev/null` or an inherited socket).
fn exec_stdin(prompt_arg: Option<&str>) -> anyhow::Result<Option<String>> {
    use std::io::Read;
    let stdin = std::io::stdin();
    let wanted = match prompt_arg {
        None => !stdin.is_terminal(),
        Some("-") => true,
        Some(_) => rustix::fs::fstat(&stdin).is_ok_and(|st| {
            matches!(
                rustix::fs::FileType::from_raw_mode(st.st_mode),
                rustix::fs::FileType::Fifo | rustix::fs::FileType::RegularFile
            )
        }),
    };
    if !wanted {
        return Ok(None);
    }
    let mut bytes = Vec::new();
    stdin
        .lock()
        .read_to_end(&mut bytes)
        .context("cannot read stdin")?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

fn exec(cfg: Config, a: ExecArgs) -> anyhow::Result<u8> {
    use garuda::front::exec::{self as fx, EXIT_USAGE, OutputSchema};
    use garuda_core::engine::{Engine, EngineError, ResumeSession};
    // Bubblewrap's probe (or its cache check) runs beside the config, workspace, git state
    // and prompt work below instead of in front of the first request.
    probe_sandbox_early();
    let usage = |m: String| {
        eprintln!("garuda exec: {m}");
        Ok(EXIT_USAGE)
    };
    let stream = a.input_format == InputFormat::StreamJson;
    let (dir, prompt_arg) = match (a.args.as_slice(), stream) {
        ([], _) => (None, None),
        ([dir], true) => (Some(PathBuf::from(dir)), None),
        ([prompt], false) => (None, Some(prompt.as_str())),
        ([dir, prompt], false) => (Some(PathBuf::from(dir)), Some(prompt.as_str())),
        (_, true) => {
            return usage(
                "--input-format stream-json reads the messages from stdin: usage: garuda exec --json --input-format stream-json [DIR]".into(),
            );
        }
        _ => return usage("usage: garuda exec [DIR] PROMPT".into()),
    };
    if stream && !a.json {
        return usage(
            "--input-format stream-json needs --json (each message's events end with its `finished` line)".into(),
        );
    }
    let policy = match a
        .policy
        .as_deref()
        .map(str::parse::<garuda_core::tools::Policy>)
        .transpose()
    {
        Ok(p) => p,
        Err(e) => return usage(format!("--policy: {e} (config key: approval.policy)")),
    };
    if let Some(b) = a.max_budget_usd
        && !(b.is_finite() && b > 0.0)
    {
        return usage(format!(
            "--max-budget-usd {b}: give a positive amount of US dollars"
        ));
    }
    let schema = match a
        .output_schema
        .as_deref()
        .map(OutputSchema::load)
        .transpose()
    {
        Ok(s) => s,
        Err(m) => return usage(m),
    };
    let prompt = if stream {
        None
    } else {
        match fx::compose_prompt(prompt_arg, exec_stdin(prompt_arg)?.as_deref()) {
            Ok(p) => Some(p),
            Err(m) => return usage(m),
        }
    };
    let config_file = a.config.clone().or_else(Config::user_path).map_or_else(
        || "$XDG_CONFIG_HOME/garuda/config.toml".to_string(),
        |p| p.display().to_string(),
    );
    let rt = runtime()?;
    let code = rt.block_on(async move {
        let engine = Engine::new(cfg, config::state_dir(), Arc::new(|_| {}), false);
        // The person at the terminal opens sign-in pages; the wait has the server's deadline.
        engine.set_sign_in_door(Arc::new(garuda_core::mcp::oauth::PrintUrl));
        if a.session.is_none() && a.fork.is_none() && !a.continue_latest {
            engine.read_git_ahead(dir.as_deref().unwrap_or(Path::new(".")));
        }
        let not_found = |id: &str, flag: &str| {
            format!(
                "{flag}: no session {id} (sessions are kept in {})",
                config::state_dir().join("sessions").display()
            )
        };
        let resume = match (&a.session, &a.fork, a.continue_latest) {
            (Some(id), _, _) => Some(id.clone()),
            (None, Some(id), _) => match engine.fork_session(id, None) {
                Ok(new_id) => Some(new_id),
                Err(EngineError::Store(e @ garuda_core::session::StoreError::InvalidId(_))) => {
                    return usage(format!("--fork: {e}"));
                }
                Err(
                    EngineError::SessionNotFound(_)
                    | EngineError::Store(garuda_core::session::StoreError::NotFound(_)),
                ) => return usage(not_found(id, "--fork")),
                Err(e) => return Err(e.into()),
            },
            (None, None, true) => {
                let ws = engine.open_workspace(dir.as_deref().unwrap_or(Path::new(".")))?;
                match engine.latest_session(&ws.id)? {
                    Some(id) => Some(id),
                    None => {
                        return usage(format!(
                            "--continue: no session to continue in {}; run without --continue to start one",
                            ws.root.path().display()
                        ));
                    }
                }
            }
            (None, None, false) => None,
        };
        let flag = if a.fork.is_some() { "--fork" } else { "--session" };
        let (live, warnings) = match resume {
            Some(id) => {
                let req = ResumeSession {
                    policy,
                    record: a.record.clone(),
                    ..ResumeSession::default()
                };
                let (live, warnings) = match engine.resume_session(&id, req) {
                    Ok(s) => s,
                    Err(EngineError::Store(
                        e @ garuda_core::session::StoreError::InvalidId(_),
                    )) => return usage(format!("{flag}: {e}")),
                    Err(
                        EngineError::SessionNotFound(_)
                        | EngineError::Store(garuda_core::session::StoreError::NotFound(_)),
                    ) => return usage(not_found(&id, flag)),
                    Err(e @ (EngineError::Config(_) | EngineError::NoModel | EngineError::Provider(_))) => {
                        eprintln!("garuda exec: {e}");
                        return Ok(EXIT_USAGE);
                    }
                    Err(e) => return Err(e.into()),
                };
                if let Some(m) = a.model.as_deref()
                    && m != live.model_spec()
                {
                    return usage(format!(
                        "--model {m}: session {id} uses {}; a session keeps its model (start a new one without {flag}/--continue)",
                        live.model_spec()
                    ));
                }
                if let Some(d) = &dir {
                    let ws = engine.open_workspace(d)?;
                    if ws.root.path() != live.workspace().root.path() {
                        return usage(format!(
                            "session {id} belongs to {}, not {}",
                            live.workspace().root.path().display(),
                            ws.root.path().display()
                        ));
                    }
                }
                (live, warnings)
            }
            None => match new_exec_session(&engine, dir.as_deref(), &a, policy, &config_file) {
                Ok(s) => s,
                Err(m) => return usage(m),
            },
        };
        for w in warnings {
            eprintln!("warning: {w}");
        }
        if a.max_budget_usd.is_some() && live.model().info.prices.is_none() {
            return usage(format!(
                "--max-budget-usd needs the prices of {m}: set input_price and output_price (US dollars per million tokens) under [models.\"{m}\"] in {config_file}",
                m = live.model_spec()
            ));
        }
        let run = fx::ExecRun {
            engine: &engine,
            live: &live,
            json: a.json,
            schema: schema.as_ref(),
            max_turns: a.max_turns,
            max_budget_usd: a.max_budget_usd,
            forked_from: a.fork.clone(),
            resumed: a.session.is_some() || a.continue_latest || a.fork.is_some(),
        };
        let inputs = match prompt {
            Some(p) => fx::Inputs::one(p),
            None => fx::Inputs::stdin_lines(),
        };
        let code = run.run(inputs, terminated()).await;
        // The answer is out; the notes the next `exec --continue` compacts from are not.
        engine.settle_memory(std::time::Duration::from_secs(120)).await;
        engine.end_sessions_at_exit().await;
        Ok(code)
    });
    // Whatever ended the run, no command outlives it.
    garuda_core::sandbox::kill_all();
    // A blocked stdin reader (stream-json) must not keep the process alive.
    rt.shutdown_timeout(std::time::Duration::from_millis(100));
    code
}

/// The session a plain `garuda exec` starts: the folder's workspace, `--model` or the
/// configured model. `Err`: a usage or configuration error, worded for the person.
fn new_exec_session(
    engine: &garuda_core::engine::Engine,
    dir: Option<&Path>,
    a: &ExecArgs,
    policy: Option<garuda_core::tools::Policy>,
    config_file: &str,
) -> Result<(Arc<garuda_core::turn::LiveSession>, Vec<String>), String> {
    use garuda_core::engine::{EngineError, NewSession};
    let ws = engine
        .open_workspace(dir.unwrap_or(Path::new(".")))
        .map_err(|e| e.to_string())?;
    let (model, source) = match (a.model.clone(), engine.configured_model(&ws)) {
        (Some(m), _) => {
            let source = format!("--model {m}: ");
            (m, source)
        }
        (None, Some(m)) => {
            let source = format!("`model = \"{m}\"` in {config_file}: ");
            (m, source)
        }
        (None, None) => {
            return Err(format!(
                "no model: pass --model SPEC (e.g. anthropic/claude-sonnet-4-5, ollama/qwen3-coder, or replay:PATH to play a recorded cassette offline) or set `model = \"...\"` in {config_file}"
            ));
        }
    };
    let req = NewSession {
        model: Some(model),
        policy,
        record: a.record.clone(),
        origin: garuda_core::session::SessionOrigin::Exec,
        ..Default::default()
    };
    engine.new_session(&ws.id, req).map_err(|e| match e {
        e @ (EngineError::Config(_) | EngineError::NoModel | EngineError::Provider(_)) => {
            format!("{source}{e}")
        }
        e => e.to_string(),
    })
}

fn garuda_prompt(
    cfg: Config,
    dir: &std::path::Path,
    json: bool,
    features: &[String],
    model: Option<&str>,
) -> anyhow::Result<u8> {
    let engine =
        garuda_core::engine::Engine::new(cfg, config::state_dir(), Arc::new(|_| {}), false);
    let ws = engine.open_workspace(dir)?;
    let mut opts = ws.default_options(model);
    for f in features {
        opts.features.enable(f)?;
    }
    let a = ws.assemble(&opts);
    if json {
        let sources = garuda::front::wire::assemble_out(&a).sources;
        let out = serde_json::json!({
            "system": a.system, "sha256": a.sha256, "sections": a.sections, "warnings": a.warnings,
            "sandbox": {
                "mode": ws.sandbox.mode.name(),
                "confined": ws.sandbox.confined(),
                "network": ws.sandbox.network,
                "commandsAsk": ws.facts.commands_ask,
                "description": ws.sandbox.describe(),
            },
            "sources": sources,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(0);
    }
    print!("{}", a.system);
    if !a.system.ends_with('\n') {
        println!();
    }
    eprintln!("\n--- report: sha256 {} ---", a.sha256);
    eprintln!(
        "{:<28} {:<22} {:>8} {:>7}  status",
        "section", "source", "bytes", "tokens"
    );
    for s in &a.sections {
        let status = match (&s.skipped, s.cut) {
            (Some(why), _) => format!("skipped: {why}"),
            (None, true) => format!("cut ({} chars missing)", s.missing_chars.unwrap_or(0)),
            (None, false) => "included".to_string(),
        };
        eprintln!(
            "{:<28} {:<22} {:>8} {:>7}  {}",
            s.kind,
            s.source.as_deref().unwrap_or("-"),
            s.bytes,
            s.tokens,
            status
        );
    }
    eprintln!("commands: {}", ws.sandbox.describe());
    if !a.sources.is_empty() {
        eprintln!(
            "\n{:<40} {:<7} {:<24} {:>8}  status",
            "source", "kind", "scope", "chars"
        );
    }
    for s in &a.sources {
        let status = match (&s.skipped, s.cut, s.in_force) {
            (Some(why), _, _) => format!("skipped: {why}"),
            (None, true, _) => format!("cut ({} chars missing)", s.missing_chars.unwrap_or(0)),
            (None, false, true) => "in the prompt".to_string(),
            (None, false, false) => "when a matching path is touched".to_string(),
        };
        let kind = format!("{:?}", s.kind).to_lowercase();
        eprintln!(
            "{:<40} {:<7} {:<24} {:>8}  {status}",
            s.path, kind, s.scope, s.chars
        );
    }
    for w in &a.warnings {
        eprintln!("warning: {w}");
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::stderr_wants_colour;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(stderr_wants_colour(true, None));
        assert!(stderr_wants_colour(true, Some("".into())));
        assert!(!stderr_wants_colour(true, Some("1".into())));
        assert!(!stderr_wants_colour(false, None));
    }
}
