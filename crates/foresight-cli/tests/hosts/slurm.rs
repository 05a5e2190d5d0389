//! A real Slurm cluster inside a site's namespace (`scripts/local-slurm.sh` run there): its
//! controller, nodes and munged on that namespace's own loopback, with a munge key and
//! socket of its own, so nothing of it is shared with the centre or another site. It is
//! started with `nsenter --net` rather than `ip netns exec`, whose fresh `/sys` has no
//! cgroup file system for slurmd.

use crate::netns::Host;
use std::path::PathBuf;
use std::process::Command;

/// A Slurm cluster of one site, stopped and purged on drop.
pub struct SlurmCluster {
    /// Its `slurm.conf`.
    pub conf: PathBuf,
    ns: String,
    dir: tempfile::TempDir,
}

/// `scripts/local-slurm.sh` of this repository.
fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/local-slurm.sh")
}

impl SlurmCluster {
    /// One cluster of 2 nodes of 2 CPUs in `host`'s namespace, up.
    pub fn start(host: &Host) -> SlurmCluster {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", host.ns))
            .arg(script())
            .args(["start", "1"])
            .env("FORESIGHT_SLURM_DIR", dir.path())
            .env("FORESIGHT_SLURM_NODES", "2")
            .env("FORESIGHT_SLURM_CPUS", "2")
            .output()
            .unwrap();
        let mut cluster = SlurmCluster {
            conf: PathBuf::new(),
            ns: host.ns.clone(),
            dir,
        };
        // On failure the cluster is dropped, which stops what the script had started.
        assert!(
            out.status.success(),
            "local-slurm.sh start in {}: {}",
            host.ns,
            String::from_utf8_lossy(&out.stderr)
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        let conf = stdout
            .lines()
            .find_map(|l| l.strip_prefix("c1="))
            .unwrap_or_else(|| panic!("no c1= in {stdout}"));
        cluster.conf = PathBuf::from(conf);
        cluster
    }

    /// The site's cluster configuration (after its name): this Slurm cluster.
    pub fn toml(&self) -> String {
        format!(
            "kind = \"slurm\"\nslurm_conf = \"{}\"\nsync_ms = 500\n",
            self.conf.display()
        )
    }
}

impl Drop for SlurmCluster {
    fn drop(&mut self) {
        let _ = Command::new("nsenter")
            .arg(format!("--net=/run/netns/{}", self.ns))
            .arg(script())
            .args(["stop", "--purge"])
            .env("FORESIGHT_SLURM_DIR", self.dir.path())
            .output();
    }
}

/// True when Slurm and munge are installed (`slurmctld`, `slurmd`, `munged`). Outside CI a
/// test without them skips, printing why; under CI (`scripts/test.sh` installs them) it
/// fails naming what is missing.
pub fn available(test: &str) -> bool {
    let missing: Vec<&str> = ["slurmctld", "slurmd", "munged", "sbatch", "nsenter"]
        .into_iter()
        .filter(|tool| {
            !Command::new("sh")
                .args(["-c", &format!("command -v {tool}")])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .collect();
    if missing.is_empty() {
        return true;
    }
    let why = format!("{test}: needs {}", missing.join(", "));
    assert!(
        std::env::var_os("CI").is_none(),
        "{why} (under CI this is a failure: scripts/test.sh installs Slurm and munge)"
    );
    eprintln!("skipped: {why}");
    false
}
