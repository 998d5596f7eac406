//! `xhsa-top`: a live view of every libxhsa queue on the GPUs — per GPU, process and queue, its
//! priority, state, packets and preemptions — read from the per-GPU boards (a thin front end over
//! the `xhsa_monitor` library; ratatui over crossterm). `--once` prints one text snapshot,
//! `--json` one JSON snapshot.
#![forbid(unsafe_code)]

use clap::Parser;
use crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use ratatui::layout::{Constraint, Direction, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table, TableState};
use ratatui::Frame;
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use xhsa_monitor::snapshot::{Gpu, Process, Queue, Snapshot};
use xhsa_monitor::text::{ms, prio};

#[derive(Parser)]
#[command(
    name = "xhsa-top",
    version,
    about = "Live view of every libxhsa queue on the GPUs (per GPU, process and queue)"
)]
struct Cli {
    /// Print one text snapshot and exit
    #[arg(long, conflicts_with = "json")]
    once: bool,
    /// Print one JSON snapshot and exit
    #[arg(long)]
    json: bool,
    /// Refresh interval in seconds (0.1..=60)
    #[arg(short = 'd', long = "interval", value_name = "SECONDS", default_value = "1", value_parser = parse_interval)]
    interval: Duration,
    /// Show only processes whose pid or name contains TEXT
    #[arg(short = 'p', long = "filter", value_name = "TEXT")]
    filter: Option<String>,
    /// Directory of the boards (default: XHSA_BOARD_DIR, else /dev/shm)
    #[arg(long, value_name = "DIR")]
    board_dir: Option<PathBuf>,
}

fn parse_interval(text: &str) -> Result<Duration, String> {
    match text.trim().parse::<f64>() {
        Ok(s) if (0.1..=60.0).contains(&s) => Ok(Duration::from_secs_f64(s)),
        _ => Err(format!(
            "`{text}` is not an interval: expected seconds between 0.1 and 60, e.g. 0.5"
        )),
    }
}

/// The columns, and what sorts by them.
const COLUMNS: [&str; 12] = [
    "PID", "NAME", "QID", "PRIO", "REQ", "STATE", "PEND", "INFL", "DISP/s", "PRMT", "OFF ms",
    "P99 us",
];

struct RowData<'a> {
    gpu: &'a Gpu,
    process: &'a Process,
    queue: &'a Queue,
    rate: f64,
}

struct App {
    dir: PathBuf,
    interval: Duration,
    snap: Snapshot,
    /// (node, pid, queue) → (dispatched, when) of the previous snapshot, and the rates.
    prev: HashMap<(u32, u32, u64), u64>,
    prev_at: Option<Instant>,
    rates: HashMap<(u32, u32, u64), f64>,
    sort: usize,
    reverse: bool,
    filter: String,
    editing: Option<String>,
    detail: bool,
    table: TableState,
}

impl App {
    fn refresh(&mut self) {
        let snap = xhsa_monitor::snapshot::take(&self.dir);
        let now = Instant::now();
        let mut cur = HashMap::new();
        self.rates.clear();
        for (g, p, q) in snap.queues() {
            let key = (g.node, p.pid, q.id);
            cur.insert(key, q.dispatched);
            if let (Some(before), Some(at)) = (self.prev.get(&key), self.prev_at) {
                let secs = now.duration_since(at).as_secs_f64();
                if secs > 0.0 {
                    self.rates.insert(key, q.dispatched.saturating_sub(*before) as f64 / secs);
                }
            }
        }
        self.prev = cur;
        self.prev_at = Some(now);
        self.snap = snap;
    }

    fn rows(&self) -> Vec<RowData<'_>> {
        let f = self.filter.to_lowercase();
        let mut rows: Vec<RowData> = self
            .snap
            .queues()
            .filter(|(_, p, _)| {
                f.is_empty() || p.pid.to_string().contains(&f) || p.name.to_lowercase().contains(&f)
            })
            .map(|(g, p, q)| RowData {
                gpu: g,
                process: p,
                queue: q,
                rate: self.rates.get(&(g.node, p.pid, q.id)).copied().unwrap_or(0.0),
            })
            .collect();
        let key = |r: &RowData| -> (i64, String) {
            let q = r.queue;
            match self.sort {
                0 => (i64::from(r.process.pid), String::new()),
                1 => (0, r.process.name.clone()),
                2 => (q.id as i64, String::new()),
                3 => (q.priority.map_or(i64::MIN, |p| i64::from(p.level)), String::new()),
                4 => (q.requested.map_or(i64::MIN, |p| i64::from(p.level)), String::new()),
                5 => (0, q.state.name().to_string()),
                6 => (i64::from(q.pending), String::new()),
                7 => (i64::from(q.in_flight), String::new()),
                8 => ((r.rate * 1000.0) as i64, String::new()),
                9 => (q.preemptions as i64, String::new()),
                10 => (q.preempted_ns as i64, String::new()),
                _ => (q.latency_quantile_us(0.99).map_or(i64::MAX, |v| v as i64), String::new()),
            }
        };
        rows.sort_by(|a, b| {
            (a.gpu.node, key(a))
                .cmp(&(b.gpu.node, key(b)))
                .then(a.process.pid.cmp(&b.process.pid))
                .then(a.queue.id.cmp(&b.queue.id))
        });
        if self.reverse {
            rows.reverse();
        }
        rows
    }
}

/// The P99 dispatch-to-completion bound in µs: `-` before any completion, `>262k` when it falls
/// in the open last bucket.
fn p99(q: &Queue) -> String {
    match q.latency_quantile_us(0.99) {
        Some(v) => v.to_string(),
        None if q.latency.iter().any(|(_, n)| *n > 0) => ">262k".into(),
        None => "-".into(),
    }
}

fn state_style(q: &Queue) -> Style {
    use xhsa_model::stats::QueueState::*;
    match q.state {
        Running => Style::default().fg(Color::Green),
        Held => Style::default().fg(Color::Yellow),
        Preempted => Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        Passthrough => Style::default().fg(Color::Blue),
        Degraded => Style::default().fg(Color::Magenta),
    }
}

fn draw(f: &mut Frame, app: &mut App) {
    let rows = app.rows();
    let area = f.area();
    let detail_h = if app.detail { 9.min(area.height.saturating_sub(6)) } else { 0 };
    let chunks = Layout::default()
        .direction(Direction::Vertical)
        .constraints([
            Constraint::Length(1),
            Constraint::Min(3),
            Constraint::Length(detail_h),
            Constraint::Length(1),
        ])
        .split(area);
    let procs: usize = app.snap.gpus.iter().map(|g| g.processes.len()).sum();
    let sort = format!("{}{}", COLUMNS[app.sort], if app.reverse { " (rev)" } else { "" });
    let filter = match &app.editing {
        Some(t) => format!(" filter: {t}_"),
        None if !app.filter.is_empty() => format!(" filter: {}", app.filter),
        None => String::new(),
    };
    let title = format!(
        "xhsa-top  {}  GPUs {}  procs {}  queues {}  every {:.1}s  sort {sort}{filter}",
        app.dir.display(),
        app.snap.gpus.len(),
        procs,
        rows.len(),
        app.interval.as_secs_f64()
    );
    f.render_widget(
        Paragraph::new(title).style(Style::default().add_modifier(Modifier::BOLD)),
        chunks[0],
    );

    let header = Row::new(COLUMNS.iter().enumerate().map(|(i, c)| {
        let s = if i == app.sort {
            Style::default().add_modifier(Modifier::REVERSED)
        } else {
            Style::default()
        };
        Cell::from(*c).style(s)
    }))
    .style(Style::default().add_modifier(Modifier::BOLD));
    let multi_gpu = app.snap.gpus.len() > 1;
    let body: Vec<Row> = rows
        .iter()
        .map(|r| {
            let q = r.queue;
            let state =
                if q.paused { format!("{}*", q.state.name()) } else { q.state.name().to_string() };
            let pid = if multi_gpu {
                format!("{}@{}", r.process.pid, r.gpu.node)
            } else {
                r.process.pid.to_string()
            };
            Row::new(vec![
                Cell::from(pid),
                Cell::from(r.process.name.clone()),
                Cell::from(q.id.to_string()),
                Cell::from(prio(q.priority)),
                Cell::from(prio(q.requested)),
                Cell::from(state).style(state_style(q)),
                Cell::from(q.pending.to_string()),
                Cell::from(q.in_flight.to_string()),
                Cell::from(format!("{:.0}", r.rate)),
                Cell::from(q.preemptions.to_string()),
                Cell::from(ms(q.preempted_ns)),
                Cell::from(p99(q)),
            ])
        })
        .collect();
    // 80 columns: 69 of fields and 11 of spacing.
    let widths = [
        Constraint::Length(7),
        Constraint::Min(10),
        Constraint::Length(4),
        Constraint::Length(4),
        Constraint::Length(4),
        Constraint::Length(9),
        Constraint::Length(4),
        Constraint::Length(4),
        Constraint::Length(6),
        Constraint::Length(4),
        Constraint::Length(7),
        Constraint::Length(6),
    ];
    let mut block = Block::default().borders(Borders::TOP);
    if rows.is_empty() {
        let why = if app.snap.problems.is_empty() {
            format!("no libxhsa queue on the boards in {}", app.dir.display())
        } else {
            app.snap.problems.join("; ")
        };
        block = block.title(why);
    } else if !app.snap.problems.is_empty() {
        block = block.title(app.snap.problems.join("; "));
    }
    let table = Table::new(body, widths)
        .header(header)
        .block(block)
        .column_spacing(1)
        .row_highlight_style(Style::default().add_modifier(Modifier::REVERSED));
    let mut state = app.table.clone();
    if state.selected().is_none_or(|s| s >= rows.len()) {
        state.select(
            (!rows.is_empty())
                .then(|| rows.len().saturating_sub(1).min(state.selected().unwrap_or(0))),
        );
    }
    f.render_stateful_widget(table, chunks[1], &mut state);

    if app.detail {
        let sel = state.selected().and_then(|i| rows.get(i));
        draw_detail(f, chunks[2], sel);
    }
    let help = "q quit  ↑↓ select  ←→ sort  r reverse  / filter  Enter detail  +/- interval";
    f.render_widget(Paragraph::new(help).style(Style::default().fg(Color::DarkGray)), chunks[3]);
    drop(rows);
    app.table = state;
}

fn draw_detail(f: &mut Frame, area: Rect, row: Option<&RowData>) {
    let Some(r) = row else {
        f.render_widget(
            Paragraph::new("no queue selected").block(Block::default().borders(Borders::TOP)),
            area,
        );
        return;
    };
    let q = r.queue;
    let halves = Layout::default()
        .direction(Direction::Horizontal)
        .constraints([Constraint::Percentage(55), Constraint::Percentage(45)])
        .split(area);
    // The latency histogram: the buckets from the first to the last non-empty one.
    let used: Vec<&(Option<u64>, u32)> = {
        let first = q.latency.iter().position(|(_, n)| *n > 0);
        let last = q.latency.iter().rposition(|(_, n)| *n > 0);
        match (first, last) {
            (Some(a), Some(b)) => q.latency[a..=b].iter().collect(),
            _ => Vec::new(),
        }
    };
    let max = used.iter().map(|(_, n)| *n).max().unwrap_or(0).max(1);
    let bar_w = halves[0].width.saturating_sub(16) as u64;
    let mut lines: Vec<Line> = used
        .iter()
        .rev()
        .take(area.height.saturating_sub(1) as usize)
        .rev()
        .map(|(le, n)| {
            let label = le.map_or(">262ms".to_string(), |us| {
                if us >= 1000 {
                    format!("<{}ms", us / 1000)
                } else {
                    format!("<{us}us")
                }
            });
            let w = (u64::from(*n) * bar_w / u64::from(max)) as usize;
            Line::from(vec![
                Span::raw(format!("{label:>7} ")),
                Span::styled(
                    "█".repeat(w.max(usize::from(*n > 0))),
                    Style::default().fg(Color::Cyan),
                ),
                Span::raw(format!(" {n}")),
            ])
        })
        .collect();
    if lines.is_empty() {
        lines.push(Line::from("no completion measured yet"));
    }
    let title = format!("queue {} of {}: dispatch to completion", q.id, r.process.pid);
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::TOP).title(title)),
        halves[0],
    );
    let mut info = vec![
        Line::from(format!("sent {} disp {} done {}", q.submitted, q.dispatched, q.completed)),
        Line::from(format!(
            "held {} ms ({}x), {} us/packet ({} own)",
            ms(q.held_ns),
            q.held_events,
            q.packet_ns / 1000,
            q.own_packet_ns / 1000
        )),
        Line::from(format!(
            "off {}x, {} ms{}{}",
            q.preemptions,
            ms(q.preempted_ns),
            if q.paused { " PAUSED" } else { "" },
            if q.overridden { " (operator prio)" } else { "" }
        )),
    ];
    for (ago, dur) in &q.recent_preemptions {
        let d = dur.map_or("still off".to_string(), |d| format!("{} ms", ms(d)));
        info.push(Line::from(format!("  {:.1} s ago: {d}", *ago as f64 / 1e9)));
    }
    f.render_widget(
        Paragraph::new(info)
            .block(Block::default().borders(Borders::TOP).title("counters, last preemptions")),
        halves[1],
    );
}

/// Handles one key; returns false to quit.
fn key(app: &mut App, code: KeyCode, mods: KeyModifiers) -> bool {
    if mods.contains(KeyModifiers::CONTROL) && code == KeyCode::Char('c') {
        return false;
    }
    if let Some(text) = &mut app.editing {
        match code {
            KeyCode::Enter => {
                app.filter = text.trim().to_string();
                app.editing = None;
            }
            KeyCode::Esc => app.editing = None,
            KeyCode::Backspace => {
                text.pop();
            }
            KeyCode::Char(c) => text.push(c),
            _ => {}
        }
        return true;
    }
    let n = app.rows().len();
    match code {
        KeyCode::Char('q') | KeyCode::Esc => return false,
        KeyCode::Down | KeyCode::Char('j') => {
            app.table.select(Some((app.table.selected().unwrap_or(0) + 1).min(n.saturating_sub(1))))
        }
        KeyCode::Up | KeyCode::Char('k') => {
            app.table.select(Some(app.table.selected().unwrap_or(0).saturating_sub(1)))
        }
        KeyCode::Right | KeyCode::Char('>') | KeyCode::Char('s') => {
            app.sort = (app.sort + 1) % COLUMNS.len()
        }
        KeyCode::Left | KeyCode::Char('<') | KeyCode::Char('S') => {
            app.sort = (app.sort + COLUMNS.len() - 1) % COLUMNS.len()
        }
        KeyCode::Char('r') => app.reverse = !app.reverse,
        KeyCode::Char('/') => app.editing = Some(app.filter.clone()),
        KeyCode::Enter | KeyCode::Char('d') => app.detail = !app.detail,
        KeyCode::Char('+') => app.interval = (app.interval * 2).min(Duration::from_secs(60)),
        KeyCode::Char('-') => app.interval = (app.interval / 2).max(Duration::from_millis(100)),
        _ => {}
    }
    true
}

fn run_tui(mut app: App) -> std::io::Result<()> {
    // ratatui::init enters the alternate screen and raw mode and installs a panic hook that
    // restores the terminal before the panic message.
    let mut terminal = ratatui::init();
    let result = (|| -> std::io::Result<()> {
        app.refresh();
        let mut next = Instant::now() + app.interval;
        loop {
            terminal.draw(|f| draw(f, &mut app))?;
            let timeout = next.saturating_duration_since(Instant::now());
            // Blocks until a key or the next refresh: no polling loop.
            if event::poll(timeout)? {
                if let Event::Key(k) = event::read()? {
                    if k.kind == KeyEventKind::Press && !key(&mut app, k.code, k.modifiers) {
                        return Ok(());
                    }
                }
            }
            if Instant::now() >= next {
                app.refresh();
                next = Instant::now() + app.interval;
            }
        }
    })();
    ratatui::restore();
    result
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let dir = cli.board_dir.unwrap_or_else(xhsa_monitor::default_board_dir);
    if cli.once || cli.json {
        let snap = xhsa_monitor::snapshot::take(&dir);
        if cli.json {
            println!("{}", xhsa_monitor::json::render(&snap));
        } else {
            print!("{}", xhsa_monitor::text::render(&snap));
        }
        return ExitCode::SUCCESS;
    }
    let app = App {
        dir,
        interval: cli.interval,
        snap: Snapshot::default(),
        prev: HashMap::new(),
        prev_at: None,
        rates: HashMap::new(),
        sort: 0,
        reverse: false,
        filter: cli.filter.unwrap_or_default(),
        editing: None,
        detail: false,
        table: TableState::default(),
    };
    match run_tui(app) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xhsa-top: {e} (it needs a terminal; --once and --json print a snapshot without one)");
            ExitCode::from(1)
        }
    }
}
