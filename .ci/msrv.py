#!/usr/bin/env python3
"""The declared rust-version, checked without a second toolchain.

CI has one Rust toolchain (the newest) and cannot download another, so the
MSRV is checked in two halves:
- our code: clippy's `incompatible_msrv` (on by default, denied in CI)
  refuses a standard-library API newer than `rust-version`;
- our dependencies: every crate the library crates build with (normal and
  build dependencies, every feature on) declares a `rust-version` no newer
  than ours, read from `cargo metadata` at the locked versions.
Language features newer than `rust-version` are the one thing neither half
sees.
"""
import json, subprocess, sys, tomllib

LIBRARIES = ("levee-core", "tower-levee", "levee-redis")


def version(text):
    parts = [int("".join(c for c in p if c.isdigit()) or 0) for p in text.split("-")[0].split(".")[:3]]
    return tuple(parts + [0] * (3 - len(parts)))


def main():
    with open("Cargo.toml", "rb") as f:
        declared = tomllib.load(f)["workspace"]["package"]["rust-version"]
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--all-features", "--locked"],
        check=True, capture_output=True, text=True).stdout)
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    stack = [p["id"] for p in meta["packages"] if p["name"] in LIBRARIES]
    seen = set()
    while stack:
        id = stack.pop()
        if id in seen:
            continue
        seen.add(id)
        for dep in nodes[id]["deps"]:
            if any(k["kind"] in (None, "build") for k in dep["dep_kinds"]):
                stack.append(dep["pkg"])
    newer = sorted(
        (packages[i]["name"], packages[i]["version"], packages[i]["rust_version"])
        for i in seen
        if packages[i].get("rust_version") and version(packages[i]["rust_version"]) > version(declared))
    for name, v, rv in newer:
        print(f"{name} {v} needs Rust {rv}, newer than our rust-version {declared}")
    print(f"rust-version {declared}: {len(seen)} crates in the libraries' build, {len(newer)} need a newer Rust")
    sys.exit(1 if newer else 0)


if __name__ == "__main__":
    main()
