//! `xhsa-conformance`: runs the conformance selection (`tools/conformance/suites.txt`) on the
//! emulated GPU and prints a table per suite. `./x conformance` installs the test packages,
//! builds, and calls this.

use std::path::PathBuf;
use std::process::ExitCode;

use xhsa_conformance::contention;
use xhsa_conformance::run::{self, Mode, Rocm, Setup};
use xhsa_conformance::suites;
use xhsa_conformance::table::{self, SuiteResult};

const USAGE: &str = "\
usage: xhsa-conformance [--rocm 6.4|7.2] [--isa ISA] [--only SUITE,...] [--modes native,preload,tools]
                        [--timeout-scale X] [--suites FILE] [--log-dir DIR] [--markdown FILE]
                        [--isa-stats] [--list]
       xhsa-conformance [--rocm 6.4|7.2] [--isa ISA] --contention HIGH:LOW[,HIGH:LOW]...
                        [--timeout-scale X] [--suites FILE] [--log-dir DIR] [--markdown FILE]
  --rocm           the ROCm root whose test packages run (tools/conformance/install.sh --rocm V
                   installs them): 6.4 (default) or 7.2
  --isa            the ISA the emulated GPU reports: gfx90a (default with 6.4, whose packages
                   carry no gfx942 code) or gfx942 (default with 7.2: the MI308X's)
  --only           run only these suites (names from the suites file)
  --modes          which ways to load libxhsa: native (none), preload (LD_PRELOAD),
                   tools (HSA_TOOLS_LIB); default all three
  --contention     instead: for each pair, suite HIGH (XHSA_PRIORITY=10) and suite LOW
                   (XHSA_PRIORITY=-10) each alone under LD_PRELOAD, then both at once on one
                   emulated GPU; their per-test results must be those alone, and the low one's
                   queues must have been taken off the GPU (exit status 1 otherwise)
  --timeout-scale  multiply every suite's time limit by X (default 1)
  --suites         the selection (default tools/conformance/suites.txt with 6.4,
                   tools/conformance/suites-7.2.txt with 7.2)
  --log-dir        each run's output, as DIR/SUITE.MODE.log and .stderr (default
                   target/conformance with 6.4, target/conformance-7.2 with 7.2)
  --markdown       also write the table as Markdown to FILE
  --isa-stats      run with the emulator's debug log and report the interpreter's work per run
                   (dispatches, wave-instructions, wave-instructions/s)
  --list           print the selection and exit";

struct Args {
    rocm: Rocm,
    isa: Option<String>,
    only: Option<Vec<String>>,
    modes: Vec<Mode>,
    scale: f64,
    suites: PathBuf,
    log_dir: PathBuf,
    markdown: Option<PathBuf>,
    isa_stats: bool,
    list: bool,
    contention: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut a = Args {
        rocm: Rocm::V6_4,
        isa: None,
        only: None,
        modes: Mode::ALL.to_vec(),
        scale: 1.0,
        suites: PathBuf::new(),  // below: the one given, else the ROCm's
        log_dir: PathBuf::new(), // below: the one given, else the ROCm's
        markdown: None,
        isa_stats: false,
        list: false,
        contention: None,
    };
    let mut modes_given = false;
    let (mut suites, mut log_dir): (Option<PathBuf>, Option<PathBuf>) = (None, None);
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |what: &str| it.next().ok_or_else(|| format!("{arg} needs {what}"));
        match arg.as_str() {
            "--only" => {
                a.only = Some(value("suite names")?.split(',').map(str::to_string).collect())
            }
            "--modes" => {
                modes_given = true;
                a.modes = value("modes")?.split(',').map(Mode::parse).collect::<Result<_, _>>()?
            }
            "--timeout-scale" => {
                a.scale = value("a number")?
                    .parse()
                    .ok()
                    .filter(|x: &f64| *x > 0.0)
                    .ok_or("--timeout-scale takes a number above 0")?;
            }
            "--rocm" => {
                let v = value("a version")?;
                a.rocm = match Rocm::parse(&v) {
                    Ok(Rocm::V5_2) | Err(_) => return Err(format!(
                        "--rocm '{v}' is not accepted: 6.4 or 7.2 (the roots with test packages; the host's 5.2 has none)"
                    )),
                    Ok(r) => r,
                }
            }
            "--isa" => {
                let isa = value("an ISA")?;
                xhsa_emu::launcher::rocm::parse_isa(&isa)?;
                a.isa = Some(isa);
            }
            "--suites" => suites = Some(value("a file")?.into()),
            "--log-dir" => log_dir = Some(value("a directory")?.into()),
            "--markdown" => a.markdown = Some(value("a file")?.into()),
            "--list" => a.list = true,
            "--isa-stats" => a.isa_stats = true,
            "--contention" => a.contention = Some(value("pairs HIGH:LOW[,HIGH:LOW]...")?),
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            o => return Err(format!("unknown argument '{o}'")),
        }
    }
    if a.modes.is_empty() {
        return Err("--modes names no mode".into());
    }
    let (default_suites, default_log_dir) = match a.rocm {
        Rocm::V7_2 => ("suites-7.2.txt", "../../target/conformance-7.2"),
        _ => ("suites.txt", "../../target/conformance"),
    };
    a.suites = suites.unwrap_or_else(|| here.join(default_suites));
    a.log_dir = log_dir.unwrap_or_else(|| here.join(default_log_dir));
    if a.contention.is_some() {
        // The pair names its suites and runs them under LD_PRELOAD only.
        for (given, what) in
            [(modes_given, "--modes"), (a.only.is_some(), "--only"), (a.isa_stats, "--isa-stats")]
        {
            if given {
                return Err(format!("{what} does not apply to --contention (the pairs name the suites; both run under LD_PRELOAD)"));
            }
        }
    }
    Ok(a)
}

fn main() -> ExitCode {
    // Progress on standard error (`XHSA_CONFORMANCE_LOG`, an EnvFilter: `info` by default).
    let filter = std::env::var("XHSA_CONFORMANCE_LOG").unwrap_or_else(|_| "info".into());
    let filter = tracing_subscriber::EnvFilter::try_new(&filter).unwrap_or_else(|e| {
        eprintln!("xhsa-conformance: XHSA_CONFORMANCE_LOG='{filter}' is not a filter ({e}); accepted: a tracing EnvFilter such as info, debug, warn; info used");
        tracing_subscriber::EnvFilter::new("info")
    });
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter)
        .with_target(false)
        .init();
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("xhsa-conformance: {e}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let text = match std::fs::read_to_string(&args.suites) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("xhsa-conformance: cannot read {}: {e}", args.suites.display());
            return ExitCode::from(2);
        }
    };
    let mut all = match suites::parse(&text) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("xhsa-conformance: {}: {e}", args.suites.display());
            return ExitCode::from(2);
        }
    };
    if let Some(only) = &args.only {
        if let Some(bad) = only.iter().find(|n| !all.iter().any(|s| &s.name == *n)) {
            let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
            eprintln!(
                "xhsa-conformance: no suite '{bad}' in {}; accepted: {}",
                args.suites.display(),
                names.join(", ")
            );
            return ExitCode::from(2);
        }
        all.retain(|s| only.contains(&s.name));
    }
    let pairs = match args.contention.as_deref().map(|c| contention::parse_pairs(c, &all)) {
        None => None,
        Some(Ok(p)) => Some(p),
        Some(Err(e)) => {
            eprintln!("xhsa-conformance: {e}");
            return ExitCode::from(2);
        }
    };
    if args.list {
        for s in &all {
            println!(
                "{:<18} {:<48} {:>5} s  {}{}",
                s.name,
                s.binary,
                s.timeout.as_secs(),
                s.format.prefix(),
                s.filter
            );
        }
        return ExitCode::SUCCESS;
    }
    let root = match xhsa_emu::launcher::rocm::root_from_env(args.rocm) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("xhsa-conformance: {e}");
            return ExitCode::FAILURE;
        }
    };
    let setup = Setup {
        emu: run::artifact("xhsa-emu"),
        libxhsa: run::artifact("libxhsa.so"),
        log_dir: args.log_dir.clone(),
        timeout_scale: args.scale,
        isa_stats: args.isa_stats,
        rocm: args.rocm,
        isa: args.isa.clone().unwrap_or_else(|| run::default_isa(args.rocm).to_string()),
    };
    for p in [&setup.emu, &setup.libxhsa] {
        if !p.exists() {
            eprintln!("xhsa-conformance: {} not built (cargo build --release -p xhsa -p xhsa-emu -p xhsa-emu-thunk)", p.display());
            return ExitCode::FAILURE;
        }
    }
    let missing: Vec<String> = all
        .iter()
        .filter(|s| !root.join(s.program().trim_start_matches('/')).exists())
        .map(|s| s.program())
        .collect();
    if !missing.is_empty() {
        eprintln!("xhsa-conformance: not installed in {}: {} (tools/conformance/install.sh --rocm {} installs the test packages)", root.display(), missing.join(", "), args.rocm);
        return ExitCode::FAILURE;
    }
    if let Some(pairs) = pairs {
        return run_pairs(&all, &pairs, &setup, &args);
    }
    let start = std::time::Instant::now();
    let mut results = Vec::new();
    for s in &all {
        let mut r = SuiteResult { suite: s, outcomes: Vec::new() };
        for &m in &args.modes {
            tracing::info!("{} ({}) ...", s.name, m.label());
            match run::run(s, m, &setup) {
                Ok(o) => r.outcomes.push(o),
                Err(e) => {
                    eprintln!("xhsa-conformance: cannot run {} ({}): {e}", s.name, m.label());
                    return ExitCode::FAILURE;
                }
            }
        }
        println!("{}", table::text(&r));
        results.push(r);
    }
    println!(
        "conformance run (ROCm {}, {}): {} suites, {} modes, {:.0} s; logs in {}",
        setup.rocm,
        setup.isa,
        results.len(),
        args.modes.len(),
        start.elapsed().as_secs_f64(),
        setup.log_dir.display()
    );
    if let Some(md) = &args.markdown {
        if let Err(e) = std::fs::write(md, table::markdown(&results)) {
            eprintln!("xhsa-conformance: cannot write {}: {e}", md.display());
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

/// The contention run: each pair, its table, the verdict in the exit status.
fn run_pairs(
    all: &[suites::Suite],
    pairs: &[(usize, usize)],
    setup: &Setup,
    args: &Args,
) -> ExitCode {
    let start = std::time::Instant::now();
    let mut results = Vec::new();
    for &(h, l) in pairs {
        match contention::run_pair(&all[h], &all[l], setup) {
            Ok(r) => {
                println!("{}", contention::text(&r));
                results.push(r);
            }
            Err(e) => {
                eprintln!(
                    "xhsa-conformance: cannot run {} beside {}: {e}",
                    all[h].name, all[l].name
                );
                return ExitCode::FAILURE;
            }
        }
    }
    let differ = results.iter().filter(|r| !r.identical()).count();
    let undemonstrated = results.iter().filter(|r| !r.demonstrated()).count();
    let unreported = results.iter().filter(|r| !r.libxhsa_ran()).count();
    println!(
        "contention run: {} pair{}, {:.0} s; {differ} with results differing from the solo runs, {undemonstrated} where the low suite was never taken off the GPU, {unreported} where libxhsa did not report; logs in {}",
        results.len(),
        if results.len() == 1 { "" } else { "s" },
        start.elapsed().as_secs_f64(),
        setup.log_dir.display()
    );
    if let Some(md) = &args.markdown {
        if let Err(e) = std::fs::write(md, contention::markdown(&results)) {
            eprintln!("xhsa-conformance: cannot write {}: {e}", md.display());
            return ExitCode::FAILURE;
        }
    }
    if differ + undemonstrated + unreported > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
