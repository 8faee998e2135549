//! `levee-drill`: prove a Levee configuration against scripted provider faults.

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;
use std::time::Instant;

use levee_drill::report::{ScenarioReport, comparison, summary, table};
use levee_drill::scenario::Scenario;
use levee_drill::{classify_cmd, run, samples, suite, svg};

const USAGE: &str = "\
levee-drill: prove a Levee configuration against scripted provider faults

USAGE:
    levee-drill               run the built-in scenario suite in virtual time and
                              print a comparison table of the stacks per scenario
    levee-drill run FILE.toml [--json OUT.json] [--svg OUT.svg] [--live [--time-scale N]]
                              run one scenario (virtual time: an hour of traffic in
                              seconds, same report for the same seed); --live serves
                              the simulated provider over real HTTP on 127.0.0.1 in
                              real time, compressed N times by --time-scale
    levee-drill suite [--json OUT.json] [--svg-dir DIR]
                              the built-in suite, with its reports written out
    levee-drill classify      read JSON lines on stdin, one verdict per line:
                              {\"status\":429|null,\"headers\":{..},\"body\":\"..\",\"stream\":false}
                              -> {\"verdict\":\"throttled\",\"wait_ms\":9816,\"reason\":\"..\"}
    levee-drill samples       classify a built-in set of real provider responses
    levee-drill --help        this text
";

fn fail(msg: impl std::fmt::Display, code: u8) -> ExitCode {
    let _ = writeln!(io::stderr(), "levee-drill: {msg}");
    ExitCode::from(code)
}

/// Writes one scenario's report as `{"scenario":..,"results":[..]}`, or an
/// array of them for a suite.
fn write_json(path: &str, reports: &[ScenarioReport], single: bool) -> io::Result<()> {
    let text = if single {
        serde_json::to_string_pretty(&reports[0])
    } else {
        serde_json::to_string_pretty(reports)
    }
    .map_err(io::Error::other)?;
    std::fs::write(path, text + "\n")
}

fn run_suite(json: Option<&str>, svg_dir: Option<&str>) -> ExitCode {
    let began = Instant::now();
    let scenarios = match suite::scenarios() {
        Ok(s) => s,
        Err(e) => return fail(e, 1),
    };
    println!(
        "Levee drill: the built-in suite, {} scenarios in virtual time\n",
        scenarios.len()
    );
    let mut reports = Vec::new();
    for sc in &scenarios {
        match run::run_scenario(sc) {
            Ok(r) => {
                println!("{}", table(&r));
                if let Some(dir) = svg_dir
                    && let Err(e) =
                        std::fs::write(format!("{dir}/{}.svg", sc.name), svg::render(sc, &r))
                {
                    return fail(format!("{dir}: {e}"), 1);
                }
                reports.push(r);
            }
            Err(e) => return fail(format!("{}: {e}", sc.name), 1),
        }
    }
    if let Some(path) = json
        && let Err(e) = write_json(path, &reports, false)
    {
        return fail(format!("{path}: {e}"), 1);
    }
    println!("summary: requests served, and calls that reached the provider\n");
    println!("{}", summary(&reports));
    println!("every stack: served, upstream calls, wasted calls, p99, recovery\n");
    println!("{}", comparison(&reports));
    println!(
        "suite ran in {:.1}s (wall clock)",
        began.elapsed().as_secs_f64()
    );
    ExitCode::SUCCESS
}

fn run_file(args: &[&str]) -> ExitCode {
    let mut file = None;
    let (mut json, mut svg_out, mut live, mut scale) = (None, None, false, 1.0);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match *a {
            "--json" => json = it.next().copied(),
            "--svg" => svg_out = it.next().copied(),
            "--live" => live = true,
            "--time-scale" => {
                match levee_drill::live::parse_scale(it.next().copied().unwrap_or("")) {
                    Ok(v) => scale = v,
                    Err(e) => return fail(e, 2),
                }
            }
            f if file.is_none() && !f.starts_with("--") => file = Some(f),
            other => return fail(format!("run: unexpected argument {other:?}\n\n{USAGE}"), 2),
        }
    }
    let Some(file) = file else {
        return fail(format!("run: a scenario file is required\n\n{USAGE}"), 2);
    };
    let text = match std::fs::read_to_string(file) {
        Ok(t) => t,
        Err(e) => return fail(format!("{file}: {e}"), 1),
    };
    let sc = match Scenario::from_toml(&text) {
        Ok(s) => s,
        Err(e) => return fail(format!("{file}: {e}"), 2),
    };
    if live {
        println!(
            "live: over HTTP on 127.0.0.1, real time compressed {scale}x (about {:.0}s); times below are wall-clock",
            sc.duration.as_secs_f64() / scale
        );
    }
    let tty = io::stderr().is_terminal();
    let run = if live {
        run::run_scenario_live(&sc, scale)
    } else {
        run::run_scenario_with(&sc, |stack, n| {
            if tty {
                eprint!("\r\x1b[Klevee-drill: {stack}: {n} requests in virtual time ...");
            }
        })
    };
    if tty && !live {
        eprint!("\r\x1b[K");
    }
    let report = match run {
        Ok(r) => r,
        Err(e) => return fail(format!("{file}: {e}"), 1),
    };
    print!("{}", table(&report));
    if let Some(path) = json
        && let Err(e) = write_json(path, std::slice::from_ref(&report), true)
    {
        return fail(format!("{path}: {e}"), 1);
    }
    if let Some(path) = svg_out
        && let Err(e) = std::fs::write(
            path,
            svg::render(
                &if live {
                    levee_drill::live::scaled(&sc, scale)
                } else {
                    sc.clone()
                },
                &report,
            ),
        )
    {
        return fail(format!("{path}: {e}"), 1);
    }
    ExitCode::SUCCESS
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    match args.as_slice() {
        [] => run_suite(None, None),
        ["-h" | "--help" | "help"] => {
            print!("{USAGE}");
            ExitCode::SUCCESS
        }
        ["classify"] => {
            let stdin = io::stdin().lock();
            let stdout = io::stdout().lock();
            match classify_cmd::run(stdin, stdout) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    let _ = writeln!(io::stderr(), "levee-drill classify: {e}");
                    ExitCode::FAILURE
                }
            }
        }
        ["samples"] => {
            println!("How Levee classifies provider responses (throttling is not failure):\n");
            print!("{}", samples::table());
            println!("\nClassify your own: levee-drill classify < responses.jsonl (see --help).");
            ExitCode::SUCCESS
        }
        ["suite", rest @ ..] => {
            let (mut json, mut dir) = (None, None);
            let mut it = rest.iter();
            while let Some(a) = it.next() {
                match *a {
                    "--json" => json = it.next().copied(),
                    "--svg-dir" => dir = it.next().copied(),
                    other => {
                        return fail(
                            format!("suite: unexpected argument {other:?}\n\n{USAGE}"),
                            2,
                        );
                    }
                }
            }
            run_suite(json, dir)
        }
        ["run", rest @ ..] => run_file(rest),
        _ => {
            let _ = write!(
                io::stderr(),
                "levee-drill: unknown arguments {args:?}\n\n{USAGE}"
            );
            ExitCode::from(2)
        }
    }
}
