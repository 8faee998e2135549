//! `levee-drill`: prove a Levee configuration against scripted provider faults.
//!
//! The command line is clap's derive API: each subcommand has its own
//! `--help`, a mistyped flag gets a suggestion, and a usage error exits with
//! 2. Errors of the drill itself (a file that does not read or parse, a run
//! that fails) are one line on stderr, `levee-drill: FILE: what`, and exit
//! with 2 for a scenario that does not parse, 1 otherwise.

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, Parser, Subcommand};
use levee_drill::report::{ScenarioReport, comparison, summary, table};
use levee_drill::scenario::Scenario;
use levee_drill::{classify_cmd, run, samples, suite, svg, tune};

/// Prove a Levee configuration against scripted provider faults.
///
/// With no subcommand, runs the built-in scenario suite in virtual time and
/// prints a comparison table of the stacks per scenario.
#[derive(Debug, Parser)]
#[command(name = "levee-drill", version, after_help = EXAMPLES)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

const EXAMPLES: &str = "\
Examples:
  levee-drill                                    the built-in suite
  levee-drill run my.toml --json report.json     one scenario, its report as JSON
  levee-drill run my.toml --live --time-scale 4  the same over real HTTP on 127.0.0.1
  levee-drill tune my.toml --budget 100          search its [levee] settings
  levee-drill classify < responses.jsonl         one verdict per JSON line
  levee-drill classify --rules mine.toml --jsonl day.jsonl
                                                 what your rules and Levee's make of a day of answers";

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one scenario file (virtual time by default: an hour of traffic in
    /// seconds, the same report for the same seed).
    Run(RunArgs),
    /// Run the built-in suite and write its reports out.
    Suite(SuiteArgs),
    /// Search a scenario's `[levee]` settings for the best trade-offs of
    /// served %, upstream calls, recovery time and p99 latency.
    ///
    /// Runs the scenario's Levee stack in virtual time over random settings
    /// of the breaker (tripping, cool-off base, growth, cap, jitter, hold,
    /// probes), the throttle gate (default wait, cap), the retries (attempts,
    /// budget), the bulkhead, and the failover's shadow probes (interval,
    /// share) and hedging (ratio, demotion), then refines around the best;
    /// each setting runs with several seeds and is scored on the means.
    /// Prints the settings no other beats on all four numbers, each as a `[levee]`
    /// block to paste into the scenario, a service's `LeveeConfig` file or
    /// the gateway's `[levee]` (the same keys), and the baseline (the
    /// scenario's own).
    Tune(TuneArgs),
    /// Read JSON lines on stdin, write one verdict per line.
    ///
    /// Input: {"status":429|null,"headers":{..},"body":"..","stream":false}
    /// Output: {"verdict":"throttled","wait_ms":9816,"reason":".."}
    Classify(ClassifyArgs),
    /// Classify a built-in set of real provider responses.
    Samples,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The scenario (TOML: accounts, load, faults, `[levee]` settings).
    #[arg(value_name = "FILE.toml")]
    file: PathBuf,
    /// Write the report as JSON.
    #[arg(long, value_name = "OUT.json")]
    json: Option<PathBuf>,
    /// Write a timeline picture of breakers, gates, parks and outcomes.
    #[arg(long, value_name = "OUT.svg")]
    svg: Option<PathBuf>,
    /// Serve the simulated provider over real HTTP on 127.0.0.1, in real time.
    #[arg(long)]
    live: bool,
    /// With --live: compress real time N times (N >= 1).
    #[arg(long, value_name = "N", default_value = "1", value_parser = levee_drill::live::parse_scale)]
    time_scale: f64,
    /// Compress the scenario's timeline N times (its duration and fault
    /// windows), keeping its load, limits and latencies: a real gateway keeps
    /// real time, so this is how it runs a long scenario in less.
    #[arg(long, value_name = "N", default_value = "1", value_parser = levee_drill::live::parse_scale)]
    shorten: f64,
    /// With --live: send the load through a real gateway process that ADAPTER
    /// starts in front of the providers (built in: levee-gateway, litellm; or
    /// a path), a row per gateway; several comma-separated run one after another.
    #[arg(
        long,
        value_name = "ADAPTER[,ADAPTER]",
        requires = "live",
        value_delimiter = ','
    )]
    through: Vec<String>,
}

#[derive(Debug, Args)]
struct ClassifyArgs {
    /// Your rules (TOML `[[rule]]` tables), checked before the built-in
    /// ones; each output line names the rule that decided (`"rule"`).
    #[arg(long, value_name = "FILE.toml")]
    rules: Option<PathBuf>,
    /// Count the answers of FILE (JSON lines; `-` for stdin) instead of
    /// printing a verdict per line: per verdict, per reason, per rule, and
    /// the answers no rule recognised.
    #[arg(long, value_name = "FILE")]
    jsonl: Option<PathBuf>,
    /// With --jsonl: print the counts as JSON.
    #[arg(long, requires = "jsonl")]
    json: bool,
}

#[derive(Debug, Args)]
struct TuneArgs {
    /// The scenario whose `[levee]` settings to tune.
    #[arg(value_name = "FILE.toml")]
    file: PathBuf,
    /// Settings to evaluate, besides the scenario's own.
    #[arg(long, value_name = "N", default_value_t = 200,
          value_parser = clap::value_parser!(u32).range(1..=100_000))]
    budget: u32,
    /// Runs per setting, with consecutive seeds; scored on their mean.
    #[arg(long, value_name = "N", default_value_t = 3,
          value_parser = clap::value_parser!(u32).range(1..=100))]
    seeds: u32,
    /// The first run's seed (default: the scenario's `seed`); it seeds the search too.
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
    /// Show the frontier's settings serving at least PCT % (default: a
    /// point below the scenario's own settings).
    #[arg(long, value_name = "PCT", value_parser = parse_percent)]
    min_served: Option<u32>,
    /// Write a picture of every setting evaluated, the frontier marked.
    #[arg(long, value_name = "OUT.svg")]
    svg: Option<PathBuf>,
    /// Write every setting evaluated, with its numbers, as JSON.
    #[arg(long, value_name = "OUT.json")]
    json: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct SuiteArgs {
    /// Write every scenario's report, as a JSON array.
    #[arg(long, value_name = "OUT.json")]
    json: Option<PathBuf>,
    /// Write one timeline picture per scenario into DIR (which must exist).
    #[arg(long, value_name = "DIR")]
    svg_dir: Option<PathBuf>,
}

/// A failure of the drill itself: one line on stderr and an exit code.
#[derive(Debug)]
struct Failure {
    message: String,
    code: u8,
}

impl Failure {
    /// A scenario that does not parse or validate: a usage error (2).
    fn usage(message: impl std::fmt::Display) -> Self {
        Failure {
            message: message.to_string(),
            code: 2,
        }
    }

    /// A file that does not read or write, a run that fails (1).
    fn run(message: impl std::fmt::Display) -> Self {
        Failure {
            message: message.to_string(),
            code: 1,
        }
    }
}

/// Writes one scenario's report as `{"scenario":..,"results":[..]}`, or an
/// array of them for a suite.
fn write_json(path: &Path, reports: &[ScenarioReport], single: bool) -> Result<(), Failure> {
    let text = if single {
        serde_json::to_string_pretty(&reports[0])
    } else {
        serde_json::to_string_pretty(reports)
    }
    .map_err(|e| Failure::run(format!("{}: {e}", path.display())))?;
    write_file(path, text + "\n")
}

fn write_file(path: &Path, text: impl AsRef<[u8]>) -> Result<(), Failure> {
    std::fs::write(path, text).map_err(|e| Failure::run(format!("{}: {e}", path.display())))
}

/// Reads and parses a scenario file.
fn read_scenario(file: &Path) -> Result<Scenario, Failure> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| Failure::run(format!("{}: {e}", file.display())))?;
    Scenario::from_toml(&text).map_err(|e| Failure::usage(format!("{}: {e}", file.display())))
}

fn run_suite(args: &SuiteArgs) -> Result<(), Failure> {
    let began = Instant::now();
    let scenarios = suite::scenarios().map_err(Failure::run)?;
    println!(
        "Levee drill: the built-in suite, {} scenarios in virtual time\n",
        scenarios.len()
    );
    let mut reports = Vec::new();
    for sc in &scenarios {
        let report =
            run::run_scenario(sc).map_err(|e| Failure::run(format!("{}: {e}", sc.name)))?;
        println!("{}", table(&report));
        if let Some(dir) = &args.svg_dir {
            write_file(
                &dir.join(format!("{}.svg", sc.name)),
                svg::render(sc, &report),
            )?;
        }
        reports.push(report);
    }
    if let Some(path) = &args.json {
        write_json(path, &reports, false)?;
    }
    println!("summary: requests served, and calls that reached the provider\n");
    println!("{}", summary(&reports));
    println!("every stack: served, upstream calls, wasted calls, p99, recovery\n");
    println!("{}", comparison(&reports));
    println!(
        "suite ran in {:.1}s (wall clock)",
        began.elapsed().as_secs_f64()
    );
    Ok(())
}

fn run_file(args: &RunArgs) -> Result<(), Failure> {
    let mut sc = read_scenario(&args.file)?;
    if args.shorten > 1.0 {
        sc = levee_drill::live::shortened(&sc, args.shorten);
        println!(
            "shortened {}x: {:.0}s of the scenario's timeline, its load and limits as they are",
            args.shorten,
            sc.duration.as_secs_f64()
        );
    }
    let scale = args.time_scale;
    if args.live {
        println!(
            "live: over HTTP on 127.0.0.1, real time compressed {scale}x (about {:.0}s); times below are wall-clock",
            sc.duration.as_secs_f64() / scale
        );
    }
    // Progress only for a person watching: never in a pipe or a test.
    let tty = io::stderr().is_terminal();
    let run = if !args.through.is_empty() {
        let adapters = through_adapters(&args.through)?;
        run::run_scenario_through(&sc, scale, &adapters)
    } else if args.live {
        run::run_scenario_live(&sc, scale)
    } else {
        run::run_scenario_with(&sc, |stack, n| {
            if tty {
                eprint!("\r\x1b[Klevee-drill: {stack}: {n} requests in virtual time ...");
            }
        })
    };
    if tty && !args.live {
        eprint!("\r\x1b[K");
    }
    let report = run.map_err(|e| Failure::run(format!("{}: {e}", args.file.display())))?;
    print!("{}", table(&report));
    if let Some(path) = &args.json {
        write_json(path, std::slice::from_ref(&report), true)?;
    }
    if let Some(path) = &args.svg {
        let pictured = if args.live {
            levee_drill::live::scaled(&sc, scale)
        } else {
            sc
        };
        write_file(path, svg::render(&pictured, &report))?;
    }
    Ok(())
}

/// The adapters named, each checked: one that cannot run is skipped with
/// its reason; none left is a usage error.
fn through_adapters(names: &[String]) -> Result<Vec<levee_drill::through::Adapter>, Failure> {
    let mut ready = Vec::new();
    for name in names {
        let adapter = levee_drill::through::Adapter::resolve(name).map_err(Failure::usage)?;
        match adapter.check() {
            Ok(what) => {
                println!("through {}: {what}", adapter.name);
                ready.push(adapter);
            }
            Err(why) => println!("through {}: skipped: {why}", adapter.name),
        }
    }
    if ready.is_empty() {
        return Err(Failure::usage("--through: no adapter can run (see above)"));
    }
    Ok(ready)
}

fn tune(args: &TuneArgs) -> Result<(), Failure> {
    let began = Instant::now();
    let sc = read_scenario(&args.file)?;
    let options = tune::TuneOptions {
        budget: args.budget as usize,
        seeds: args.seeds,
        first_seed: args.seed.unwrap_or(sc.seed),
        // Runs are independent: as many at once as there are cores.
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        min_served_bp: args.min_served,
    };
    let tty = io::stderr().is_terminal();
    let progress = |done: usize, total: usize| {
        if tty {
            eprint!("\r\x1b[Klevee-drill tune: {done}/{total} runs in virtual time ...");
        }
    };
    let report = tune::tune(&sc, &options, &progress)
        .map_err(|e| Failure::run(format!("{}: {e}", args.file.display())))?;
    if tty {
        eprint!("\r\x1b[K");
    }
    let text = tune::text(&report).map_err(|e| Failure::run(format!("[levee] as TOML: {e}")))?;
    print!("{text}");
    if let Some(path) = &args.json {
        let json =
            tune::json(&report).map_err(|e| Failure::run(format!("{}: {e}", path.display())))?;
        write_file(path, json)?;
    }
    if let Some(path) = &args.svg {
        write_file(path, tune::svg::render(&report))?;
    }
    if tty {
        eprintln!(
            "levee-drill tune: {:.1}s (wall clock)",
            began.elapsed().as_secs_f64()
        );
    }
    Ok(())
}

/// A percentage in `0..=100`, in hundredths of a percent.
fn parse_percent(s: &str) -> Result<u32, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok((p * 100.0).round() as u32),
        _ => Err(format!("expected a percentage within 0..=100, got {s:?}")),
    }
}

fn classify(args: &ClassifyArgs) -> Result<(), Failure> {
    let rules = match &args.rules {
        None => None,
        Some(file) => {
            let text = std::fs::read_to_string(file)
                .map_err(|e| Failure::usage(format!("{}: {e}", file.display())))?;
            let rules = tower_levee::config::from_toml::<levee_core::classify::Rules>(&text)
                .map_err(|e| Failure::usage(format!("{}: {e}", file.display())))?;
            Some(rules)
        }
    };
    let fail = |e: io::Error| Failure::run(format!("classify: {e}"));
    let Some(file) = &args.jsonl else {
        return classify_cmd::run(io::stdin().lock(), io::stdout().lock(), rules).map_err(fail);
    };
    let report = if file.as_os_str() == "-" {
        classify_cmd::Report::of(io::stdin().lock(), rules)
    } else {
        let f = std::fs::File::open(file)
            .map_err(|e| Failure::usage(format!("{}: {e}", file.display())))?;
        classify_cmd::Report::of(io::BufReader::new(f), rules)
    }
    .map_err(fail)?;
    let text = if args.json {
        serde_json::to_string_pretty(&report).map_err(|e| fail(io::Error::other(e)))? + "\n"
    } else {
        report.text()
    };
    io::stdout().write_all(text.as_bytes()).map_err(fail)
}

fn show_samples() {
    println!("How Levee classifies provider responses (throttling is not failure):\n");
    print!("{}", samples::table());
    println!("\nClassify your own: levee-drill classify < responses.jsonl (see --help).");
}

fn main() -> ExitCode {
    // Usage errors print clap's message (with its suggestion) and exit 2.
    let cli = Cli::parse();
    let outcome = match &cli.command {
        None => run_suite(&SuiteArgs {
            json: None,
            svg_dir: None,
        }),
        Some(Command::Run(args)) => run_file(args),
        Some(Command::Suite(args)) => run_suite(args),
        Some(Command::Tune(args)) => tune(args),
        Some(Command::Classify(args)) => classify(args),
        Some(Command::Samples) => {
            show_samples();
            Ok(())
        }
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            let _ = writeln!(io::stderr(), "levee-drill: {}", failure.message);
            ExitCode::from(failure.code)
        }
    }
}
