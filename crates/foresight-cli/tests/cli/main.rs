//! End-to-end tests of the `foresight` binary on local-executor clusters: the service, its
//! CLI, REST API, dashboard, staging, workflows, isolation and the WIKI protocol. One binary
//! (one link) for all of them; each module is one subject.
#![allow(clippy::unwrap_used)] // tests fail loudly by design

#[path = "../common/mod.rs"]
mod common;
#[path = "../common/executor.rs"]
mod fixture;
#[path = "../common/wiki.rs"]
mod wiki;

mod accounting;
mod accounts;
mod api_hardening;
mod begin;
mod cli_fixes;
mod cli_hostile_server;
mod cli_service;
mod confinement;
mod dashboard;
mod data_dir_lock;
mod dependencies;
mod docs;
mod executor;
mod first_contact;
mod grid_sites;
mod hardening;
mod identity;
mod inputs;
mod isolation;
mod licences;
mod logs;
mod openapi;
mod plan_select;
mod predict_service;
mod preempt;
mod router_fuzz;
mod security;
mod service;
mod slowloris;
mod small_fixes;
mod staging;
mod store_lock;
mod tls;
mod wiki_peer;
mod wiki_scheduler;
mod wiki_service;
mod workflows;
