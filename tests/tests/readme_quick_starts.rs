//! The README's quick starts are the code of `examples/quickstart_*.rs`,
//! which CI compiles: the README cannot drift into code that does not build.

use std::path::Path;

/// The code blocks of the README's "Quick start" section.
fn quick_start_blocks(readme: &str) -> Vec<String> {
    let start = readme
        .find("## Quick start")
        .expect("a Quick start section");
    let section = &readme[start..];
    let end = section[3..].find("\n## ").map_or(section.len(), |i| i + 3);
    section[..end]
        .split("```rust\n")
        .skip(1)
        .map(|block| block.split("```").next().unwrap_or_default().to_owned())
        .collect()
}

/// The code without its leading `//!` doc and with runs of blanks collapsed
/// (rustfmt may align comments differently than the README).
fn normalised(code: &str) -> String {
    code.lines()
        .filter(|l| !l.starts_with("//!"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn the_readme_quick_starts_are_the_compiled_examples() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let blocks = quick_start_blocks(&readme);
    assert_eq!(
        blocks.len(),
        3,
        "a hyper, a reqwest and an async-openai quick start"
    );
    for (block, example) in blocks.iter().zip([
        "quickstart_hyper",
        "quickstart_reqwest",
        "quickstart_async_openai",
    ]) {
        let file = root.join("examples").join(format!("{example}.rs"));
        let code = std::fs::read_to_string(&file).unwrap();
        assert_eq!(
            normalised(block),
            normalised(&code),
            "README quick start differs from {}",
            file.display()
        );
        assert!(
            block.lines().count() <= 22,
            "{example}: a quick start stays short"
        );
    }
}
