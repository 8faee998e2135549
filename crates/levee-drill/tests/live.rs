//! `--live`: the throttle storm over real loopback HTTP in real time
//! (compressed) keeps the shape it has in virtual time.

use std::time::Duration;

use levee_drill::report::table;
use levee_drill::run::run_scenario_live;
use levee_drill::suite;

#[test]
fn live_throttle_storm_has_the_virtual_shape() {
    let mut sc = suite::scenarios()
        .expect("the built-in scenarios parse")
        .into_iter()
        .find(|s| s.name == "throttle-storm")
        .expect("throttle-storm");
    sc.duration = Duration::from_secs(60);
    let began = std::time::Instant::now();
    let r = run_scenario_live(&sc, 6.0).expect("runs live");
    print!("{}", table(&r));
    println!("live run took {:.1}s", began.elapsed().as_secs_f64());
    for s in &r.results {
        assert_eq!(s.requests, s.succeeded + s.failed.total(), "{}", s.stack);
    }
    let levee = r
        .results
        .iter()
        .find(|s| s.stack == "levee")
        .expect("levee");
    let naive = r
        .results
        .iter()
        .find(|s| s.stack == "naive")
        .expect("naive");
    assert_eq!(
        levee.breaker_opens(),
        0,
        "no breaker opens in the throttle storm"
    );
    assert!(naive.breaker_opens() > 0, "the naive breakers cascade");
    assert!(levee.success_rate() >= 0.97, "levee serves");
    assert!(naive.success_rate() < levee.success_rate());
}

#[test]
fn shortening_a_scenario_brings_its_faults_closer_and_keeps_its_load_limits_and_latencies() {
    // flapping has a flap period; slow-first-token a first token's delay.
    for name in ["flapping", "slow-first-token"] {
        let sc = suite::scenarios()
            .expect("the built-in scenarios parse")
            .into_iter()
            .find(|s| s.name == name)
            .expect("built in");
        let short = levee_drill::live::shortened(&sc, 4.0);
        assert_eq!(short.duration, sc.duration / 4);
        for (f, s) in sc.faults.iter().zip(&short.faults) {
            assert_eq!(
                (s.from, s.to, s.period),
                (f.from / 4, f.to / 4, f.period / 4)
            );
            assert_eq!(s.delay, f.delay, "a first token's delay is a latency");
        }
        assert_eq!(short.load.rate, sc.load.rate);
        assert_eq!(short.load.timeout, sc.load.timeout);
        for (t, s) in sc.targets.iter().zip(&short.targets) {
            assert_eq!((s.latency, s.rpm, s.tpm), (t.latency, t.rpm, t.tpm));
        }
        // `--time-scale` compresses the same timeline, and the rest with it.
        let scaled = levee_drill::live::scaled(&sc, 4.0);
        assert_eq!(scaled.duration, short.duration);
        assert_eq!(scaled.faults[0].to, short.faults[0].to);
        assert_eq!(scaled.load.rate, sc.load.rate * 4.0);
    }
}
