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
