//! `levee-drill`: prove a Levee configuration against scripted provider faults.

use std::io::{self, Write};
use std::process::ExitCode;

use levee_drill::{classify_cmd, samples};

const USAGE: &str = "\
levee-drill: prove a Levee configuration against scripted provider faults

USAGE:
    levee-drill               classify a built-in set of provider responses
                              (the scenario suite lands with the drill)
    levee-drill classify      read JSON lines on stdin, one verdict per line:
                              {\"status\":429|null,\"headers\":{..},\"body\":\"..\",\"stream\":false}
                              -> {\"verdict\":\"throttled\",\"wait_ms\":9816,\"reason\":\"..\"}
    levee-drill --help        this text
";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .as_slice()
    {
        [] => {
            println!("How Levee classifies provider responses (throttling is not failure):\n");
            print!("{}", samples::table());
            println!("\nClassify your own: levee-drill classify < responses.jsonl (see --help).");
            ExitCode::SUCCESS
        }
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
        _ => {
            let _ = write!(
                io::stderr(),
                "levee-drill: unknown arguments {args:?}\n\n{USAGE}"
            );
            ExitCode::from(2)
        }
    }
}
