#![allow(clippy::unwrap_used)] // tests fail loudly by design
//! The web dashboard in a real headless Chromium driven over WebDriver (chromedriver): log in
//! with a token, walk every page of a real daemon that runs real jobs, and assert what the
//! pages show (the DOM). A screenshot of each page is saved under
//! `target/tmp/dashboard/` (`CARGO_TARGET_TMPDIR`) for people to look at.
//!
//! Without `chromium` and `chromedriver` the test says so and passes, unless `CI` is set
//! (`scripts/test.sh` installs them): then their absence fails it.

use crate::common::*;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Chromium and chromedriver, or `None` after saying the test is skipped; with `CI` set a
/// missing browser fails the test instead (a skipped check is not a passed one).
fn browser_or_skip() -> Option<(PathBuf, PathBuf)> {
    let found = browser_binaries();
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI is set but chromium or chromedriver is missing (scripts/test.sh installs them)"
        );
        eprintln!(
            "skipped: no chromium and chromedriver here (apt-get install chromium chromium-driver)"
        );
    }
    found
}

/// Chromium's binary and chromedriver, if this machine has them.
fn browser_binaries() -> Option<(PathBuf, PathBuf)> {
    let which = |names: &[&str]| {
        names
            .iter()
            .map(PathBuf::from)
            .find(|p| p.is_file())
            .or_else(|| {
                let path = std::env::var_os("PATH")?;
                std::env::split_paths(&path)
                    .flat_map(|d| names.iter().map(move |n| d.join(n)))
                    .find(|p| p.is_file())
            })
    };
    // Debian's /usr/bin/chromium is a wrapper script; the browser itself is under /usr/lib.
    let chromium = which(&["/usr/lib/chromium/chromium", "chromium", "chromium-browser"])?;
    let driver = which(&["chromedriver"])?;
    Some((chromium, driver))
}

/// chromedriver on a free loopback port, killed on drop.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    fn start(binary: &Path, log: &Path) -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(binary)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        wait_for("chromedriver", Duration::from_secs(20), || {
            std::net::TcpStream::connect(("127.0.0.1", port))
                .ok()
                .map(|_| ())
        });
        Driver { child, url }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One headless Chromium session, driven synchronously from the test.
struct Browser {
    rt: tokio::runtime::Runtime,
    client: Option<Client>,
    base: String,
    shots: PathBuf,
}

impl Browser {
    fn open(driver: &Driver, chromium: &Path, profile: &Path, base: &str) -> Browser {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                    "--no-first-run", "--disable-background-networking",
                    "--disable-component-update", "--disable-sync",
                    "--disable-dev-shm-usage", "--window-size=1400,1000",
                    format!("--user-data-dir={}", profile.display()),
                ],
            },
        });
        let Value::Object(caps) = caps else {
            unreachable!()
        };
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = rt
            .block_on(
                ClientBuilder::new(connector)
                    .capabilities(caps)
                    .connect(&driver.url),
            )
            .unwrap_or_else(|e| panic!("starting Chromium through chromedriver: {e}"));
        let shots = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard");
        std::fs::create_dir_all(&shots).unwrap();
        Browser {
            rt,
            client: Some(client),
            base: base.to_string(),
            shots,
        }
    }

    fn c(&self) -> &Client {
        self.client.as_ref().unwrap()
    }

    /// Opens `#/route` of the dashboard.
    fn goto(&self, route: &str) {
        let url = format!("{}/{route}", self.base);
        self.rt.block_on(self.c().goto(&url)).unwrap();
    }

    /// The first element matching `css`, waiting up to 10 s for it.
    fn find(&self, css: &str) -> fantoccini::elements::Element {
        self.rt
            .block_on(
                self.c()
                    .wait()
                    .at_most(Duration::from_secs(10))
                    .for_element(Locator::Css(css)),
            )
            .unwrap_or_else(|e| panic!("no element {css:?} on the page: {e}"))
    }

    /// How many elements match `css` now.
    fn count(&self, css: &str) -> usize {
        self.rt
            .block_on(self.c().find_all(Locator::Css(css)))
            .unwrap()
            .len()
    }

    /// The visible text of the first element matching `css` (found again if the page
    /// redrew it meanwhile).
    fn text(&self, css: &str) -> String {
        self.find(css);
        self.text_until(css, "any text", |_| true)
    }

    /// Waits until the text of `css` satisfies `pred`; that text.
    fn text_until(&self, css: &str, what: &str, pred: impl Fn(&str) -> bool) -> String {
        wait_for(
            &format!("{css} to show {what}"),
            Duration::from_secs(10),
            || {
                let all = self
                    .rt
                    .block_on(self.c().find_all(Locator::Css(css)))
                    .ok()?;
                let e = all.first()?;
                let t = self.rt.block_on(e.text()).ok()?;
                pred(&t).then_some(t)
            },
        )
    }

    fn attr(&self, css: &str, name: &str) -> Option<String> {
        self.find(css);
        wait_for(&format!("{css}'s {name}"), Duration::from_secs(10), || {
            let all = self
                .rt
                .block_on(self.c().find_all(Locator::Css(css)))
                .ok()?;
            self.rt.block_on(all.first()?.attr(name)).ok()
        })
    }

    fn click(&self, css: &str) {
        let e = self.find(css);
        self.rt.block_on(e.click()).unwrap();
    }

    fn type_into(&self, css: &str, text: &str) {
        let e = self.find(css);
        self.rt.block_on(e.clear()).unwrap();
        self.rt.block_on(e.send_keys(text)).unwrap();
    }

    fn select(&self, css: &str, value: &str) {
        let e = self.find(css);
        self.rt.block_on(e.select_by_value(value)).unwrap();
    }

    fn displayed(&self, css: &str) -> bool {
        let e = self.find(css);
        self.rt.block_on(e.is_displayed()).unwrap()
    }

    fn script(&self, js: &str) -> Value {
        self.rt.block_on(self.c().execute(js, vec![])).unwrap()
    }

    /// Saves the viewport as `NAME.png` among the test's artifacts.
    fn screenshot(&self, name: &str) {
        let png = self.rt.block_on(self.c().screenshot()).unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::write(self.shots.join(format!("{name}.png")), png).unwrap();
    }

    /// Logs in through the form with `token`.
    fn login(&self, token: &str) {
        self.type_into("#token", token);
        self.click("#login-button");
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            let _ = self.rt.block_on(c.close());
        }
    }
}

fn rows(b: &Browser, css: &str) -> usize {
    b.count(css)
}

#[test]
fn the_dashboard_shows_the_grid_plan_jobs_reservations_users_and_accuracy() {
    let Some((chromium, chromedriver)) = browser_or_skip() else {
        return;
    };

    // A grid of two 2-processor clusters with every kind of slot on it.
    let s = Server::with_config(TWO_CLUSTERS);
    let alice = s.add_user("alice", Some(100_000.0));
    let api = s.http_as(&alice);
    let admin = s.http();
    // A short job that has finished: its planned and actual start are on the Accuracy page.
    let quick = api.submit(json!({"name": "quick", "procs": 1, "walltime": 60,
        "command": ["sh", "-c", "echo quick"]}));
    let q = s.wait_final(quick, Duration::from_secs(20));
    assert_eq!(q["state"], "completed", "{q}");
    // A co-allocated job over both clusters (3 processors of 2 + 2), writing output.
    let wide = api.submit(json!({"name": "wide", "procs": 3, "walltime": 300,
        "command": ["sh", "-c", "echo line-1; echo line-2; echo the-last-line; sleep 60"]}));
    let w = s.wait_job(wide, "running", Duration::from_secs(20), |j| {
        j["state"] == "running"
    });
    let clusters: Vec<&str> = w["parts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["cluster"].as_str().unwrap())
        .collect();
    assert_eq!(clusters, ["a", "b"], "co-allocated: {w}");
    // A global job that must wait for the whole grid: planned after `wide`.
    let later = api.submit(json!({"name": "later", "procs": 4, "walltime": 600,
        "command": ["sleep", "1"]}));
    s.wait_job(later, "planned", Duration::from_secs(20), |j| {
        j["state"] == "planned"
    });
    // A local job of cluster a that waits in its queue: a forecast slot.
    let (status, local) = admin.post(
        "/jobs",
        &json!({"name": "local", "cluster": "a", "procs": 2, "walltime": 60,
            "command": ["sleep", "1"]}),
    );
    assert_eq!(status, 201, "{local}");
    // An administrative reservation alice may use, inside the next hour.
    let (status, r) = admin.post(
        "/reservations",
        &json!({"cluster": "b", "procs": 1, "start": now() + 1800, "duration": 600,
            "acl": {"users": ["alice"]}}),
    );
    assert_eq!(status, 201, "{r}");
    let rid = r["id"].as_u64().unwrap();

    // The page and its assets come from the binary, under a strict policy.
    let page = reqwest::blocking::get(format!("{}/", s.url)).unwrap();
    assert_eq!(page.status(), 200);
    let csp = page.headers()["content-security-policy"].to_str().unwrap();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert!(page.text().unwrap().contains("/assets/app.js"));
    let js = reqwest::blocking::get(format!("{}/assets/app.js", s.url)).unwrap();
    assert_eq!(js.status(), 200);
    assert!(js.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/javascript"));

    let tmp = tempfile::tempdir().unwrap();
    let driver = Driver::start(&chromedriver, &tmp.path().join("chromedriver.log"));
    let profile = tmp.path().join("profile");
    std::fs::create_dir_all(&profile).unwrap();
    let b = Browser::open(&driver, &chromium, &profile, &s.url);

    // Login: a wrong token is refused and said so; alice's opens her view (no admin pages).
    b.goto("");
    b.find("#token");
    assert!(!b.displayed("#nav"), "no navigation before login");
    b.screenshot("login");
    b.login("not-a-token");
    let refused = b.text_until("#login-error", "a refusal", |t| !t.is_empty());
    assert!(refused.contains("refused"), "{refused}");
    b.login(&alice);
    assert_eq!(b.text_until("#whoami", "alice", |t| t == "alice"), "alice");
    assert!(
        !b.displayed("#nav a[data-page=users]"),
        "users page hidden from a non-administrator"
    );
    // The token stays in the tab; no cookie is set for a cross-site request to carry.
    let cookies = b.rt.block_on(b.c().get_all_cookies()).unwrap();
    assert!(cookies.is_empty(), "{cookies:?}");

    // Grid: both clusters up; 3 of 4 processors busy (the co-allocated job); the queues.
    b.find("#clusters tr[data-cluster=a]");
    assert_eq!(rows(&b, "#clusters tbody tr"), 2);
    for c in ["a", "b"] {
        let row = format!("#clusters tr[data-cluster={c}]");
        assert_eq!(b.text(&format!("{row} td.state .badge")), "up");
        let n = |col: &str| -> u32 { b.text(&format!("{row} td.{col}")).parse().unwrap() };
        assert_eq!(n("busy") + n("reserved") + n("free"), 2, "cluster {c}");
    }
    let busy: u32 = ["a", "b"]
        .iter()
        .map(|c| {
            b.text(&format!("#clusters tr[data-cluster={c}] td.busy"))
                .parse::<u32>()
                .unwrap()
        })
        .sum();
    assert_eq!(busy, 3);
    assert_eq!(b.text("#clusters tr[data-cluster=a] td.queued"), "1");
    let queue = b.text("#global-queue");
    assert!(
        queue.contains("1 planned") && queue.contains("1 running"),
        "{queue}"
    );
    let cycle = b.text("#last-cycle");
    assert!(!cycle.contains("none yet"), "{cycle}");
    b.screenshot("grid");

    // Plan: the co-allocated job on both clusters and linked; the planned job; the local
    // job's forecast (not named to alice); the administrative reservation; free time.
    b.goto("#/plan");
    b.find("#gantt-svg");
    for c in ["a", "b"] {
        let css = format!("rect.slot[data-job='{wide}'][data-cluster={c}]");
        assert_eq!(
            b.attr(&css, "data-kind").as_deref(),
            Some("running"),
            "{css}"
        );
    }
    assert!(b.count(&format!("line.coalloc[data-job='{wide}']")) >= 1);
    // Hover details: what, where, when.
    let details = b.script(&format!(
        "return document.querySelector(\"rect.slot[data-job='{wide}'][data-cluster=b] title\").textContent"
    ));
    let details = details.as_str().unwrap();
    assert!(
        details.contains(&format!("job {wide} · running job")) && details.contains("b: processor"),
        "{details}"
    );
    assert_eq!(
        b.attr(&format!("rect.slot[data-job='{later}']"), "data-kind")
            .as_deref(),
        Some("planned")
    );
    assert!(b.count("rect.slot[data-kind=forecast][data-cluster=a]") >= 1);
    assert_eq!(
        b.count("rect.slot[data-kind=forecast][data-job]"),
        0,
        "another user's job is not named"
    );
    assert!(
        b.count(&format!(
            "rect.slot[data-kind=held][data-reservation='{rid}']"
        )) >= 1
    );
    assert!(b.count("rect.slot[data-kind=free]") >= 1);
    assert!(b
        .text(&format!("#coalloc tr[data-job='{wide}']"))
        .contains("a: "));
    b.screenshot("plan");

    // Jobs: the active queue, then a filter for completed ones.
    b.goto("#/jobs");
    b.find("#jobs");
    assert_eq!(b.count(&format!("#jobs tr[data-job='{wide}']")), 1);
    assert_eq!(b.count(&format!("#jobs tr[data-job='{later}']")), 1);
    assert_eq!(b.count(&format!("#jobs tr[data-job='{quick}']")), 0);
    assert!(b
        .text(&format!("#jobs tr[data-job='{wide}']"))
        .contains("a:"));
    b.screenshot("jobs");
    b.select("#filter-state", "completed");
    b.find(&format!("#jobs tr[data-job='{quick}']"));
    assert_eq!(b.count(&format!("#jobs tr[data-job='{wide}']")), 0);

    // A job's page: explain, planned and actual start, parts, charge, output tail.
    b.goto("#/jobs");
    b.click(&format!("#jobs tr[data-job='{wide}'] a"));
    b.find("#job-facts");
    assert!(b.count("#explain li") >= 1);
    // Its start in local time with the zone marked, as every other time on the pages (the
    // service sends the instant as a number after the words), and nothing more: it is past.
    let explain = b.text("#explain");
    let running = explain
        .lines()
        .find(|l| l.starts_with("running on "))
        .unwrap_or_else(|| panic!("{explain}"));
    let since = running
        .split(" since ")
        .nth(1)
        .unwrap_or_else(|| panic!("{explain}"));
    assert_eq!(since.as_bytes()[10], b' ', "{explain}");
    assert!(!since.contains('Z') && !since.contains("(in "), "{explain}");
    assert_eq!(b.count("#job-parts tr[data-cluster]"), 2);
    // The same instant as its actual start.
    let start = b.text("#job-start");
    assert!(
        start.contains("Actual start") && start.contains(since),
        "{start} / {since}"
    );
    let out = b.text_until("#output", "the job's output", |t| {
        t.contains("the-last-line")
    });
    assert!(out.contains("line-1\nline-2\nthe-last-line"), "{out}");
    b.screenshot("job");

    // Cancelling it from its page frees the grid: the planned job moves earlier (the
    // broker is work-conserving), and the Accuracy page shows it started before its plan.
    b.click("#cancel-job");
    b.rt.block_on(b.c().accept_alert()).unwrap();
    s.wait_job(wide, "cancelled", Duration::from_secs(20), |j| {
        j["state"] == "cancelled"
    });
    b.find("h1 .badge.cancelled");
    let l = s.wait_job(later, "started", Duration::from_secs(30), |j| {
        !j["started_at"].is_null()
    });
    assert!(
        int(&l, "started_at") < int(&l, "first_planned_start"),
        "moved earlier: {l}"
    );

    // Reservations: the administrative one whose ACL names alice.
    b.goto("#/reservations");
    b.find(&format!("#reservations tr[data-reservation='{rid}']"));
    assert!(b
        .text(&format!("#reservations tr[data-reservation='{rid}']"))
        .contains("users: alice"));
    b.screenshot("reservations");

    // Accuracy: the finished and the running job, planned against actual start.
    b.goto("#/accuracy");
    b.find("#accuracy-svg");
    for id in [quick, wide, later] {
        assert_eq!(b.count(&format!("#accuracy tr[data-job='{id}']")), 1);
        assert_eq!(b.count(&format!("g.acc-row[data-job='{id}'] circle")), 2);
    }
    let early = b.text(&format!("#accuracy tr[data-job='{later}'] td.delta"));
    assert!(early.ends_with("early"), "{early}");
    assert!(b.text("#accuracy-summary").contains("1 early"));
    b.screenshot("accuracy");

    // Log out; the administrator sees the users' page and tops up alice's budget.
    b.click("#logout");
    b.find("#token");
    assert_eq!(
        b.script("return sessionStorage.getItem('foresight.token')"),
        Value::Null
    );
    b.login(&s.token);
    b.text_until("#whoami", "the administrator", |t| {
        t.contains("administrator")
    });
    // (Once alice's last job has ended and its unused share is refunded.)
    s.wait_final(later, Duration::from_secs(20));
    b.goto("#/users");
    let budget = |b: &Browser| -> f64 {
        b.text("#users tr[data-user=alice] td.budget")
            .parse()
            .unwrap()
    };
    let before = budget(&b);
    assert!(before < 100_000.0 && before > 0.0, "{before}");
    b.select("#budget-user", "alice");
    b.type_into("#budget-add", "500");
    b.click("#budget-form button[type=submit]");
    let after = wait_for("the new budget", Duration::from_secs(10), || {
        let t = b.text("#users tr[data-user=alice] td.budget");
        t.parse::<f64>()
            .ok()
            .filter(|&v| (v - before - 500.0).abs() < 1e-6)
    });
    let (_, u) = admin.get("/users");
    let api_budget = u
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["name"] == "alice")
        .unwrap()["budget"]
        .as_f64()
        .unwrap();
    assert!((api_budget - after).abs() < 0.01, "{api_budget} vs {after}");
    b.screenshot("users");
    // The administrator sees every user's jobs, and filters them by user.
    b.goto("#/jobs?state=all&user=alice");
    b.find(&format!("#jobs tr[data-job='{quick}']"));
    assert_eq!(b.count("#jobs tbody tr"), 3);
    assert_eq!(
        b.count(&format!("#jobs tr[data-job='{}']", local["id"])),
        0,
        "the administrator's own job is not alice's"
    );
    b.type_into("#filter-user", "nobody");
    b.click("#jobs-filter button[type=submit]");
    b.find("#no-jobs");

    // A job with a begin time: its page says not before when, in local time with the zone.
    let begin_at = now() + 7200;
    let (status, held_back) = admin.post(
        "/jobs",
        &json!({"name": "tonight", "procs": 1, "walltime": 60, "begin": begin_at,
            "command": ["true"]}),
    );
    assert_eq!(status, 201, "{held_back}");
    b.goto(&format!("#/jobs/{}", held_back["id"]));
    let begin = b.text_until("#job-begin", "the begin time", |t| !t.is_empty());
    assert_eq!(begin.as_bytes()[10], b' ', "{begin}");
    assert!(!begin.contains('Z'), "{begin}");
    // Explain writes the begin the API carries as a number (`at`) as the page writes every
    // time, and how far ahead of the service's `now`, as the CLI's explain says it (`(in
    // 2h)`, or seconds less).
    let (status, e) = admin.get(&format!("/jobs/{}/explain", held_back["id"]));
    assert_eq!(status, 200, "{e}");
    assert_eq!(e["reasons"][0]["at"], begin_at, "{e}");
    let explain = b.text("#explain");
    let first = explain.lines().next().unwrap_or_default();
    assert!(
        first.starts_with(&format!("waits for its begin time at {begin} (in ")),
        "{explain}"
    );
    assert!(
        first.ends_with("(in 2h)") || first.contains("(in 1h59m"),
        "{explain}"
    );
    assert!(!explain.contains("s from now"), "{explain}");
    // Its reason holds no time: its planned start is a field of its own, shown beside.
    let reason = b.text("#job-reason");
    assert_eq!(reason, "planned beyond the lead time");
    let planned = b.text("#job-start");
    assert!(planned.contains(&begin), "{planned}");
    // Planned beyond the lead time, nothing holds it yet: the page says it is a forecast.
    assert!(
        planned.contains("not guaranteed: planned, not reserved"),
        "{planned}"
    );
    b.screenshot("job-begin");
    eprintln!("screenshots in {}", b.shots.display());
}

/// The LIMIT column as the CLI's `job list` table shows it for job `id`.
fn cli_limit(s: &Server, id: u64) -> String {
    let table = s.run(&["job", "list"]);
    let head = table.lines().next().unwrap();
    let at = head.find("  LIMIT").unwrap() + 2;
    let row = table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&id.to_string()))
        .unwrap_or_else(|| panic!("no job {id}: {table}"));
    row[at..].split("  ").next().unwrap().trim().to_string()
}

#[test]
fn the_dashboard_shows_limits_as_the_cli_does_and_the_account_jobs_run_as() {
    let Some((chromium, chromedriver)) = browser_or_skip() else {
        return;
    };
    // Everyone's jobs run as `nobody` by the table's `"*"` entry.
    let s = Server::with_env(2, &[("FORESIGHT_UNIX_USER", "*=nobody")]);
    s.add_user("alice", None);
    let long = s.submit(&["--hold", "-t", "1-12:30:00", "--", "true"]);
    let short = s.submit(&["--hold", "-t", "30", "--", "true"]);
    assert_eq!(cli_limit(&s, long), "1-12:30:00");
    assert_eq!(cli_limit(&s, short), "30:00");

    let tmp = tempfile::tempdir().unwrap();
    let driver = Driver::start(&chromedriver, &tmp.path().join("chromedriver.log"));
    let profile = tmp.path().join("profile");
    std::fs::create_dir_all(&profile).unwrap();
    let b = Browser::open(&driver, &chromium, &profile, &s.url);
    b.goto("");
    b.login(&s.token);
    b.text_until("#whoami", "the administrator", |t| {
        t.contains("administrator")
    });
    b.goto("#/jobs?state=all");
    for id in [long, short] {
        assert_eq!(
            b.text(&format!("#jobs tr[data-job='{id}'] td.limit")),
            cli_limit(&s, id),
            "job {id}"
        );
    }
    // Not `default`: the account alice's jobs run as, and the rule that chose it.
    b.goto("#/users");
    let unix = b.text("#users tr[data-user=alice] td.unix");
    assert_eq!(unix, "nobody (default *)");
    b.screenshot("users-unix");
}
