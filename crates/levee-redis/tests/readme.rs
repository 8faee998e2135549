//! The README's "Running a fleet" code is the function the `fleet`
//! example runs: it cannot drift into code that does not build.

/// `text` with its whitespace collapsed (rustfmt may wrap differently).
fn squashed(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn the_readme_fleet_code_is_the_example_that_runs() {
    let readme = include_str!("../../../README.md");
    let section = &readme[readme.find("## Running a fleet").expect("the section")..];
    let start = section.find("```rust\n").expect("a rust block") + "```rust\n".len();
    let block = &section[start..start + section[start..].find("```").expect("closed")];
    let example = include_str!("../examples/fleet.rs");
    let function = block
        .find("/// One replica's")
        .map(|at| &block[at..])
        .expect("the function in the README");
    assert!(
        squashed(example).contains(&squashed(function)),
        "README's fleet code differs from examples/fleet.rs:\n{function}"
    );
}
