//! `foresight docs`: the documentation made from the program itself, so that it cannot drift
//! from it: the manual pages (from the CLI's definition) and the REST reference page of the
//! documentation site (from the OpenAPI document the service serves).

use anyhow::Context;
use clap::Subcommand;
use serde_json::Value;
use std::fmt::Write as _;
use std::path::PathBuf;

#[derive(Subcommand)]
pub enum DocsCommand {
    /// Write the manual pages: foresight(1) and one per subcommand (foresight-job-submit(1), …).
    Man {
        /// The directory to write them into (created if missing).
        #[arg(long)]
        out: PathBuf,
    },
    /// Print the REST reference (Markdown) made from the OpenAPI document
    /// (docs/src/reference/rest.md).
    Rest,
}

pub fn run(command: DocsCommand, cli: clap::Command) -> anyhow::Result<()> {
    match command {
        DocsCommand::Man { out } => {
            std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
            clap_mangen::generate_to(cli, &out)
                .with_context(|| format!("writing the manual pages into {}", out.display()))?;
        }
        DocsCommand::Rest => {
            let doc = serde_json::to_value(foresight_daemon::api::openapi_document())?;
            out!("{}", rest_reference(&doc));
        }
    }
    Ok(())
}

/// The REST reference page: each path and method with its summary, parameters, request body
/// and responses, then each schema with its fields. Deterministic: the document's maps are
/// walked in key order.
pub fn rest_reference(doc: &Value) -> String {
    let mut md = String::new();
    let version = doc["info"]["version"].as_str().unwrap_or("");
    md.push_str("# REST API reference\n\n");
    md.push_str(
        "<!-- Made by `foresight docs rest` from the OpenAPI document; do not edit by hand. A test \
         (crates/foresight-cli/tests/cli/docs.rs) fails when this page is stale. -->\n\n",
    );
    let _ = writeln!(
        md,
        "The service's API (version {version}), as its OpenAPI document describes it. The \
         document itself is served at `/api/v1/openapi.json` without a token. Every route \
         under `/api/v1` asks for a bearer token (`Authorization: Bearer TOKEN`) unless it \
         says *no token*; errors are `ApiError` bodies.\n"
    );
    md.push_str("## Routes\n\n| Method | Path | Summary |\n|---|---|---|\n");
    let paths = doc["paths"].as_object().cloned().unwrap_or_default();
    let methods = ["get", "put", "post", "delete", "patch"];
    for (path, item) in &paths {
        for m in methods {
            if let Some(op) = item.get(m) {
                let _ = writeln!(
                    md,
                    "| {} | [`{path}`](#{}) | {} |",
                    m.to_uppercase(),
                    anchor(m, path),
                    cell(&summary(op))
                );
            }
        }
    }
    md.push('\n');
    for (path, item) in &paths {
        for m in methods {
            let Some(op) = item.get(m) else { continue };
            let _ = writeln!(
                md,
                "## {} `{path}` {{#{}}}\n",
                m.to_uppercase(),
                anchor(m, path)
            );
            let text = description(op);
            if !text.is_empty() {
                let _ = writeln!(md, "{text}\n");
            }
            if op["security"] == serde_json::json!([{}]) {
                md.push_str("*No token.*\n\n");
            }
            if let Some(params) = op["parameters"].as_array().filter(|p| !p.is_empty()) {
                md.push_str("Parameters:\n\n| Name | In | Type | Required | Description |\n");
                md.push_str("|---|---|---|---|---|\n");
                for p in params {
                    let _ = writeln!(
                        md,
                        "| `{}` | {} | {} | {} | {} |",
                        p["name"].as_str().unwrap_or(""),
                        p["in"].as_str().unwrap_or(""),
                        cell(&type_of(&p["schema"])),
                        if p["required"] == true { "yes" } else { "no" },
                        cell(p["description"].as_str().unwrap_or(""))
                    );
                }
                md.push('\n');
            }
            if let Some(body) = op.get("requestBody") {
                let _ = writeln!(
                    md,
                    "Request body{}: {}\n",
                    if body["required"] == true {
                        ""
                    } else {
                        " (optional)"
                    },
                    content(&body["content"])
                );
            }
            if let Some(responses) = op["responses"].as_object() {
                md.push_str("Responses:\n\n| Status | Description | Body |\n|---|---|---|\n");
                for (status, r) in responses {
                    let _ = writeln!(
                        md,
                        "| {status} | {} | {} |",
                        cell(r["description"].as_str().unwrap_or("")),
                        cell(&content(&r["content"]))
                    );
                }
                md.push('\n');
            }
        }
    }
    md.push_str("## Schemas\n\n");
    let schemas = doc["components"]["schemas"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    for (name, schema) in &schemas {
        let _ = writeln!(md, "### {name} {{#schema-{}}}\n", slug(name));
        if let Some(d) = schema["description"].as_str() {
            let _ = writeln!(md, "{}\n", d.trim());
        }
        // An `allOf` is the fields of the schemas it names, and of its inline parts.
        let parts: Vec<&Value> = match schema["allOf"].as_array() {
            Some(all) => all.iter().collect(),
            None => vec![schema],
        };
        let named: Vec<String> = parts
            .iter()
            .filter(|p| p.get("$ref").is_some())
            .map(|p| type_of(p))
            .collect();
        if !named.is_empty() {
            let _ = writeln!(md, "All the fields of {}, and:\n", named.join(" and "));
        }
        let mut props = serde_json::Map::new();
        let mut required: Vec<&str> = Vec::new();
        for part in &parts {
            if let Some(p) = part["properties"].as_object() {
                props.extend(p.clone());
            }
            if let Some(r) = part["required"].as_array() {
                required.extend(r.iter().filter_map(Value::as_str));
            }
        }
        if !props.is_empty() {
            md.push_str("| Field | Type | Required | Description |\n|---|---|---|---|\n");
            for (field, p) in &props {
                let _ = writeln!(
                    md,
                    "| `{field}` | {} | {} | {} |",
                    cell(&type_of(p)),
                    if required.contains(&field.as_str()) {
                        "yes"
                    } else {
                        "no"
                    },
                    cell(p["description"].as_str().unwrap_or(""))
                );
            }
            md.push('\n');
        } else {
            let _ = writeln!(md, "Type: {}\n", type_of(schema));
        }
    }
    md.truncate(md.trim_end().len());
    md.push('\n');
    md
}

/// The anchor of an operation's section: `get-api-v1-jobs-id`.
fn anchor(method: &str, path: &str) -> String {
    format!("{method}-{}", slug(path))
}

fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-').to_string()
}

/// An operation's summary (its doc comment's first paragraph), else its description.
fn summary(op: &Value) -> String {
    op["summary"]
        .as_str()
        .or_else(|| op["description"].as_str())
        .unwrap_or("")
        .to_string()
}

fn description(op: &Value) -> String {
    let s = op["summary"].as_str().unwrap_or("").trim();
    let d = op["description"].as_str().unwrap_or("").trim();
    match (s.is_empty(), d.is_empty()) {
        (_, true) => s.to_string(),
        (true, false) => d.to_string(),
        (false, false) => format!("{s}\n\n{d}"),
    }
}

/// A table cell's text: one line, pipes escaped.
fn cell(s: &str) -> String {
    s.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace('|', "\\|")
}

/// A schema's type, short: `integer (int64)`, `array of JobView`, `JobState`, `string or null`.
fn type_of(s: &Value) -> String {
    if let Some(r) = s["$ref"].as_str() {
        let name = r.rsplit('/').next().unwrap_or(r);
        return format!("[{name}](#schema-{})", slug(name));
    }
    for key in ["oneOf", "anyOf", "allOf"] {
        if let Some(alts) = s[key].as_array() {
            let parts: Vec<String> = alts.iter().map(type_of).collect();
            return parts.join(if key == "allOf" { " and " } else { " or " });
        }
    }
    if let Some(props) = s["properties"].as_object() {
        let fields: Vec<String> = props.keys().map(|k| format!("`{k}`")).collect();
        return format!("object with {}", fields.join(", "));
    }
    let ty = match &s["type"] {
        Value::String(t) => t.clone(),
        Value::Array(ts) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" or "),
        _ if s.get("enum").is_some() => String::from("enum"),
        _ => String::from("any"),
    };
    let ty = if ty.starts_with("array") {
        ty.replacen("array", &format!("array of {}", type_of(&s["items"])), 1)
    } else {
        ty
    };
    let mut out = match s["format"].as_str() {
        Some(f) => format!("{ty} ({f})"),
        None => ty,
    };
    if let Some(values) = s["enum"].as_array() {
        let values: Vec<String> = values
            .iter()
            .map(|v| match v {
                Value::String(t) => format!("`{t}`"),
                other => format!("`{other}`"),
            })
            .collect();
        let _ = write!(out, ": {}", values.join(", "));
    }
    out
}

/// A body's media types and schemas: `application/json: [JobView](#schema-jobview)`.
fn content(c: &Value) -> String {
    let Some(c) = c.as_object() else {
        return String::new();
    };
    c.iter()
        .map(|(media, m)| {
            if m.get("schema").is_some() {
                format!("`{media}`: {}", type_of(&m["schema"]))
            } else {
                format!("`{media}`")
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}
