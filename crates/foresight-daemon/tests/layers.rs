//! The daemon's layers, checked from its source: `config` → `state` → `runtime` → `api`,
//! each importing only from the layers before it, and no import cycle between the modules
//! of any one directory (a child may use its ancestors, which contain it).
//!
//! A reference is any `crate::…` or `super::…` path outside comments, `use` lists
//! included; `crate::Name` re-exported by `lib.rs` counts as the module it comes from.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first.
const LAYERS: [&str; 4] = ["config", "state", "runtime", "api"];

type ModPath = Vec<String>;

/// Every module of the crate (from its file layout) and its source without comments.
fn modules(src: &Path) -> BTreeMap<ModPath, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel: PathBuf = path.strip_prefix(src).unwrap().with_extension("");
            let mut m: ModPath = rel
                .iter()
                .map(|c| c.to_string_lossy().into_owned())
                .collect();
            if m.last().is_some_and(|l| l == "mod" || l == "lib") {
                m.pop();
            }
            let text = std::fs::read_to_string(&path).unwrap();
            out.insert(m, without_comments(&text));
        }
    }
    out
}

fn without_comments(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            // A `//` inside a string literal ("http://…") is not a comment.
            Some(i) if l[..i].matches('"').count() % 2 == 0 => &l[..i],
            _ => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths that `text` names after each `crate::` or `super::`, with `{…}` lists expanded.
fn references(text: &str) -> Vec<(bool, Vec<String>)> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("::") {
        let before = &text[..i];
        let root = if before.ends_with("crate") && !ident_char_before(before, 5) {
            true
        } else if before.ends_with("super") && !ident_char_before(before, 5) {
            false
        } else {
            continue;
        };
        let rest = &text[i + 2..];
        for path in expand(rest) {
            out.push((root, path));
        }
    }
    out
}

fn ident_char_before(before: &str, len: usize) -> bool {
    before[..before.len() - len]
        .chars()
        .next_back()
        .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
}

/// The paths at the start of `rest`: `a::b::C` or `a::{b::C, d}`.
fn expand(rest: &str) -> Vec<Vec<String>> {
    let ident: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let after = &rest[ident.len()..];
    if ident.is_empty() {
        if let Some(inner) = after.strip_prefix('{') {
            return group(inner)
                .iter()
                .flat_map(|item| expand(item.trim()))
                .collect();
        }
        return vec![];
    }
    if let Some(more) = after.strip_prefix("::") {
        let tails = expand(more);
        if tails.is_empty() {
            return vec![vec![ident]];
        }
        return tails
            .into_iter()
            .map(|mut t| {
                t.insert(0, ident.clone());
                t
            })
            .collect();
    }
    vec![vec![ident]]
}

/// The comma-separated items of a `{…}` list whose opening brace is already read.
fn group(inner: &str) -> Vec<&str> {
    let (mut depth, mut start, mut items) = (0usize, 0, Vec::new());
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                items.push(&inner[start..i]);
                return items;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items
}

/// The module a path names: its longest prefix that is a module.
fn target(path: &[String], known: &BTreeSet<ModPath>) -> ModPath {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| known.contains(p))
        .unwrap_or_default()
}

/// Every reference between modules: (from, to).
fn edges() -> BTreeSet<(ModPath, ModPath)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mods = modules(&src);
    let known: BTreeSet<ModPath> = mods.keys().cloned().collect();
    // `pub use a::b::C;` in lib.rs: `crate::C` is `a::b`.
    let mut reexports: BTreeMap<String, ModPath> = BTreeMap::new();
    for line in mods[&vec![]].lines() {
        if let Some(p) = line.trim().strip_prefix("pub use ") {
            let parts: Vec<String> = p
                .trim_end_matches(';')
                .split("::")
                .map(String::from)
                .collect();
            let name = parts.last().unwrap().clone();
            reexports.insert(name, target(&parts, &known));
        }
    }
    let mut out = BTreeSet::new();
    for (from, text) in &mods {
        for (is_crate, path) in references(text) {
            let absolute: Vec<String> = if is_crate {
                match reexports.get(&path[0]) {
                    Some(m) if path.len() == 1 || !known.contains(&vec![path[0].clone()]) => {
                        m.clone()
                    }
                    _ => path,
                }
            } else {
                let mut base = from.clone();
                base.pop();
                base.into_iter().chain(path).collect()
            };
            let to = target(&absolute, &known);
            if &to != from {
                out.insert((from.clone(), to));
            }
        }
    }
    out
}

#[test]
fn each_layer_imports_only_from_the_layers_before_it() {
    let rank = |m: &ModPath| m.first().and_then(|l| LAYERS.iter().position(|x| x == l));
    let mut wrong = Vec::new();
    for (from, to) in edges() {
        if let (Some(a), Some(b)) = (rank(&from), rank(&to)) {
            if b > a {
                wrong.push(format!("{} -> {}", from.join("::"), to.join("::")));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers ({}):\n{}",
        LAYERS.join(" -> "),
        wrong.join("\n")
    );
}

#[test]
fn no_import_cycle_between_the_modules_of_a_directory() {
    // Per directory: its children, and which child uses which (a reference from anywhere
    // under one child to anywhere under a sibling).
    let mut graphs: BTreeMap<ModPath, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (from, to) in edges() {
        let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
        if from.len() > common && to.len() > common {
            graphs
                .entry(from[..common].to_vec())
                .or_default()
                .entry(from[common].clone())
                .or_default()
                .insert(to[common].clone());
        }
    }
    let mut cycles = Vec::new();
    for (dir, graph) in &graphs {
        if let Some(cycle) = find_cycle(graph) {
            let dir = if dir.is_empty() {
                "crate".into()
            } else {
                dir.join("::")
            };
            cycles.push(format!("in {dir}: {}", cycle.join(" -> ")));
        }
    }
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == n) {
            let mut c = path[i..].to_vec();
            c.push(n.to_string());
            return Some(c);
        }
        if done.contains(n) {
            return None;
        }
        path.push(n.to_string());
        for m in graph.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.insert(n.to_string());
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn the_checker_sees_a_cycle_and_a_reference_against_the_layers() {
    let known: BTreeSet<ModPath> = [vec![], vec!["state".into()], vec!["api".into()]]
        .into_iter()
        .collect();
    let text = "use crate::{api::Router, state::world::World}; // crate::config::Config\n";
    let named: Vec<ModPath> = references(&without_comments(text))
        .into_iter()
        .map(|(_, p)| target(&p, &known))
        .collect();
    assert_eq!(
        named,
        vec![vec!["api".to_string()], vec!["state".to_string()]]
    );
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a".to_string(), ["b".to_string()].into()),
        ("b".to_string(), ["a".to_string()].into()),
    ]
    .into();
    assert_eq!(find_cycle(&graph).unwrap(), vec!["a", "b", "a"]);
}
