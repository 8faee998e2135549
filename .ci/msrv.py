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

A feature that wraps a dependency with a newer Rust of its own states its
MSRV apart (the README and the feature's docs say so): tower-levee's `aws`
needs 1.94.1, as the AWS SDK's crates do, and its `rig` 1.95.0, as
`rig-http` does. What only such a feature brings in is checked against the
feature's MSRV; everything else against ours.
"""
import json, subprocess, sys, tomllib

LIBRARIES = ("levee-core", "tower-levee", "levee-redis")
# crate -> feature -> the Rust it needs.
FEATURE_MSRV = {"tower-levee": {"aws": "1.94.1", "rig": "1.95.0"}}


def version(text):
    parts = [int("".join(c for c in p if c.isdigit()) or 0) for p in text.split("-")[0].split(".")[:3]]
    return tuple(parts + [0] * (3 - len(parts)))


def feature_deps(crate, feature):
    """The optional dependencies `feature` of `crate` turns on (`dep:name`)."""
    with open(f"crates/{crate}/Cargo.toml", "rb") as f:
        features = tomllib.load(f)["features"]
    return {d[4:] for d in features[feature] if d.startswith("dep:")}


def reach(stack, nodes, skip):
    """Every package reachable from `stack` by normal and build edges, not
    through an edge from a library to a dependency in `skip`."""
    seen = set()
    while stack:
        id = stack.pop()
        if id in seen:
            continue
        seen.add(id)
        for dep in nodes[id]["deps"]:
            if dep["pkg"] in skip.get(id, ()):
                continue
            if any(k["kind"] in (None, "build") for k in dep["dep_kinds"]):
                stack.append(dep["pkg"])
    return seen


def newer_than(ids, packages, msrv):
    return sorted(
        (packages[i]["name"], packages[i]["version"], packages[i]["rust_version"])
        for i in ids
        if packages[i].get("rust_version") and version(packages[i]["rust_version"]) > version(msrv))


def main():
    with open("Cargo.toml", "rb") as f:
        declared = tomllib.load(f)["workspace"]["package"]["rust-version"]
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--all-features", "--locked"],
        check=True, capture_output=True, text=True).stdout)
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    libraries = {p["name"]: p["id"] for p in meta["packages"] if p["name"] in LIBRARIES}
    # The edges only a feature with an MSRV of its own brings in.
    skip, apart = {}, []
    for crate, features in FEATURE_MSRV.items():
        lib = libraries[crate]
        for feature, msrv in features.items():
            names = feature_deps(crate, feature)
            ids = {d["pkg"] for d in nodes[lib]["deps"] if packages[d["pkg"]]["name"] in names}
            skip.setdefault(lib, set()).update(ids)
            apart.append((f"{crate}/{feature}", msrv, ids))
    # Another library turning such a feature on would take its MSRV too.
    for p in meta["packages"]:
        if p["name"] not in LIBRARIES:
            continue
        for dep in p["dependencies"]:
            for feature in FEATURE_MSRV.get(dep["name"], {}):
                if feature in dep.get("features", []):
                    print(f"{p['name']} turns on {dep['name']}/{feature}, which needs a newer Rust")
                    sys.exit(1)
    seen = reach(list(libraries.values()), nodes, skip)
    failed = False
    for name, v, rv in newer_than(seen, packages, declared):
        print(f"{name} {v} needs Rust {rv}, newer than our rust-version {declared}")
        failed = True
    print(f"rust-version {declared}: {len(seen)} crates in the libraries' build")
    for feature, msrv, ids in apart:
        only = reach(list(ids), nodes, {}) - seen
        for name, v, rv in newer_than(only, packages, msrv):
            print(f"{name} {v} needs Rust {rv}, newer than {feature}'s {msrv}")
            failed = True
        print(f"{feature} needs Rust {msrv}: {len(only)} crates it alone brings in")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
