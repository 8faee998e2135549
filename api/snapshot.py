#!/usr/bin/env python3
"""The public API of Levee's library crates, one line per item, from rustdoc's JSON.

    python3 api/snapshot.py            # check: fail with a diff if the API changed
    python3 api/snapshot.py --bless    # write the new API into api/*.txt on purpose
    python3 api/snapshot.py --count    # the item counts only

A change that adds, removes or re-types a public item must update the
snapshot in the same commit, so a reviewer sees the API change as a diff.
Items under `#[doc(hidden)]` carry no promise and are left out, as rustdoc
leaves them out. The JSON comes from the project's own stable toolchain
(`RUSTC_BOOTSTRAP=1` unlocks `--output-format json`); its format is read by
name, so the script checks the format version it was written for.
"""
import difflib, json, os, subprocess, sys

CRATES = ["levee-core", "tower-levee", "levee-redis"]
# Crates whose items users name through another crate.
FACADES = {"serde_core": "serde", "axum_core": "axum"}
# Auto traits whose loss breaks a user: listed even though rustdoc infers them.
AUTO_TRAITS = {"Send", "Sync", "Unpin"}
FORMAT_VERSIONS = {57}
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def rustdoc_json(crate):
    env = dict(os.environ, RUSTC_BOOTSTRAP="1", RUSTDOCFLAGS="")
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    subprocess.run(
        ["cargo", "rustdoc", "-q", "-p", crate, "--lib", "--all-features", "--",
         "-Z", "unstable-options", "--output-format", "json"],
        cwd=ROOT, env=env, check=True)
    with open(os.path.join(target, "doc", crate.replace("-", "_") + ".json")) as f:
        return json.load(f)


class Api:
    def __init__(self, doc):
        if doc["format_version"] not in FORMAT_VERSIONS:
            sys.exit(f"rustdoc JSON format {doc['format_version']} is not one this "
                     f"script reads ({FORMAT_VERSIONS}): update api/snapshot.py")
        self.index = doc["index"]
        self.paths = doc["paths"]
        self.crates = doc["external_crates"]
        self.deps = set()
        self.lines = set()
        self.items = set()

    def item(self, id):
        return self.index.get(str(id))

    # ---- types -------------------------------------------------------
    def ty(self, t):
        if t is None:
            return "()"
        (k, v), = t.items()
        if k == "resolved_path":
            return self.path(v)
        if k == "generic" or k == "primitive":
            return v
        if k == "borrowed_ref":
            lt = v["lifetime"] + " " if v["lifetime"] else ""
            return "&" + lt + ("mut " if v["is_mutable"] else "") + self.ty(v["type"])
        if k == "tuple":
            return "(" + ", ".join(self.ty(x) for x in v) + ")"
        if k == "slice":
            return "[" + self.ty(v) + "]"
        if k == "array":
            return "[" + self.ty(v["type"]) + "; " + v["len"] + "]"
        if k == "impl_trait":
            return "impl " + " + ".join(self.bound(b) for b in v)
        if k == "dyn_trait":
            parts = [self.path(p["trait"]) for p in v["traits"]]
            if v.get("lifetime"):
                parts.append(v["lifetime"])
            return "dyn " + " + ".join(parts)
        if k == "raw_pointer":
            return "*" + ("mut " if v["is_mutable"] else "const ") + self.ty(v["type"])
        if k == "qualified_path":
            tr = self.path(v["trait"]) if v.get("trait") and v["trait"].get("path") else None
            if tr is None:
                return self.ty(v["self_type"]) + "::" + v["name"] + self.args(v.get("args"))
            return "<" + self.ty(v["self_type"]) + " as " + tr + ">::" + v["name"] + self.args(v.get("args"))
        if k == "function_pointer":
            sig = v["sig"]
            return "fn(" + ", ".join(self.ty(x[1]) for x in sig["inputs"]) + ")" + self.ret(sig["output"])
        if k == "infer":
            return "_"
        return k

    def path(self, p):
        self.note(p.get("id"))
        return p["path"].split("::")[-1] + self.args(p.get("args"))

    def note(self, id):
        """Records the crate of a type or trait named in the public API."""
        summary = self.paths.get(str(id)) if id is not None else None
        if summary and summary["crate_id"] != 0:
            name = self.crates[str(summary["crate_id"])]["name"]
            # The crate a user depends on, not the one that defines the
            # item: serde's and axum's traits live in their `_core` crates.
            name = FACADES.get(name, name)
            if name not in ("std", "core", "alloc", "pin_project_lite"):
                self.deps.add(name)

    def args(self, a):
        if not a:
            return ""
        (k, v), = a.items()
        if k == "angle_bracketed":
            out = []
            for g in v["args"]:
                (gk, gv), = g.items()
                out.append(gv if gk == "lifetime" else self.ty(gv) if gk == "type" else str(gv))
            for c in v.get("constraints", []):
                (bk, bv), = c["binding"].items()
                out.append(c["name"] + (" = " + self.ty(bv["type"]) if bk == "equality" and "type" in bv
                                        else ": " + " + ".join(self.bound(b) for b in bv) if bk == "constraint" else ""))
            return "<" + ", ".join(out) + ">" if out else ""
        if k == "parenthesized":
            return "(" + ", ".join(self.ty(x) for x in v["inputs"]) + ")" + self.ret(v.get("output"))
        return ""

    def ret(self, out):
        return "" if out is None else " -> " + self.ty(out)

    def bound(self, b):
        (k, v), = b.items()
        if k == "trait_bound":
            return ("?" if v.get("modifier") == "maybe" else "") + self.path(v["trait"])
        if k == "outlives":
            return v
        return k

    def generics(self, g):
        ps = []
        for p in g["params"]:
            (k, v), = p["kind"].items()
            if k == "lifetime":
                ps.append(p["name"])
            elif k == "type":
                if v.get("is_synthetic"):
                    continue
                bs = " + ".join(self.bound(b) for b in v["bounds"])
                ps.append(p["name"] + (": " + bs if bs else ""))
            elif k == "const":
                ps.append("const " + p["name"] + ": " + self.ty(v["type"]))
        return "<" + ", ".join(ps) + ">" if ps else ""

    def wheres(self, g):
        ws = []
        for w in g["where_predicates"]:
            (k, v), = w.items()
            if k == "bound_predicate":
                ws.append(self.ty(v["type"]) + ": " + " + ".join(self.bound(b) for b in v["bounds"]))
        return " where " + ", ".join(ws) if ws else ""

    def attrs(self, it):
        out = []
        for a in it.get("attrs", []):
            if a == "non_exhaustive" or (isinstance(a, dict) and "non_exhaustive" in a):
                out.append("#[non_exhaustive] ")
        if it.get("deprecation"):
            out.append("#[deprecated] ")
        return "".join(out)

    # ---- items -------------------------------------------------------
    def emit(self, id, line):
        self.lines.add(line)
        if id is not None:
            self.items.add(id)

    def fn(self, it, path):
        f = it["inner"]["function"]
        h = f["header"]
        quals = ("const " if h["is_const"] else "") + ("async " if h["is_async"] else "") + ("unsafe " if h["is_unsafe"] else "")
        ins = []
        for name, t in f["sig"]["inputs"]:
            if name == "self":
                s = self.ty(t)
                ins.append("self" if s == "Self" else "&self" if s == "&Self" else "&mut self" if s == "&mut Self" else "self: " + s)
            else:
                ins.append(name + ": " + self.ty(t))
        return (f"{self.attrs(it)}pub {quals}fn {path}{self.generics(f['generics'])}("
                + ", ".join(ins) + ")" + self.ret(f["sig"]["output"]) + self.wheres(f["generics"]))

    def walk(self, id, path, stack=()):
        it = self.item(id)
        if it is None or id in stack:
            return
        (k, v), = it["inner"].items()
        a = self.attrs(it)
        if k == "module":
            self.emit(id, f"pub mod {path}")
            for child in v["items"]:
                c = self.item(child)
                if c is None or c["visibility"] != "public" and "use" not in c["inner"]:
                    continue
                if "use" in c["inner"]:
                    self.use(c, path, stack + (id,))
                elif "impl" not in c["inner"]:
                    self.walk(child, path + "::" + c["name"], stack + (id,))
        elif k in ("struct", "enum", "union", "trait"):
            g = self.generics(v["generics"])
            self.emit(id, f"{a}pub {k} {path}{g}")
            if k == "struct":
                # A unit struct's kind is the bare string "unit".
                (sk, sv), = (v["kind"].items() if isinstance(v["kind"], dict) else [(v["kind"], None)])
                fields = sv["fields"] if sk == "plain" else [f for f in (sv or []) if f is not None] if sk == "tuple" else []
                for n, fid in enumerate(fields):
                    f = self.item(fid)
                    if f and f["visibility"] == "public":
                        name = f["name"] if sk == "plain" else str(n)
                        self.emit(fid, f"pub {path}::{name}: {self.ty(f['inner']['struct_field'])}")
            if k == "enum":
                for vid in v["variants"]:
                    var = self.item(vid)
                    self.emit(vid, f"{self.attrs(var)}pub {path}::{var['name']}{self.variant(var)}")
            if k == "trait":
                for mid in v["items"]:
                    m = self.item(mid)
                    self.member(m, path)
            for iid in v.get("impls", []):
                self.impl(self.item(iid), path, id)
        elif k == "function":
            self.emit(id, self.fn(it, path))
        elif k == "constant":
            self.emit(id, f"pub const {path}: {self.ty(v['type'])}")
        elif k == "static":
            self.emit(id, f"pub static {path}: {self.ty(v['type'])}")
        elif k == "type_alias":
            self.emit(id, f"pub type {path}{self.generics(v['generics'])} = {self.ty(v['type'])}")
        elif k == "macro":
            self.emit(id, f"pub macro {path}!")
        else:
            self.emit(id, f"pub {k} {path}")

    def variant(self, var):
        (k, v), = var["inner"]["variant"]["kind"].items() if isinstance(var["inner"]["variant"]["kind"], dict) else (("plain", None),)
        if k == "tuple":
            return "(" + ", ".join(self.ty(self.item(f)["inner"]["struct_field"]) if f is not None else "_" for f in v) + ")"
        if k == "struct":
            return " { " + ", ".join(self.item(f)["name"] + ": " + self.ty(self.item(f)["inner"]["struct_field"]) for f in v["fields"]) + (", .." if v.get("has_stripped_fields") else "") + " }"
        return ""

    def member(self, m, owner):
        if m is None:
            return
        (k, v), = m["inner"].items()
        p = owner + "::" + m["name"]
        if k == "function":
            self.emit(m["id"], self.fn(m, p))
        elif k == "assoc_const":
            self.emit(m["id"], f"pub const {p}: {self.ty(v['type'])}")
        elif k == "assoc_type":
            self.emit(m["id"], f"pub type {p}" + (" = " + self.ty(v["type"]) if v.get("type") else ""))

    def impl(self, it, owner, owner_id=None):
        if it is None:
            return
        v = it["inner"]["impl"]
        if v["blanket_impl"] is not None:
            return
        if v["is_synthetic"] and (v["trait"] is None or v["trait"]["path"].split("::")[-1] not in AUTO_TRAITS):
            return
        if v["trait"] is None:
            for mid in v["items"]:
                m = self.item(mid)
                if m and m["visibility"] == "public":
                    self.member(m, owner)
        else:
            neg = "!" if v["is_negative"] else ""
            target = v["for"]
            # The impl's own self type when it is not the owner (`impl
            # PartialEq<State> for &str` sits on State's page).
            is_owner = "resolved_path" in target and target["resolved_path"].get("id") == owner_id
            for_ty = owner if is_owner or owner_id is None else self.ty(target)
            head = f"impl{self.generics(v['generics'])} {neg}{self.path(v['trait'])} for {for_ty}"
            self.emit(None, head + self.wheres(v["generics"]))
            for mid in v["items"]:
                m = self.item(mid)
                if m is None:
                    continue
                (mk, mv), = m["inner"].items()
                if mk == "assoc_type" and mv.get("type"):
                    self.emit(None, f"{head}: type {m['name']} = {self.ty(mv['type'])}")
                elif mk == "assoc_const":
                    self.emit(None, f"{head}: const {m['name']}: {self.ty(mv['type'])}")

    def use(self, u, path, stack):
        v = u["inner"]["use"]
        target = v.get("id")
        if u["visibility"] != "public":
            return
        if v["is_glob"]:
            t = self.item(target) if target is not None else None
            if target in stack:
                return
            stack = stack + (target,)
            if t and "module" in t["inner"]:
                for child in t["inner"]["module"]["items"]:
                    c = self.item(child)
                    if c and c["visibility"] == "public" and "impl" not in c["inner"]:
                        self.walk(child, path + "::" + c["name"], stack) if "use" not in c["inner"] else self.use(c, path, stack)
            else:
                self.emit(None, f"pub use {path}::* = {v['source']}::*")
            return
        if target is not None and self.item(target) is not None:
            self.walk(target, path + "::" + v["name"], stack)
        else:
            self.emit(None, f"pub use {path}::{v['name']} = {v['source']}")


def snapshot(crate):
    doc = rustdoc_json(crate)
    api = Api(doc)
    api.walk(doc["root"], crate.replace("-", "_"))
    # The crates whose types or traits the API names: a public dependency's
    # major version is part of this crate's API.
    deps = [f"public dependency {d}" for d in sorted(api.deps)]
    prefix = f"pub use {crate.replace('-', '_')}::deps::"
    exported = {l[len(prefix):].split(" = ")[0] for l in api.lines if l.startswith(prefix)}
    missing = sorted(api.deps - exported)
    if missing:
        sys.exit(f"{crate}: public dependencies not re-exported in `deps`: {', '.join(missing)}")
    return deps + sorted(api.lines), len(api.items)


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "--check"
    changed = False
    for crate in CRATES:
        lines, items = snapshot(crate)
        kinds = {}
        for l in lines:
            k = l.replace("#[non_exhaustive] ", "").split(" ")[0:2]
            if k[0] == "public":
                key = "dependency"
            elif k[0] == "pub":
                key = k[1] if k[1] in ("fn", "struct", "enum", "trait", "mod", "const", "type", "use") else "field/variant"
            else:
                key = "impl"
            kinds[key] = kinds.get(key, 0) + 1
        print(f"{crate}: {len(lines)} lines, {items} items; " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
        if mode == "--count":
            continue
        file = os.path.join(HERE, crate + ".txt")
        text = "\n".join(lines) + "\n"
        if mode == "--bless":
            with open(file, "w") as f:
                f.write(text)
            continue
        old = open(file).read() if os.path.exists(file) else ""
        if old != text:
            changed = True
            sys.stdout.writelines(difflib.unified_diff(
                old.splitlines(True), text.splitlines(True), f"api/{crate}.txt (committed)", f"api/{crate}.txt (this tree)"))
    if changed:
        sys.exit("the public API changed: if on purpose, run `python3 api/snapshot.py --bless` and commit api/*.txt")


if __name__ == "__main__":
    main()
