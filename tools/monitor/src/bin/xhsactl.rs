//! `xhsactl`: list and steer the queues of every process using libxhsa, through the per-GPU
//! boards (a thin front end over the `xhsa_monitor` library).
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use xhsa_monitor::control::{self, Request};

#[derive(Parser)]
#[command(
    name = "xhsactl",
    version,
    about = "List and steer the queues of processes using libxhsa (through the per-GPU boards)"
)]
struct Cli {
    /// Directory of the boards (default: XHSA_BOARD_DIR, else /dev/shm)
    #[arg(long, global = true, value_name = "DIR")]
    board_dir: Option<PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List every GPU, process and queue
    List {
        /// One JSON snapshot instead of the table
        #[arg(long)]
        json: bool,
    },
    /// Run a process's queues (or one queue) at LEVEL (-256..=255), or `reset` to the priority they asked for
    #[command(allow_negative_numbers = true)]
    SetPriority {
        /// PID or PID:QUEUE
        target: String,
        /// -256..=255 (higher is more urgent) or `reset`
        level: String,
    },
    /// Pause a process: hold its packets and take its queues off the GPU until `resume`
    Pause { pid: String },
    /// Resume a paused process
    Resume { pid: String },
    /// Give a process another sharing policy: how its lower-priority queues share the GPU with
    /// higher work (strict, weights:HIGH:LOW, slo:K, cap:PCT; see XHSA_POLICY)
    Policy {
        /// PID
        pid: String,
        /// strict, weights:HIGH:LOW, slo:K or cap:PCT
        policy: String,
    },
    /// Check an XHSA_CONFIG file: every problem with its line, column, key and the accepted forms
    CheckConfig { file: PathBuf },
    /// Serve Prometheus metrics (families xhsa_*) on http://ADDR/metrics
    Metrics {
        /// Address to listen on, e.g. 127.0.0.1:9464
        #[arg(long, value_name = "ADDR")]
        listen: String,
    },
    /// Board maintenance
    Board {
        #[command(subcommand)]
        command: BoardCommand,
    },
}

#[derive(Subcommand)]
enum BoardCommand {
    /// Clear dead processes' slots; remove boards no live process uses
    Clean {
        /// Also remove boards of another layout version (another xhsa release)
        #[arg(long)]
        force: bool,
    },
}

fn fail(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("xhsactl: {msg}");
    ExitCode::from(1)
}

fn steer(dir: &std::path::Path, target: &str, req: Result<Request, String>) -> ExitCode {
    let target = match control::parse_target(target) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let req = match req {
        Ok(r) => r,
        Err(e) => return fail(e),
    };
    match control::send(dir, target, req) {
        Ok(outcomes) => {
            let mut ok = true;
            for o in outcomes {
                match o.result {
                    Ok(what) => println!("gpu {} pid {} queue {}: {what}", o.node, o.pid, o.queue),
                    Err(why) => {
                        ok = false;
                        eprintln!("xhsactl: gpu {} pid {} queue {}: {why}", o.node, o.pid, o.queue);
                    }
                }
            }
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => fail(e),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let dir = cli.board_dir.unwrap_or_else(xhsa_monitor::default_board_dir);
    match cli.command {
        Command::List { json } => {
            let snap = xhsa_monitor::snapshot::take(&dir);
            if json {
                println!("{}", xhsa_monitor::json::render(&snap));
            } else {
                print!("{}", xhsa_monitor::text::render(&snap));
            }
            ExitCode::SUCCESS
        }
        Command::SetPriority { target, level } => {
            steer(&dir, &target, control::parse_level(&level))
        }
        Command::Pause { pid } => steer(&dir, &pid, Ok(Request::Pause)),
        Command::Resume { pid } => steer(&dir, &pid, Ok(Request::Resume)),
        Command::Policy { pid, policy } => {
            if pid.contains(':') {
                return fail(format!(
                    "`{pid}`: a sharing policy is a process's, for all its queues: expected a PID"
                ));
            }
            steer(&dir, &pid, control::parse_policy(&policy))
        }
        Command::CheckConfig { file } => {
            let text = match std::fs::read_to_string(&file) {
                Ok(t) => t,
                Err(e) => return fail(format!("{}: cannot read it: {e}", file.display())),
            };
            let problems = xhsa_monitor::config_check::check(&text, &file.display().to_string());
            if problems.is_empty() {
                println!("{}: valid", file.display());
                return ExitCode::SUCCESS;
            }
            for p in &problems {
                match p.at {
                    Some((l, c)) => eprintln!("{}:{l}:{c}: {}", file.display(), Problem(p)),
                    None => eprintln!("{}: {}", file.display(), Problem(p)),
                }
            }
            eprintln!("xhsactl: {}: {} problem(s)", file.display(), problems.len());
            ExitCode::from(1)
        }
        Command::Metrics { listen } => {
            let listener = match std::net::TcpListener::bind(&listen) {
                Ok(l) => l,
                Err(e) => {
                    return fail(format!(
                    "cannot listen on {listen:?}: {e} (expected HOST:PORT, e.g. 127.0.0.1:9464)"
                ))
                }
            };
            let addr = listener.local_addr().map(|a| a.to_string()).unwrap_or(listen);
            eprintln!(
                "xhsactl: serving metrics of the boards in {} on http://{addr}/metrics",
                dir.display()
            );
            xhsa_monitor::metrics::serve(listener, &dir)
        }
        Command::Board { command: BoardCommand::Clean { force } } => {
            match control::clean(&dir, force) {
                Ok(lines) => {
                    for l in lines {
                        println!("{l}");
                    }
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
    }
}

/// A problem without its position (printed before it).
struct Problem<'a>(&'a xhsa_monitor::config_check::Problem);

impl std::fmt::Display for Problem<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let p = xhsa_monitor::config_check::Problem { at: None, ..self.0.clone() };
        p.fmt(f)
    }
}
