//! Every seed and every saved regression input runs through its target
//! without breaking an invariant: the fuzz targets as plain tests.

use std::path::Path;

fn regressions(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("regressions")
        .join(target);
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    entries
        .map(|e| {
            let path = e.expect("a directory entry").path();
            let bytes = std::fs::read(&path).expect("a regression input");
            (path.display().to_string(), bytes)
        })
        .collect()
}

fn replay(target: &str, run: fn(&[u8])) {
    let seeds = levee_fuzz::seeds::of(target);
    assert!(!seeds.is_empty(), "{target} has seeds");
    for seed in &seeds {
        run(seed);
    }
    for (_name, input) in regressions(target) {
        run(&input);
    }
}

#[test]
fn classify_seeds_and_regressions_keep_every_invariant() {
    replay("classify", levee_fuzz::classify);
}

#[test]
fn hint_seeds_and_regressions_keep_every_invariant() {
    replay("hints", levee_fuzz::hints);
}

#[test]
fn stream_seeds_and_regressions_keep_every_invariant() {
    replay("stream", levee_fuzz::stream);
}

#[test]
fn request_seeds_and_regressions_keep_every_invariant() {
    replay("request", levee_fuzz::request);
}

#[test]
fn config_seeds_and_regressions_keep_every_invariant() {
    replay("config", levee_fuzz::config);
}

#[test]
fn every_config_seed_is_a_valid_configuration() {
    // A seed that does not parse would only exercise the parser's errors.
    for seed in levee_fuzz::seeds::of("config") {
        let text = String::from_utf8(seed).unwrap();
        let parsed = if text.starts_with('{') {
            serde_json::from_str::<tower_levee::config::LeveeConfig>(&text)
                .map_err(|e| e.to_string())
        } else {
            toml::from_str::<tower_levee::config::LeveeConfig>(&text).map_err(|e| e.to_string())
        };
        parsed.unwrap_or_else(|e| panic!("{text}\n{e}"));
    }
}

#[test]
fn rules_seeds_and_regressions_keep_every_invariant() {
    replay("rules", levee_fuzz::rules);
}

#[test]
fn rules_match_seeds_and_regressions_keep_every_invariant() {
    replay("rules_match", levee_fuzz::rules_match);
}
