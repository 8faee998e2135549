//! The crates' imports go one way: no source file reaches, through any
//! chain of `use` declarations and paths, back to itself, and the error
//! vocabulary every layer builds on imports no layer.
//!
//! The check reads the source as text, the way a reader would follow the
//! imports: every `crate::`, `super::` and `self::` path in a file (outside
//! comments, strings and `#[cfg(test)]` items) is resolved to the file that
//! defines what it names, following `pub use` re-exports through `mod.rs`
//! and `lib.rs`. A module file's `pub use` of its own items is its public
//! face, not a dependency, so it is not an edge.
//!
//! To see the graph: `cargo test -p tower-levee --test architecture -- --nocapture`.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// A module path: `["breaker", "scope"]`.
type ModulePath = Vec<String>;

/// Where a re-exported name comes from: the module its path starts from, and the path.
type Origin = (ModulePath, Vec<String>);

/// One crate's source: each file's module path, what it imports, what its
/// module file re-exports.
struct Crate {
    root: PathBuf,
    /// Module path → file.
    modules: BTreeMap<Vec<String>, PathBuf>,
    /// Module path → name → (module the path starts from, the path).
    reexports: BTreeMap<ModulePath, BTreeMap<String, Origin>>,
    /// File → the files it depends on.
    edges: BTreeMap<PathBuf, BTreeSet<PathBuf>>,
}

impl Crate {
    fn read(root: &Path) -> Crate {
        let mut files = Vec::new();
        collect(root, &mut files);
        let mut sources = BTreeMap::new();
        let mut excluded = BTreeSet::new();
        for file in &files {
            let text = strip_comments_and_strings(&fs::read_to_string(file).unwrap());
            let (text, test_modules) = strip_cfg_test(&text);
            let module = module_path(root, file);
            for name in test_modules {
                let mut child = module.clone();
                child.push(name);
                excluded.insert(child);
            }
            sources.insert(file.clone(), (module, text));
        }
        // Files declared by a `#[cfg(test)] mod x;` (and everything under them) are tests.
        sources.retain(|_, (module, _)| !excluded.iter().any(|prefix| module.starts_with(prefix)));
        let modules = sources
            .iter()
            .map(|(file, (module, _))| (module.clone(), file.clone()))
            .collect();
        let mut krate = Crate {
            root: root.to_owned(),
            modules,
            reexports: BTreeMap::new(),
            edges: BTreeMap::new(),
        };
        for (file, (module, text)) in &sources {
            if is_module_file(file) {
                for (path, public) in use_paths(text) {
                    if public && let Some((base, segments)) = anchor(&krate.modules, module, &path)
                    {
                        let name = path.last().cloned().unwrap_or_default();
                        krate
                            .reexports
                            .entry(module.clone())
                            .or_default()
                            .insert(name, (base, segments));
                    }
                }
            }
        }
        for (file, (module, text)) in &sources {
            let mut deps = BTreeSet::new();
            let facade = is_module_file(file);
            let mut paths: Vec<Vec<String>> = use_paths(text)
                .into_iter()
                .filter(|(_, public)| !(facade && *public))
                .map(|(path, _)| path)
                .collect();
            paths.extend(inline_paths(text));
            for path in paths {
                if let Some(target) = krate.resolve(module, &path)
                    && &target != file
                {
                    deps.insert(target);
                }
            }
            krate.edges.insert(file.clone(), deps);
        }
        krate
    }

    /// The file defining what `path`, written in `module`, names.
    fn resolve(&self, module: &[String], path: &[String]) -> Option<PathBuf> {
        let (base, segments) = anchor(&self.modules, module, path)?;
        self.resolve_from(base, &segments, 0)
    }

    fn resolve_from(
        &self,
        mut at: Vec<String>,
        segments: &[String],
        depth: usize,
    ) -> Option<PathBuf> {
        for (i, segment) in segments.iter().enumerate() {
            let mut child = at.clone();
            child.push(segment.clone());
            if self.modules.contains_key(&child) {
                at = child;
                continue;
            }
            if depth < 8
                && let Some((base, rest)) = self.reexports.get(&at).and_then(|r| r.get(segment))
            {
                let mut rest = rest.clone();
                rest.extend_from_slice(&segments[i + 1..]);
                return self.resolve_from(base.clone(), &rest, depth + 1);
            }
            break;
        }
        self.modules.get(&at).cloned()
    }

    fn name(&self, file: &Path) -> String {
        file.strip_prefix(&self.root)
            .unwrap_or(file)
            .display()
            .to_string()
    }

    /// Every set of files that import each other in a circle (Tarjan).
    fn cycles(&self) -> Vec<Vec<String>> {
        struct Walk<'a> {
            krate: &'a Crate,
            index: BTreeMap<&'a Path, usize>,
            low: BTreeMap<&'a Path, usize>,
            stack: Vec<&'a Path>,
            found: Vec<Vec<String>>,
        }
        fn visit<'a>(w: &mut Walk<'a>, v: &'a Path) {
            let n = w.index.len();
            w.index.insert(v, n);
            w.low.insert(v, n);
            w.stack.push(v);
            for next in &w.krate.edges[v] {
                let next = next.as_path();
                if !w.index.contains_key(next) {
                    visit(w, next);
                    let low = w.low[v].min(w.low[next]);
                    w.low.insert(v, low);
                } else if w.stack.contains(&next) {
                    let low = w.low[v].min(w.index[next]);
                    w.low.insert(v, low);
                }
            }
            if w.low[v] == w.index[v] {
                let mut component = Vec::new();
                while let Some(top) = w.stack.pop() {
                    component.push(w.krate.name(top));
                    if top == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    w.found.push(component);
                }
            }
        }
        let mut walk = Walk {
            krate: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            found: Vec::new(),
        };
        for file in self.edges.keys() {
            if !walk.index.contains_key(file.as_path()) {
                visit(&mut walk, file);
            }
        }
        walk.found
    }

    fn deps_of(&self, file: &str) -> BTreeSet<String> {
        let path = self.root.join(file);
        self.edges
            .get(&path)
            .unwrap_or_else(|| panic!("{file} is not a source file"))
            .iter()
            .map(|d| self.name(d))
            .collect()
    }

    fn print(&self) {
        for (file, deps) in &self.edges {
            let deps: Vec<_> = deps.iter().map(|d| self.name(d)).collect();
            println!("{} -> {}", self.name(file), deps.join(", "));
        }
    }
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn is_module_file(file: &Path) -> bool {
    file.file_name()
        .is_some_and(|n| n == "mod.rs" || n == "lib.rs")
}

/// `src/breaker/scope.rs` → `["breaker", "scope"]`; `src/breaker/mod.rs` → `["breaker"]`.
fn module_path(root: &Path, file: &Path) -> Vec<String> {
    let mut parts: Vec<String> = file
        .strip_prefix(root)
        .unwrap()
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// Where a path written in `module` starts, and the rest of it; `None` for
/// a path into another crate. A path may start at a child module of
/// `module` (`pub use error::BoxError` in `lib.rs`).
fn anchor(
    modules: &BTreeMap<Vec<String>, PathBuf>,
    module: &[String],
    path: &[String],
) -> Option<(Vec<String>, Vec<String>)> {
    let mut base = module.to_vec();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("super" | "self") => {
            while let Some(first) = rest.first() {
                match first.as_str() {
                    "super" => {
                        base.pop();
                    }
                    "self" => {}
                    _ => break,
                }
                rest = &rest[1..];
            }
        }
        Some(first) => {
            let mut child = base.clone();
            child.push(first.to_owned());
            if !modules.contains_key(&child) {
                return None;
            }
        }
        None => return None,
    }
    Some((base, rest.to_vec()))
}

/// The paths of every `use` declaration, expanded (`a::{b, c::d}` → `a::b`,
/// `a::c::d`), each with whether the declaration is `pub`.
fn use_paths(text: &str) -> Vec<(Vec<String>, bool)> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = find_word(rest, "use") {
        let before = rest[..at].trim_end();
        let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
        let after = &rest[at + 3..];
        let Some(end) = after.find(';') else { break };
        for path in expand(after[..end].trim()) {
            let path: String = path
                .split(" as ")
                .next()
                .unwrap_or_default()
                .chars()
                .filter(|c| !c.is_whitespace())
                .collect();
            let segments: Vec<String> = path
                .split("::")
                .filter(|s| !s.is_empty() && *s != "*")
                .map(str::to_owned)
                .collect();
            if !segments.is_empty() {
                out.push((segments, public));
            }
        }
        rest = &after[end + 1..];
    }
    out
}

/// `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let Some(open) = tree.find('{') else {
        return vec![tree.to_owned()];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
    let mut parts = Vec::new();
    let (mut depth, mut from) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[from..i]);
                from = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[from..]);
    parts
        .into_iter()
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .flat_map(|p| expand(p).into_iter().map(|e| format!("{prefix}{e}")))
        .collect()
}

/// Paths written in code outside `use` declarations: `crate::error::BoxError`.
fn inline_paths(text: &str) -> Vec<Vec<String>> {
    let mut code = String::new();
    let mut rest = text;
    while let Some(at) = find_word(rest, "use") {
        code.push_str(&rest[..at]);
        match rest[at..].find(';') {
            Some(end) => rest = &rest[at + end + 1..],
            None => rest = "",
        }
    }
    code.push_str(rest);
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(found) = code[from..].find(start) {
            let at = from + found;
            from = at + start.len();
            let preceded = at > 0
                && (bytes[at - 1].is_ascii_alphanumeric()
                    || bytes[at - 1] == b'_'
                    || bytes[at - 1] == b':');
            if preceded {
                continue;
            }
            let end = code[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(code.len(), |e| at + e);
            let segments: Vec<String> = code[at..end]
                .split("::")
                .filter(|s| !s.is_empty())
                .map(str::to_owned)
                .collect();
            out.push(segments);
        }
    }
    out
}

/// The byte offset of `word` standing alone in `text`.
fn find_word(text: &str, word: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(found) = text[from..].find(word) {
        let at = from + found;
        let end = at + word.len();
        let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        let alone =
            (at == 0 || !ident(bytes[at - 1])) && (end == bytes.len() || !ident(bytes[end]));
        if alone {
            return Some(at);
        }
        from = end;
    }
    None
}

/// `text` without comments, string and char literals (so that a path in a
/// doc comment or a message is not an import).
fn strip_comments_and_strings(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == 'r' && (next == Some('#') || next == Some('"')) && !prev_is_ident(&chars, i)
        {
            let mut hashes = 0;
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) {
                    j += hashes + 1;
                    break;
                }
                j += 1;
            }
            out.push_str("\"\"");
            i = j;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' {
            // A char literal (`'x'`, `'\n'`, `'"'`), or a lifetime (`'a`).
            if next == Some('\\') {
                let mut j = i + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
                out.push_str("' '");
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
                out.push_str("' '");
            } else {
                out.push(c);
                i += 1;
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn prev_is_ident(chars: &[char], i: usize) -> bool {
    i > 0 && (chars[i - 1].is_alphanumeric() || chars[i - 1] == '_')
}

/// `text` without its `#[cfg(test)]` items, and the names of the modules
/// that `#[cfg(test)] mod name;` declares in other files.
fn strip_cfg_test(text: &str) -> (String, Vec<String>) {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::new();
    let mut modules = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(MARK) {
        out.push_str(&rest[..at]);
        let item = &rest[at + MARK.len()..];
        let head = item.trim_start();
        let head = head
            .strip_prefix("pub(crate)")
            .or_else(|| head.strip_prefix("pub"))
            .unwrap_or(head)
            .trim_start();
        if let Some(name) = head.strip_prefix("mod ") {
            let name = name.trim_start();
            let ident: String = name
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if name[ident.len()..].trim_start().starts_with(';') {
                modules.push(ident);
            }
        }
        // The item ends at its first `;` outside braces, or with its block.
        let bytes = item.as_bytes();
        let mut depth = 0usize;
        let mut end = item.len();
        for (i, &b) in bytes.iter().enumerate() {
            match b {
                b'{' => depth += 1,
                b'}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                b';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        rest = &item[end..];
    }
    out.push_str(rest);
    (out, modules)
}

fn crate_src(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("src")
}

#[test]
fn no_source_file_imports_its_way_back_to_itself() {
    for name in ["levee-core", "tower-levee"] {
        let krate = Crate::read(&crate_src(name));
        assert!(
            krate.edges.len() > 20,
            "{name}: read {} files",
            krate.edges.len()
        );
        let cycles = krate.cycles();
        if !cycles.is_empty() {
            krate.print();
        }
        assert!(
            cycles.is_empty(),
            "{name}: files that import each other in a circle: {cycles:?}"
        );
    }
}

#[test]
fn the_error_vocabulary_imports_no_layer_and_each_layer_error_only_it() {
    let krate = Crate::read(&crate_src("tower-levee"));
    krate.print();
    for leaf in ["error/refusal.rs", "error/stream.rs", "inline_str.rs"] {
        assert_eq!(krate.deps_of(leaf), BTreeSet::new(), "{leaf} is a leaf");
    }
    // A stream gone quiet is a timeout: the one error it reads by type.
    assert_eq!(
        krate.deps_of("error/transport.rs"),
        BTreeSet::from(["error/stream.rs".to_owned()]),
        "error/transport.rs reads only the vocabulary's own errors"
    );
    // And on the crate's leaf string type (a rejection copies its scope's
    // name inline), never on a layer's internals.
    for layer_error in [
        "breaker/error.rs",
        "bulkhead/error.rs",
        "client_limit/error.rs",
        "failover/error.rs",
    ] {
        let deps = krate.deps_of(layer_error);
        assert!(
            deps.iter()
                .all(|d| d == "error/refusal.rs" || d == "inline_str.rs"),
            "{layer_error} builds only on the vocabulary: {deps:?}"
        );
    }
    // The one place that finds a rejection reads the layers' errors, nothing else.
    let finder = krate.deps_of("error/rejection.rs");
    let expected: BTreeSet<String> = [
        "breaker/error.rs",
        "bulkhead/error.rs",
        "client_limit/error.rs",
        "error/refusal.rs",
        "failover/error.rs",
    ]
    .map(str::to_owned)
    .into();
    assert_eq!(finder, expected);
}

#[test]
fn the_reader_resolves_paths_through_re_exports_and_ignores_comments_and_tests() {
    let text = strip_comments_and_strings(
        "use super::{a::B, c::{D, e::F}};\n// use crate::x;\nlet s = \"crate::y\"; let c = '\"'; fn f<'a>() {}\n",
    );
    let paths: Vec<String> = use_paths(&text)
        .into_iter()
        .map(|(p, _)| p.join("::"))
        .collect();
    assert_eq!(paths, ["super::a::B", "super::c::D", "super::c::e::F"]);
    assert!(inline_paths(&text).is_empty(), "{text}");
    let (code, modules) =
        strip_cfg_test("a\n#[cfg(test)]\nmod tests;\n#[cfg(test)]\nfn t() { crate::x() }\nb");
    assert_eq!(modules, ["tests"]);
    assert!(!code.contains("crate::x") && code.contains('a') && code.contains('b'));
    let krate = Crate::read(&crate_src("tower-levee"));
    // `crate::BoxError` is re-exported by lib.rs from error/mod.rs from error/refusal.rs.
    let target = krate.resolve(&[], &["crate".into(), "BoxError".into()]);
    assert_eq!(
        target.map(|t| krate.name(&t)).as_deref(),
        Some("error/refusal.rs")
    );
}
