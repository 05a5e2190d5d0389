//! The documentation made from the program: the REST reference page of the documentation site
//! is what `foresight docs rest` prints from the OpenAPI document (so it cannot drift from the
//! API), and `foresight docs man` writes a manual page for every command that `man` renders.

use crate::common::BIN;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const REST_PAGE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../docs/src/reference/rest.md"
);

#[test]
fn the_rest_reference_page_is_the_one_the_openapi_document_makes() {
    let out = Command::new(BIN).args(["docs", "rest"]).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let made = String::from_utf8(out.stdout).unwrap();
    let committed = std::fs::read_to_string(REST_PAGE).unwrap();
    assert!(
        made == committed,
        "docs/src/reference/rest.md is stale: regenerate it with \
         `cargo run -p foresight-cli -- docs rest > docs/src/reference/rest.md`"
    );
    // It documents every route and schema of the document the server serves.
    let doc = served_openapi();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            let heading = format!("## {} `{path}` ", method.to_uppercase());
            assert!(made.contains(&heading), "no section `{heading}`");
        }
    }
    for name in doc["components"]["schemas"].as_object().unwrap().keys() {
        assert!(made.contains(&format!("### {name} ")), "no schema {name}");
    }
}

/// The document a real server serves.
fn served_openapi() -> serde_json::Value {
    let server = crate::common::Server::start(1);
    let (status, doc) = server.http_as("").get("/api/v1/openapi.json");
    assert_eq!(status, 200, "{doc}");
    doc
}

#[test]
fn every_command_has_a_manual_page_that_man_renders() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["docs", "man", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let pages: BTreeSet<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    // Every command `--help` lists, at every level, has its page, named as git names its own;
    // hidden commands (`supervise`, `docs`) have none.
    let mut expected = BTreeSet::new();
    commands(&mut vec!["foresight".to_string()], &mut expected);
    assert!(expected.contains("foresight-job-submit.1"), "{expected:?}");
    assert!(expected.len() > 40, "{expected:?}");
    assert_eq!(pages, expected);

    let Some(man) = which("man") else {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but `man` is missing (scripts/test.sh installs man-db)"
        );
        eprintln!("skipped rendering: no `man` here (apt-get install man-db)");
        return;
    };
    for page in &pages {
        let path = dir.path().join(page);
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(
            text.starts_with(".ie \\n(.g .ds Aq"),
            "{page} is not roff:\n{text}"
        );
        let out = Command::new(&man)
            .args(["--warnings", "-l"])
            .arg(&path)
            .env("MANPAGER", "cat")
            .env("PAGER", "cat")
            .env("MANWIDTH", "100")
            .env("LANG", "C.UTF-8")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let shown = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stderr.trim().is_empty(),
            "man -l {page}: {}\n{stderr}",
            out.status
        );
        let name = page.trim_end_matches(".1");
        for section in ["NAME", "SYNOPSIS", "DESCRIPTION"] {
            assert!(shown.contains(section), "{page} has no {section}:\n{shown}");
        }
        assert!(
            shown.contains(name),
            "{page} does not name {name}:\n{shown}"
        );
    }
}

/// The page names of the command `path` and of every command under it, from `--help`.
fn commands(path: &mut Vec<String>, pages: &mut BTreeSet<String>) {
    pages.insert(format!("{}.1", path.join("-")));
    let out = Command::new(BIN)
        .args(&path[1..])
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success(), "{path:?} --help");
    let help = String::from_utf8(out.stdout).unwrap();
    let mut in_commands = false;
    let mut subs = Vec::new();
    for line in help.lines() {
        if line == "Commands:" {
            in_commands = true;
        } else if in_commands {
            // `  name  description`; a wrapped description is indented further.
            match line.strip_prefix("  ") {
                Some(rest) if !rest.starts_with(' ') => {
                    let name = rest.split_whitespace().next().unwrap();
                    if name != "help" {
                        subs.push(name.to_string());
                    }
                }
                Some(_) => {}
                None => in_commands = false,
            }
        }
    }
    for sub in subs {
        path.push(sub);
        commands(path, pages);
        path.pop();
    }
}

fn which(name: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| Path::new(p).is_file())
    })
}
