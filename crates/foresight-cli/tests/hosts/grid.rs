//! A grid across hosts on this machine: the centre in a namespace of its own, each site in
//! another, each site's only path to the centre a delaying relay in the root namespace.
//! The real `foresight` binary runs in each namespace with its own data directory, and its
//! own copy of the site's token; the test reads both sides from the root namespace.

use crate::common::{wait_for, Server};
use crate::netns::{Host, Shape, WAN};
use crate::relay::Relay;
use crate::slurm::SlurmCluster;
use serde_json::Value;
use std::net::SocketAddr;
use std::time::Duration;

/// The port every service listens on, each at its own namespace's address.
pub const API_PORT: u16 = 8080;

/// The relay's one-way delay: 50 ms of round trip between a site and the centre.
pub const ONE_WAY: Duration = Duration::from_millis(25);

/// A site: its service, the relay it reaches the centre through, and its host.
pub struct Site {
    /// The site's service (in its namespace).
    pub server: Server,
    /// Its Slurm cluster, when it lends one (stopped after the service, before the link).
    pub _slurm: Option<SlurmCluster>,
    /// The site's only path to the centre.
    pub relay: Relay,
    /// The site's namespace and link (dropped last).
    pub host: Host,
    /// The site's name (`umea`).
    pub name: String,
    /// Its lent cluster's name at the site (`abisko`).
    pub cluster: String,
}

/// A centre and its sites, each on a host of its own. Dropped in field order: the
/// services stop before their links go.
pub struct Grid {
    /// The centre's service.
    pub centre: Server,
    /// The sites, in the order asked for.
    pub sites: Vec<Site>,
    /// The centre's namespace and link.
    pub centre_host: Host,
    /// The directories of the token files (the centre's and each site's copy).
    _keys: Vec<tempfile::TempDir>,
}

/// How a grid is made.
#[derive(Clone, Copy)]
pub struct Options {
    /// The centre's lease of each site, seconds.
    pub lease: u64,
    /// Processors of each site's lent cluster.
    pub procs: u32,
    /// Each site's link.
    pub shape: Shape,
    /// The services' `FORESIGHT_LOG`.
    pub log: &'static str,
    /// The first site lends a real Slurm cluster (in its namespace, 4 CPUs), not a local one.
    pub slurm_first: bool,
}

/// Sites of 4 processors, leased for 30 s, on the links.
pub const DEFAULT: Options = Options {
    lease: 30,
    procs: 4,
    shape: Shape {
        only_inbound_port: Some(API_PORT),
        ..WAN
    },
    log: "warn",
    slurm_first: false,
};

/// The sites' names and their clusters' names.
pub const NAMES: [(&str, &str); 2] = [("umea", "abisko"), ("lund", "aurora")];

impl Grid {
    /// A centre and `n` (1 or 2) sites, every site's cluster up at the centre.
    pub fn new(n: usize, opt: Options) -> Grid {
        let centre_host = Host::new(Shape {
            only_inbound_port: None,
            ..opt.shape
        });
        let centre_addr = SocketAddr::from((centre_host.ip, API_PORT));
        let sites: Vec<(&str, &str, Host)> = NAMES[..n]
            .iter()
            .map(|&(s, c)| (s, c, Host::new(opt.shape)))
            .collect();
        let keys = vec![tempfile::tempdir().unwrap()];
        let names: Vec<(&str, &str)> = NAMES[..n].to_vec();
        let toml = centre_toml(&names, keys[0].path(), opt.lease);
        let centre = Server::wrapped(
            &toml,
            opt.log,
            &centre_host.exec(),
            &centre_addr.to_string(),
        );
        let mut keys = keys;
        let sites = sites
            .into_iter()
            .enumerate()
            .map(|(k, (name, cluster, host))| {
                let relay = Relay::start((host.peer, 0).into(), centre_addr, ONE_WAY);
                let dir = tempfile::tempdir().unwrap();
                let slurm = (k == 0 && opt.slurm_first).then(|| SlurmCluster::start(&host));
                let kind = match &slurm {
                    Some(s) => s.toml(),
                    None => format!("procs = {}\n", opt.procs),
                };
                let token = token_of(name);
                let centres = [relay.addr];
                let at = SiteAt {
                    name,
                    cluster,
                    kind: &kind,
                    host: &host,
                };
                let server = site_server(&at, &token, &centres, opt, &dir);
                keys.push(dir);
                Site {
                    server,
                    _slurm: slurm,
                    relay,
                    host,
                    name: name.to_string(),
                    cluster: cluster.to_string(),
                }
            })
            .collect();
        let grid = Grid {
            centre,
            sites,
            centre_host,
            _keys: keys,
        };
        wait_for(
            "every site's cluster up at the centre",
            Duration::from_secs(30),
            || {
                grid.clusters()
                    .iter()
                    .all(|c| c["state"] == "up")
                    .then_some(())
            },
        );
        grid
    }

    /// The centre's clusters, as `cluster list -o json` shows them.
    pub fn clusters(&self) -> Vec<Value> {
        let c: Value =
            serde_json::from_str(&self.centre.run(&["cluster", "list", "-o", "json"])).unwrap();
        c.as_array().unwrap().clone()
    }
}

/// Where a site runs and what it lends.
pub struct SiteAt<'a> {
    /// The site's name.
    pub name: &'a str,
    /// The lent cluster's name at the site.
    pub cluster: &'a str,
    /// The cluster's configuration after its name (`procs = 4`, or a Slurm cluster's).
    pub kind: &'a str,
    /// The site's namespace.
    pub host: &'a Host,
}

/// The service of the site `at`, lending its cluster to the centres reached at `centres`
/// (its relays), with its own copy of its token (in `dir`).
pub fn site_server(
    at: &SiteAt,
    token: &str,
    centres: &[SocketAddr],
    opt: Options,
    dir: &tempfile::TempDir,
) -> Server {
    let SiteAt {
        name,
        cluster,
        kind,
        host,
    } = *at;
    let file = dir.path().join("grid.token");
    std::fs::write(&file, token).unwrap();
    let toml = format!(
        "[[cluster]]\nname = \"{cluster}\"\n{kind}\n[grid]\n\
         centres = [{centres}]\nsite = \"{name}\"\ntoken_file = \"{}\"\n\
         lend = {{ {cluster} = {procs} }}\nsnapshot_ms = 200\n",
        file.display(),
        centres = centres
            .iter()
            .map(|a| format!("\"http://{a}\""))
            .collect::<Vec<_>>()
            .join(", "),
        procs = opt.procs,
    );
    let listen = SocketAddr::from((host.ip, API_PORT)).to_string();
    let s = Server::wrapped(&toml, opt.log, &host.exec(), &listen);
    s.add_user("grid", None);
    s
}

/// The centre's configuration: a cluster of kind `site` for each `(site, cluster)` of
/// `sites`, with the site's name as its feature, leased for `lease` seconds, their tokens
/// written into `keys`.
pub fn centre_toml(sites: &[(&str, &str)], keys: &std::path::Path, lease: u64) -> String {
    let mut toml = String::new();
    for (site, cluster) in sites {
        let file = keys.join(format!("{site}.token"));
        std::fs::write(&file, token_of(site)).unwrap();
        toml += &format!(
            "[[cluster]]\nname = \"{site}-{cluster}\"\nkind = \"site\"\nsync_ms = 200\n\
             features = [\"{site}\"]\n\
             [cluster.site]\nsite = \"{site}\"\ncluster = \"{cluster}\"\n\
             token_file = \"{}\"\nlease_seconds = {lease}\n\n",
            file.display(),
        );
    }
    toml
}

/// Site `site`'s token.
pub fn token_of(site: &str) -> String {
    format!("{site}-token-0123456789abcdef\n")
}
