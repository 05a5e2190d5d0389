//! The OpenAPI document the real server serves is valid OpenAPI 3, by an independent
//! validator (`openapi-spec-validator`, installed by `scripts/test.sh`).

#![allow(clippy::unwrap_used)] // tests fail loudly by design

use crate::common::Server;
use std::process::Command;

const VALIDATOR: &str = "openapi-spec-validator";

#[test]
fn the_served_openapi_document_is_valid() {
    let server = Server::start(1);
    let (status, doc) = server.http_as("").get("/api/v1/openapi.json");
    assert_eq!(status, 200, "{doc}");
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("openapi.json");
    std::fs::write(&path, serde_json::to_vec_pretty(&doc).unwrap()).unwrap();
    let out = Command::new(VALIDATOR)
        .args(["--validation-errors", "all"])
        .arg(&path)
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "{VALIDATOR} cannot be run ({e}); install it with `python3 -m pip install \
                 openapi-spec-validator` (scripts/test.sh does)"
            )
        });
    assert!(
        out.status.success(),
        "{VALIDATOR} rejects the served document:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // The validator does say OK on a valid document, and rejects an invalid one: the
    // check above can fail.
    assert!(String::from_utf8_lossy(&out.stdout).contains("OK"));
    // A workflow edge's files are documented as a list of paths.
    let files = &doc["components"]["schemas"]["EdgeSpec"]["properties"]["files"];
    assert_eq!(files["type"], "array", "{files}");
    assert_eq!(files["items"]["type"], "string", "{files}");
    let mut broken = doc.clone();
    broken["paths"]["/api/v1/jobs"]["get"]["parameters"][0]["in"] = "path".into();
    std::fs::write(&path, serde_json::to_vec(&broken).unwrap()).unwrap();
    let out = Command::new(VALIDATOR).arg(&path).output().unwrap();
    assert!(
        !out.status.success(),
        "the validator accepts a query parameter in the path"
    );
}

/// Every route, asked without a token, with ids that are not numbers or name nothing, with an
/// empty or a non-JSON body, answers only statuses its operation documents.
#[test]
fn every_status_a_route_answers_is_documented() {
    let server = Server::start(1);
    let (_, doc) = server.http_as("").get("/api/v1/openapi.json");
    let client = reqwest::blocking::Client::new();
    let mut undocumented = Vec::new();
    let mut asked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let documented: Vec<&String> = op["responses"].as_object().unwrap().keys().collect();
            let has_body = op.get("requestBody").is_some();
            for filler in ["x", "999999", "nobody"] {
                let concrete = path.replace("{id}", filler).replace("{name}", filler);
                for token in [None, Some(server.token.as_str())] {
                    for json in [true, false] {
                        let url = format!("{}{concrete}", server.url);
                        let mut req = match method.as_str() {
                            "get" => client.get(&url),
                            "post" => client.post(&url),
                            "delete" => client.delete(&url),
                            other => panic!("method {other} of {path} is not probed"),
                        };
                        if let Some(t) = token {
                            req = req.bearer_auth(t);
                        }
                        if has_body {
                            req = if json {
                                req.header("Content-Type", "application/json").body("{}")
                            } else {
                                req.header("Content-Type", "text/plain").body("x")
                            };
                        }
                        let status = req.send().unwrap().status().as_u16().to_string();
                        asked += 1;
                        if !documented.contains(&&status) {
                            undocumented.push(format!(
                                "{} {concrete} ({}, {}): {status}, documented {documented:?}",
                                method.to_uppercase(),
                                if token.is_some() { "admin" } else { "no token" },
                                if json { "json" } else { "text" },
                            ));
                        }
                    }
                }
            }
        }
    }
    assert!(asked > 100, "only {asked} requests");
    assert!(
        undocumented.is_empty(),
        "statuses the document does not list:\n{}",
        undocumented.join("\n")
    );
}
