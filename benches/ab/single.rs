//! Single-task overhead in interleaved rounds: every case once per round
//! (the first case rotates), each round's overhead taken over that round's
//! baseline, then the median. Copied into the peer harness by `ab.sh`: a
//! change and its base run side by side, so the noise of a shared machine
//! falls on both alike.
//!
//! Env: `PEERBENCH_CASES` (comma-separated names; the baseline always
//! runs), `ROUNDS` (20), `N` calls per measurement (100,000).

use peerbench::*;

type Runner = Box<dyn FnMut(&tokio::runtime::Runtime, u64) -> f64>;

struct Collect {
    rt: tokio::runtime::Runtime,
    cases: Vec<(&'static str, Runner)>,
}

impl Visitor for Collect {
    fn case<S: BenchSvc>(&mut self, name: &'static str, _what: &'static str, make: impl Fn() -> S) {
        if let Ok(only) = std::env::var("PEERBENCH_CASES") {
            if name != "baseline" && !only.split(',').any(|o| o == name) {
                return;
            }
        }
        let mut svc = {
            let _entered = self.rt.enter();
            make()
        };
        let refuse = expects_refusal(name);
        self.cases.push((
            name,
            Box::new(move |rt, n| time_single(rt, &mut svc, n, refuse).as_nanos() as f64 / n as f64),
        ));
    }
}

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let rounds = env("ROUNDS", 20).max(2);
    let n = env("N", 100_000) as u64;
    let mut c = Collect { rt: single_runtime(), cases: Vec::new() };
    cases(&mut c);
    let (rt, mut cases) = (c.rt, c.cases);
    let k = cases.len();
    for (_, run) in cases.iter_mut() {
        run(&rt, n); // warm-up
    }
    let mut ns = vec![vec![0.0; rounds]; k];
    for r in 0..rounds {
        for j in 0..k {
            let i = (j + r) % k;
            ns[i][r] = (cases[i].1)(&rt, n);
        }
    }
    let sorted = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v
    };
    println!("{rounds} interleaved rounds x {n} calls, one task (current_thread runtime)\n");
    println!("| case | median ns/call | overhead over baseline (median) | p10-p90 |");
    println!("|---|---:|---:|---:|");
    for i in 0..k {
        let all = sorted(ns[i].clone());
        let over = sorted((0..rounds).map(|r| ns[i][r] - ns[0][r]).collect());
        println!(
            "| {} | {:.1} | {:+.1} | {:+.1} to {:+.1} |",
            cases[i].0,
            all[rounds / 2],
            over[rounds / 2],
            over[rounds / 10],
            over[rounds * 9 / 10],
        );
    }
}
