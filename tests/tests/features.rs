//! Each library crate's feature table (the `# Features` section of its
//! crate docs, what docs.rs shows) names every feature its `Cargo.toml`
//! declares, and no other.

use std::collections::BTreeSet;
use std::path::Path;

/// The features a `Cargo.toml` declares, `default` aside.
fn declared(manifest: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let toml: toml::Table = text.parse().unwrap();
    toml.get("features")
        .and_then(|f| f.as_table())
        .map(|f| f.keys().filter(|k| *k != "default").cloned().collect())
        .unwrap_or_default()
}

/// The features the crate docs' table names: the first column of the rows
/// after `//! # Features`.
fn documented(lib: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(lib).unwrap();
    text.lines()
        .skip_while(|l| l.trim() != "//! # Features")
        .skip(1)
        .take_while(|l| l.starts_with("//!") && !l.starts_with("//! #"))
        .filter_map(|l| l.strip_prefix("//! | `"))
        .filter_map(|row| row.split_once('`').map(|(name, _)| name.to_owned()))
        .collect()
}

#[test]
fn every_feature_of_each_library_is_in_its_feature_table() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    for name in ["levee-core", "tower-levee", "levee-redis"] {
        let dir = root.join("crates").join(name);
        let declared = declared(&dir.join("Cargo.toml"));
        let documented = documented(&dir.join("src/lib.rs"));
        assert!(!declared.is_empty(), "{name} declares no feature");
        assert_eq!(
            documented, declared,
            "{name}: the feature table against Cargo.toml"
        );
    }
}
