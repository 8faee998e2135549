//! Writes each target's seed corpus to `<dir>/<target>/` (default
//! `target/seeds`): `cargo run --bin seeds -- DIR`.

use std::path::PathBuf;

fn main() -> std::io::Result<()> {
    let dir = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "target/seeds".into()),
    );
    for target in levee_fuzz::seeds::TARGETS {
        let out = dir.join(target);
        std::fs::create_dir_all(&out)?;
        let seeds = levee_fuzz::seeds::of(target);
        for (i, seed) in seeds.iter().enumerate() {
            std::fs::write(out.join(format!("seed-{i:03}")), seed)?;
        }
        println!("{target}: {} seeds in {}", seeds.len(), out.display());
    }
    Ok(())
}
