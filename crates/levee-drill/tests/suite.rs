//! The built-in scenarios in virtual time: the outcomes the design promises,
//! with the numbers printed (`cargo test -p levee-drill -- --nocapture`).

use std::time::Duration;

use levee_drill::report::StackResult;
use levee_drill::run::run_scenario;
use levee_drill::scenario::{DRILL_MAX_CONCURRENT, Scenario};
use levee_drill::suite;

mod support;
use support::{assert_accounted, run, stack};

/// A built-in scenario by name, cut to `secs` seconds (debug builds are slow).
fn builtin(name: &str, secs: u64) -> Scenario {
    let mut sc = support::scenario(name);
    sc.duration = Duration::from_secs(secs);
    sc
}

#[test]
fn throttle_storm_levee_opens_no_breaker_and_serves_99_percent() {
    let r = run(&builtin("throttle-storm", 60));
    assert_accounted(&r);
    let levee = stack(&r, "levee");
    let naive = stack(&r, "naive");
    println!(
        "levee: {:.2}% served, {} breaker opens; naive: {:.2}% served, {} breaker opens",
        levee.success_rate() * 100.0,
        levee.breaker_opens(),
        naive.success_rate() * 100.0,
        naive.breaker_opens()
    );
    assert_eq!(
        levee.breaker_opens(),
        0,
        "a 429 never trips Levee's breaker"
    );
    assert!(levee.success_rate() >= 0.99, "levee serves >= 99%");
    assert!(
        naive.success_rate() < levee.success_rate(),
        "naive serves less"
    );
    assert!(naive.breaker_opens() > 0, "naive's breakers cascade open");
}

#[test]
fn hard_outage_levee_spares_the_dead_primary_and_unprotected_hammers_it() {
    // The primary is down for the whole (shortened) run.
    let mut sc = builtin("hard-outage", 60);
    sc.faults[0].from = Duration::ZERO;
    sc.faults[0].to = sc.duration + Duration::from_secs(60);
    let r = run(&sc);
    assert_accounted(&r);
    let levee = stack(&r, "levee");
    let unprotected = stack(&r, "unprotected");
    let threshold = 5; // the default consecutive-failure threshold
    let probes = levee
        .transitions
        .iter()
        .filter(|t| t.target == "primary" && t.mechanism == "breaker" && t.to == "half_open")
        .count() as u64;
    // Its callers' calls; shadow probes, copies no caller waits on, apart.
    let copies = levee.upstream_probe_calls;
    let levee_calls = levee.upstream_calls_by_target["primary"]
        .checked_sub(copies)
        .expect("every probe went to the primary");
    let unprotected_calls = unprotected.upstream_calls_by_target["primary"];
    println!(
        "levee: {levee_calls} callers' calls to the dead primary (threshold {threshold} + \
         {probes} probes) and {copies} copies; unprotected: {unprotected_calls} calls for {} \
         requests",
        unprotected.requests
    );
    // At most one a second (the interval): at 20 requests a second a
    // tenth of them (the share) would allow two.
    assert!(
        copies <= sc.duration.as_secs() + 1,
        "{copies} copies in {:?}",
        sc.duration
    );
    // Plus at most one call already in flight when the fifth failure came
    // back (arrivals are 50 ms apart on average, the 503 takes 50 ms).
    assert!(
        levee_calls <= threshold + probes + 1,
        "levee stays within threshold + probes"
    );
    assert!(
        unprotected_calls >= 3 * unprotected.requests,
        "unprotected retries every request twice"
    );
    assert!(
        levee.success_rate() > 0.99,
        "levee serves from the secondary"
    );
}

#[test]
fn every_builtin_scenario_accounts_for_every_request() {
    for sc in suite::scenarios().expect("the built-in scenarios parse") {
        let mut sc = sc;
        sc.duration = sc.duration.min(Duration::from_secs(90));
        let r = run(&sc);
        assert_accounted(&r);
        let levee = stack(&r, "levee");
        let unprotected = stack(&r, "unprotected");
        assert!(
            levee.success_rate() >= unprotected.success_rate(),
            "{}: levee serves at least as much as unprotected",
            r.scenario
        );
    }
}

#[test]
fn same_seed_gives_identical_json() {
    let sc = builtin("api-wide-529", 40);
    let a = serde_json::to_string(&run_scenario(&sc).expect("runs")).expect("json");
    let b = serde_json::to_string(&run_scenario(&sc).expect("runs")).expect("json");
    assert_eq!(a, b);
    let mut other = sc.clone();
    other.seed += 1;
    let c = serde_json::to_string(&run_scenario(&other).expect("runs")).expect("json");
    assert_ne!(a, c, "another seed, other arrivals");
}

#[test]
fn json_report_has_the_contract_shape() {
    let r = run_scenario(&builtin("spend-cap", 80)).expect("runs");
    let v: serde_json::Value = serde_json::to_value(&r).expect("json");
    assert_eq!(v["scenario"], "spend-cap");
    for res in v["results"].as_array().expect("results") {
        let mut failed: Vec<&str> = res["failed"]
            .as_object()
            .expect("failed")
            .keys()
            .map(String::as_str)
            .collect();
        failed.sort_unstable();
        assert_eq!(
            failed,
            [
                "budget_exhausted",
                "bulkhead_full",
                "circuit_open",
                "no_target",
                "parked",
                "throttled",
                "timeout",
                "upstream"
            ]
        );
        for key in [
            "stack",
            "requests",
            "succeeded",
            "upstream_calls",
            "upstream_calls_by_target",
            "upstream_rejected_calls",
            "fallback_share",
            "latency_ms",
            "transitions",
        ] {
            assert!(res.get(key).is_some(), "missing {key}");
        }
        assert!(res["latency_ms"]["p50"].is_u64() && res["latency_ms"]["p99"].is_u64());
        for t in res["transitions"].as_array().expect("transitions") {
            for key in [
                "t_ms",
                "target",
                "scope",
                "mechanism",
                "from",
                "to",
                "reason",
            ] {
                assert!(t.get(key).is_some(), "transition missing {key}");
            }
        }
    }
    // The spend cap parks the primary under Levee.
    let levee = r
        .results
        .iter()
        .find(|s| s.stack == "levee")
        .expect("levee");
    assert!(
        levee
            .transitions
            .iter()
            .any(|t| t.mechanism == "park" && t.to == "parked"),
        "{:?}",
        levee.transitions
    );
}

#[test]
fn scenario_errors_name_the_field() {
    let base = "name = \"x\"\nduration = \"10s\"\n[load]\nrate = 1\nmodel = \"m\"\n[[target]]\nname = \"a\"\ndialect = \"openai\"\n";
    assert!(Scenario::from_toml(base).is_ok());
    let cases = [
        (base.replace("\"10s\"", "\"ten\""), "duration"),
        (base.replace("\"openai\"", "\"acme\""), "target[0].dialect"),
        (
            format!("{base}[[fault]]\ntarget = \"b\"\nkind = \"outage\"\n"),
            "fault[0].target",
        ),
        (
            format!("{base}[[fault]]\ntarget = \"a\"\nkind = \"meteor\"\n"),
            "fault[0].kind",
        ),
        (
            format!(
                "{base}[[fault]]\ntarget = \"a\"\nkind = \"outage\"\nfrom = \"5s\"\nto = \"2s\"\n"
            ),
            "fault[0].to",
        ),
        (
            format!("{base}[levee.breaker]\nthreshold = 0\n"),
            "levee.breaker.threshold",
        ),
        (base.replace("rate = 1", "rate = -1"), "load.rate"),
    ];
    for (text, field) in cases {
        let e = Scenario::from_toml(&text).expect_err(field).to_string();
        assert!(e.contains(field), "{e:?} should name {field}");
    }
    let e = Scenario::from_toml(&format!("{base}[levee.breaker]\ncooldown = \"soon\"\n"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("cooldown"), "{e}");
    // `[levee]` is the library's schema, read with the key, line and column.
    let line = base.lines().count() + 2;
    for (table, says) in [
        (
            "[levee.breaker]\nthreshold = 0\n",
            format!("`levee.breaker.threshold` (line {line}, column 1): must be at least 1, got 0"),
        ),
        (
            "[levee.retry]\nretry_ratio = 0.2\n",
            format!("`levee.retry.retry_ratio` (line {line}, column 1): "),
        ),
        (
            "[levee.breaker]\ncooldown = { base = \"10s\", max = \"1s\" }\n",
            "`levee.breaker.cooldown".to_owned(),
        ),
        (
            "[levee.bulkhead]\nmax_concurrent = 0\n",
            format!(
                "`levee.bulkhead.max_concurrent` (line {line}, column 1): must be at least 1, got 0"
            ),
        ),
    ] {
        let e = Scenario::from_toml(&format!("{base}{table}"))
            .unwrap_err()
            .to_string();
        assert!(e.starts_with(&says), "{e:?} should start with {says:?}");
    }
    // The drill's old keys are refused, not ignored.
    let e = Scenario::from_toml(&format!("{base}[levee.retry]\nretry_ratio = 0.2\n")).unwrap_err();
    assert!(e.to_string().contains("unknown field `retry_ratio`"), "{e}");
}

#[test]
fn the_drill_departs_from_the_librarys_defaults_only_where_levee_is_silent() {
    let base = "name = \"x\"\nduration = \"10s\"\n[load]\nrate = 1\nmodel = \"m\"\ntimeout = \"12s\"\n[[target]]\nname = \"a\"\ndialect = \"openai\"\n";
    let silent = Scenario::from_toml(base).unwrap();
    assert_eq!(silent.levee.bulkhead.max_concurrent, DRILL_MAX_CONCURRENT);
    let retry = silent.retry_config();
    assert_eq!(retry.timeout, Some(Duration::from_secs(12)), "load.timeout");
    assert_eq!(
        retry.attempt_timeout,
        Some(Duration::from_secs(4)),
        "a third of it"
    );
    // Everything else is the library's default.
    let library = tower_levee::config::LeveeConfig::default();
    let mut levee = silent.levee.clone();
    levee.bulkhead.max_concurrent = library.bulkhead.max_concurrent;
    assert_eq!(
        serde_json::to_value(&levee).unwrap(),
        serde_json::to_value(&library).unwrap()
    );

    // Written, even as the library's own default, the keys are the file's.
    let set = Scenario::from_toml(&format!(
        "{base}[levee.retry]\ntimeout = \"20s\"\nattempt_timeout = \"2s\"\n[levee.bulkhead]\nmax_concurrent = 64\n"
    ))
    .unwrap();
    assert_eq!(set.levee.bulkhead.max_concurrent, 64);
    let retry = set.retry_config();
    assert_eq!(retry.timeout, Some(Duration::from_secs(20)));
    assert_eq!(retry.attempt_timeout, Some(Duration::from_secs(2)));
}

#[test]
fn levee_overrides_reach_the_breaker() {
    let mut sc = builtin("hard-outage", 40);
    sc.stacks = vec!["levee".into()];
    sc.faults[0].from = Duration::ZERO;
    sc.levee.breaker =
        toml::from_str("threshold = 2\ncooldown = \"10s\"\n").expect("breaker table");
    let r = run(&sc);
    let open = r.results[0]
        .transitions
        .iter()
        .find(|t| t.to == "open")
        .expect("opens");
    assert!(open.reason.contains('2'), "{}", open.reason);
}

#[test]
fn the_every_key_file_writes_every_key_of_the_librarys_config() {
    let text = include_str!("data/every-levee-key.toml");
    let file: toml::Table = text.parse().unwrap();
    let sc = Scenario::from_toml(text).unwrap();
    let library = tower_levee::config::LeveeConfig::default();
    // A default config writes every key but the unset options; the file's
    // config writes those it sets.
    for config in [
        toml::Table::try_from(&library),
        toml::Table::try_from(&sc.levee),
    ] {
        for (section, keys) in config.unwrap() {
            for key in keys.as_table().unwrap().keys() {
                if (section.as_str(), key.as_str()) == ("breaker", "threshold") {
                    continue; // a rolling window instead
                }
                assert!(
                    file["levee"]
                        .get(&section)
                        .and_then(|s| s.get(key))
                        .is_some(),
                    "levee.{section}.{key} is not in every-levee-key.toml"
                );
            }
        }
    }
}

#[test]
fn every_levee_key_parses_and_reaches_the_stack() {
    let sc = Scenario::from_toml(include_str!("data/every-levee-key.toml")).expect("parses");
    let r = run(&sc);
    assert_accounted(&r);
    let levee = stack(&r, "levee");
    let t: Vec<_> = levee
        .transitions
        .iter()
        .filter(|t| t.mechanism == "breaker")
        .collect();
    println!("{t:#?}");
    // A rolling window of 30 s, at least 4 calls, half of them failed; then a
    // 5 s cool-off without jitter, growing 3x from the first reopening (no
    // hold). The window holds the
    // successes before the outage too.
    let (failed, called) = t[0]
        .reason
        .strip_prefix("opened after ")
        .and_then(|r| r.split_once(" calls failed within 30s"))
        .and_then(|(counts, _)| counts.split_once(" of "))
        .map(|(f, c)| (f.parse::<u32>().unwrap(), c.parse::<u32>().unwrap()))
        .unwrap_or_else(|| panic!("a rolling-window trip: {}", t[0].reason));
    assert!(
        t[0].to == "open" && called >= 4 && failed * 2 >= called,
        "{}",
        t[0].reason
    );
    assert!(
        called > failed,
        "successes before the outage count: {}",
        t[0].reason
    );
    assert_eq!(t[1].to, "half_open");
    // (Half-open is entered by the first request after the cool-off: 5/s.)
    let gap = |a: usize, b: usize| t[b].t_ms - t[a].t_ms;
    assert!(
        (5_000..6_000).contains(&gap(0, 1)),
        "5 s cool-off: {}",
        gap(0, 1)
    );
    // The second cool-off counts from when the failed probe was sent (a
    // few hundred ms before it reopened the breaker), so the reopening to
    // the next half-open is a little under 15 s.
    assert!(
        (14_000..16_000).contains(&gap(2, 3)),
        "then 15 s from the probe: {}",
        gap(2, 3)
    );
}

#[test]
fn midstream_errors_before_output_fail_over_unseen_and_trip_the_primarys_breaker() {
    let r = run(&builtin("midstream-errors", 60));
    assert_accounted(&r);
    let levee = stack(&r, "levee");
    let open = levee
        .transitions
        .iter()
        .find(|t| t.target == "primary" && t.to == "open")
        .expect("the primary's breaker opens");
    println!(
        "levee: opened at {} ms ({}), {:.2}% served",
        open.t_ms,
        open.reason,
        levee.success_rate() * 100.0,
    );
    assert!(open.reason.contains("overloaded_error"), "{}", open.reason);
    assert!(levee.success_rate() >= 0.999, "held streams fail over");
    for other in ["unprotected", "naive"] {
        assert!(
            levee.success_rate() > stack(&r, other).success_rate(),
            "above {other}"
        );
    }

    // Without the hold, a stream that failed after its 200 is the caller's.
    let mut unheld = builtin("midstream-errors", 60);
    unheld.stacks = vec!["levee".into()];
    unheld.levee.breaker_layer.stream_hold = false;
    let r = run(&unheld);
    let unheld = stack(&r, "levee");
    assert!(
        unheld.success_rate() < 0.99 && unheld.failed.upstream > 0,
        "{:.2}%",
        unheld.success_rate() * 100.0
    );
}

#[test]
fn a_slow_first_token_costs_levee_its_first_content_timeout_and_the_others_the_wait() {
    let sc = builtin("slow-first-token", 120);
    let r = run(&sc);
    assert_accounted(&r);
    let timeout = sc
        .levee
        .breaker_layer
        .first_content_timeout
        .expect("set by the scenario");
    // The backup's normal latency, jitter included (±20%).
    let backup = sc.targets[1].latency.mul_f64(1.2);
    let levee = stack(&r, "levee");
    assert!(levee.success_rate() >= 0.999);
    assert!(
        Duration::from_millis(levee.latency_ms.p99) <= timeout + backup,
        "levee p99 {} ms",
        levee.latency_ms.p99
    );
    for other in ["unprotected", "naive"] {
        let s = stack(&r, other);
        assert!(
            Duration::from_millis(s.latency_ms.p99) >= Duration::from_secs(20),
            "{other} waits the first token out: p99 {} ms",
            s.latency_ms.p99
        );
    }
}

#[test]
fn pacing_keeps_the_throttle_storms_429s_under_2_percent_and_off_changes_nothing() {
    let paced = builtin("throttle-storm", 60);
    let mut unpaced = paced.clone();
    unpaced.levee.pace.enabled = false;
    let (on, off) = (run(&paced), run(&unpaced));
    let (on, off) = (stack(&on, "levee"), stack(&off, "levee"));
    let share = |s: &StackResult| s.upstream_rejected_calls as f64 / s.requests as f64;
    println!(
        "429s: paced {} ({:.2}%), unpaced {} ({:.2}%)",
        on.upstream_rejected_calls,
        share(on) * 100.0,
        off.upstream_rejected_calls,
        share(off) * 100.0
    );
    assert!(share(on) <= 0.02, "paced: 429s at most 2% of requests");
    assert!(share(off) > 0.2, "unpaced: the gate learns only from 429s");
    for s in [on, off] {
        assert!(
            s.success_rate() >= 0.999,
            "{}: every request served",
            s.stack
        );
    }
    // Pacing closes gates with its own reason, never the breaker.
    assert!(on.transitions.iter().any(|t| t.reason.starts_with("paced")));
    assert!(
        off.transitions
            .iter()
            .all(|t| !t.reason.starts_with("paced"))
    );
    assert_eq!(on.breaker_opens(), 0);
}

#[test]
fn token_limits_are_paced_on_the_token_headers() {
    let paced = builtin("token-limits", 90);
    let mut unpaced = paced.clone();
    unpaced.levee.pace.enabled = false;
    let (on, off) = (run(&paced), run(&unpaced));
    let (on, off) = (stack(&on, "levee"), stack(&off, "levee"));
    assert!(on.success_rate() >= 0.999 && off.success_rate() >= 0.999);
    let share = |s: &StackResult| s.upstream_rejected_calls as f64 / s.requests as f64;
    assert!(share(on) <= 0.02, "paced: {:.2}%", share(on) * 100.0);
    assert!(share(off) > 0.05, "unpaced: {:.2}%", share(off) * 100.0);
    assert!(
        on.transitions
            .iter()
            .any(|t| t.reason.contains("tokens at the reserve")),
        "paced on the token limit"
    );
}

#[test]
fn a_pool_of_the_storms_accounts_spreads_by_what_is_left_and_draws_no_429() {
    let mut sc = builtin("throttle-storm", 60);
    for t in &mut sc.targets {
        t.pool = Some("accounts".into());
    }
    let r = run(&sc);
    let levee = stack(&r, "levee");
    assert!(levee.success_rate() >= 0.999);
    assert!(
        levee.upstream_rejected_calls as f64 / levee.requests as f64 <= 0.005,
        "{} 429s",
        levee.upstream_rejected_calls
    );
    // Every account served a share: none idles while another is drained.
    assert_eq!(levee.upstream_calls_by_target.len(), 4);
    assert!(levee.upstream_calls_by_target.values().all(|&n| n > 100));
}

#[test]
fn azure_deployments_that_count_a_second_are_spread_and_draw_few_429s() {
    // The storm's four accounts as Azure deployments: each refuses more
    // than a second's share of its rate while its headers, counting ten
    // seconds, still show room.
    let mut spread = builtin("throttle-storm", 60);
    for t in &mut spread.targets {
        t.dialect = "azure".into();
    }
    let mut bursty = spread.clone();
    bursty.levee.pace.spread = false;
    let (on, off) = (run(&spread), run(&bursty));
    let (on, off) = (stack(&on, "levee"), stack(&off, "levee"));
    let share = |s: &StackResult| s.upstream_rejected_calls as f64 / s.requests as f64;
    println!(
        "429s: spread {} ({:.2}%), not spread {} ({:.2}%)",
        on.upstream_rejected_calls,
        share(on) * 100.0,
        off.upstream_rejected_calls,
        share(off) * 100.0
    );
    assert!(on.success_rate() >= 0.999 && off.success_rate() >= 0.999);
    assert!(share(on) <= 0.02, "spread: {:.2}%", share(on) * 100.0);
    assert!(share(off) > 0.1, "not spread: {:.2}%", share(off) * 100.0);
    assert!(
        on.transitions
            .iter()
            .any(|t| t.reason.contains("spread at the provider's rate"))
    );
    assert_eq!(on.breaker_opens(), 0);
}

#[test]
fn levee_is_back_on_a_recovered_target_within_10s_and_spares_a_dead_one() {
    // Faults of a minute or less: back within 10 s of their end, a
    // brownout's too (its last probe is slow, yet the next one is not held
    // off by it).
    for name in [
        "hard-outage",
        "midstream-errors",
        "flapping",
        "slow-first-token",
        "brownout",
    ] {
        let sc = builtin(name, 180);
        let r = run(&sc);
        let recover = stack(&r, "levee").recover.expect("recovers");
        assert!(recover <= Duration::from_secs(10), "{name}: {recover:?}");
    }
    // A primary dead for all three minutes: the calls that open its
    // breaker, then one probe per 10 s for a minute, then fewer.
    let mut dead = builtin("hard-outage", 180);
    dead.faults[0].from = Duration::ZERO;
    dead.faults[0].to = Duration::from_secs(180);
    let r = run(&dead);
    let levee = stack(&r, "levee");
    let copies = levee.upstream_probe_calls;
    let calls = levee.upstream_calls_by_target["primary"]
        .checked_sub(copies)
        .expect("every probe went to the primary");
    assert!(calls <= 15, "{calls} callers' calls to the dead primary");
    // Copies: one a second for the first minute open, then one in 2 s,
    // then one in 4 s (60 + 30 + 15).
    assert!(copies <= 106, "{copies} copies in three minutes");
}

/// Shadow probes (on by default, `[levee.failover] shadow_probes`): a copy
/// of a request the fallback serves probes the open primary every second, so
/// the primary is back within two seconds of the fault's end where its
/// callers' own probe waits out a cool-off, and no caller is failed.
#[test]
fn shadow_probes_bring_the_primary_back_within_two_seconds_of_the_faults_end() {
    for name in ["slow-first-token", "midstream-errors"] {
        // Hedging off: a hedged trial brings a slow primary back too.
        let mut off = builtin(name, 120);
        off.levee.failover.hedging = false;
        off.levee.failover.shadow_probes = false;
        let mut on = off.clone();
        on.levee.failover.shadow_probes = true;
        let (off, on) = (run(&off), run(&on));
        let (off, on) = (stack(&off, "levee"), stack(&on, "levee"));
        println!(
            "{name}: recovery {:?} without shadow probes, {:?} with; wasted {} / {}",
            off.recover, on.recover, off.upstream_rejected_calls, on.upstream_rejected_calls
        );
        let recover = on.recover.expect("the primary is back");
        assert!(recover <= Duration::from_secs(2), "{name}: {recover:?}");
        assert!(recover < off.recover.expect("back without"), "{name}");
        assert_eq!(on.success_rate(), 1.0, "{name}: every request served");
    }
}

/// Hedging (on by default): a target slow but not failing loses its
/// traffic within a second of calls, so the p99 stays near the healthy
/// one, within 5% of requests hedged; with it off, the slow target keeps
/// the tail.
#[test]
fn hedging_keeps_the_p99_of_a_slow_target_near_the_healthy_one() {
    // The bounds: brownout within twice its healthy p99, a late
    // first token within 1.5 s.
    for (name, twice_healthy, bound_ms) in [
        ("brownout", true, 1_914),
        ("slow-first-token", false, 1_500),
    ] {
        let on = builtin(name, 120);
        let mut off = on.clone();
        off.levee.failover.hedging = false;
        let mut healthy = on.clone();
        healthy.faults.clear();
        let (on, off, healthy) = (run(&on), run(&off), run(&healthy));
        let (on, off, healthy) = (
            stack(&on, "levee"),
            stack(&off, "levee"),
            stack(&healthy, "levee"),
        );
        println!(
            "{name}: p99 {} ms hedging, {} ms without, {} ms healthy; {} hedges of {}",
            on.latency_ms.p99,
            off.latency_ms.p99,
            healthy.latency_ms.p99,
            on.upstream_hedged_calls,
            on.requests
        );
        assert_eq!(on.success_rate(), 1.0, "{name}");
        assert!(
            on.latency_ms.p99 <= bound_ms,
            "{name}: p99 {}",
            on.latency_ms.p99
        );
        assert!(
            !twice_healthy || on.latency_ms.p99 <= 2 * healthy.latency_ms.p99,
            "{name}: p99 {} against healthy {}",
            on.latency_ms.p99,
            healthy.latency_ms.p99
        );
        assert!(off.latency_ms.p99 > 3 * on.latency_ms.p99, "{name}");
        assert!(
            on.upstream_hedged_calls * 20 <= on.requests,
            "{name}: {} hedges of {} requests",
            on.upstream_hedged_calls,
            on.requests
        );
        assert_eq!(
            healthy.upstream_hedged_calls, 0,
            "{name}: none when healthy"
        );
    }
}
