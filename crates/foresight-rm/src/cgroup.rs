//! Confinement of local jobs: each attempt in a cgroup v2 of its own when the host gives a
//! writable cgroup v2 hierarchy, else the session + process-group sweep of the supervisor.
//!
//! A cgroup holds every process the job forks, whatever it does to leave its process group,
//! session or parentage (`setsid`, double forks, a subreaper of its own), and whether or not
//! its supervisor is alive. So with a cgroup, `cgroup.kill` ends the whole job at its walltime,
//! on cancel, and when a restarted daemon finds it unsupervised; `cgroup.freeze` suspends all
//! of it. Only `cgroup.procs`, `cgroup.kill`, `cgroup.freeze` and `cgroup.events` are used: no
//! controller needs to be enabled, so a hybrid host's `/sys/fs/cgroup/unified` serves as well
//! as a pure unified one's `/sys/fs/cgroup`. The hierarchy is found in `/proc/self/mountinfo`.
//!
//! Layout: `<cgroup2 mount>/foresight-<hash of the executor root>/<job>.<attempt>`, one
//! parent per executor (so two daemons, or two local clusters, never share one), one cgroup
//! per attempt, made by its supervisor and removed by it once the job is gone.

use serde::{Deserialize, Serialize};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How local jobs are confined: the config's `confinement` setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Confinement {
    /// A cgroup per attempt when cgroup v2 is writable, else the session sweep.
    #[default]
    Auto,
    /// A cgroup per attempt, or the executor refuses to start.
    Cgroup,
    /// The supervisor's session + process-group sweep only.
    Session,
}

impl std::fmt::Display for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Confinement::Auto => "auto",
            Confinement::Cgroup => "cgroup",
            Confinement::Session => "session",
        })
    }
}

/// What an executor confines its attempts with, once its [`Confinement`] is resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Confined {
    /// Each attempt in its own cgroup under this parent.
    Cgroup(PathBuf),
    /// The session + process-group sweep; the text says why (chosen, or no cgroup v2).
    Session(String),
}

impl std::fmt::Display for Confined {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Confined::Cgroup(parent) => {
                write!(f, "a cgroup v2 per job under {}", parent.display())
            }
            Confined::Session(why) => {
                write!(f, "the session and process-group sweep ({why})")
            }
        }
    }
}

/// The mount point of the cgroup v2 hierarchy in `/proc/self/mountinfo` text, if any.
pub(crate) fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        if right.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        left.split_whitespace()
            .nth(4)
            .map(|p| PathBuf::from(unescape(p)))
    })
}

/// Undoes mountinfo's octal escapes (`\040` for a space, `\011`, `\012`, `\134`).
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The parent cgroup's name for an executor root: stable across restarts and upgrades (a
/// CRC-64 of the path), distinct for distinct roots.
pub(crate) fn parent_name(root: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    let crc = crc::Crc::<u64>::new(&crc::CRC_64_ECMA_182);
    format!(
        "foresight-{:016x}",
        crc.checksum(root.as_os_str().as_bytes())
    )
}

/// Resolves `wanted` for the executor rooted at `root`: makes the parent cgroup when a
/// cgroup is to be used. `Err` only for [`Confinement::Cgroup`] without a usable cgroup v2.
pub(crate) fn resolve(wanted: Confinement, root: &Path) -> Result<Confined, String> {
    if wanted == Confinement::Session {
        return Ok(Confined::Session("confinement = \"session\"".into()));
    }
    match probe(root) {
        Ok(parent) => Ok(Confined::Cgroup(parent)),
        Err(why) if wanted == Confinement::Auto => Ok(Confined::Session(why)),
        Err(why) => Err(why),
    }
}

/// Makes the executor's parent cgroup, or says why cgroup v2 cannot be used here.
fn probe(root: &Path) -> Result<PathBuf, String> {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    let mount =
        cgroup2_mount(&mountinfo).ok_or_else(|| "no cgroup v2 hierarchy is mounted".to_string())?;
    let parent = mount.join(parent_name(root));
    match fs::create_dir(&parent) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => {
            return Err(format!(
                "cgroup v2 at {} is not writable: cannot create {}: {e}",
                mount.display(),
                parent.display()
            ))
        }
    }
    for file in [
        "cgroup.kill",
        "cgroup.freeze",
        "cgroup.procs",
        "cgroup.events",
    ] {
        if !parent.join(file).exists() {
            let _ = fs::remove_dir(&parent);
            return Err(format!(
                "cgroup v2 at {} has no {file} (Linux 5.14 or newer is needed)",
                mount.display()
            ));
        }
    }
    Ok(parent)
}

/// One attempt's cgroup.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Cgroup {
    pub path: PathBuf,
}

impl Cgroup {
    pub fn new(path: &Path) -> Cgroup {
        Cgroup {
            path: path.to_path_buf(),
        }
    }

    /// Makes it (and its parent, should that be gone); an existing one is fine. The parent
    /// may be removed by the last attempt of another supervisor in between: then again.
    pub fn create(&self) -> io::Result<()> {
        let mut tries = 0;
        loop {
            match fs::create_dir_all(&self.path) {
                Err(e) if e.kind() == io::ErrorKind::NotFound && tries < 3 => tries += 1,
                done => return done,
            }
        }
    }

    pub fn exists(&self) -> bool {
        self.path.join("cgroup.procs").exists()
    }

    /// Moves the calling process into it (before `exec`, so the job starts inside).
    pub fn enter(&self) -> io::Result<()> {
        fs::write(
            self.path.join("cgroup.procs"),
            format!("{}\n", std::process::id()),
        )
    }

    /// SIGKILLs every process in it, at once and without a race with forks.
    pub fn kill(&self) -> io::Result<()> {
        fs::write(self.path.join("cgroup.kill"), "1\n")
    }

    /// Freezes (`true`) or thaws every process in it.
    pub fn freeze(&self, frozen: bool) -> io::Result<()> {
        fs::write(
            self.path.join("cgroup.freeze"),
            if frozen { "1\n" } else { "0\n" },
        )
    }

    /// Whether the kernel reports it frozen (`frozen 1` in `cgroup.events`): every process in
    /// it is held, whatever signals they are sent. False while a freeze is still in progress.
    pub fn frozen(&self) -> bool {
        fs::read_to_string(self.path.join("cgroup.events"))
            .is_ok_and(|events| events.lines().any(|l| l.trim() == "frozen 1"))
    }

    /// Whether any process is left in it (`populated 1` in `cgroup.events`); false once it
    /// is gone.
    pub fn populated(&self) -> bool {
        fs::read_to_string(self.path.join("cgroup.events"))
            .is_ok_and(|events| events.lines().any(|l| l.trim() == "populated 1"))
    }

    /// Kills everything in it, waits (at most `timeout`) until it is empty, and removes it.
    /// True when it is gone.
    pub fn kill_and_remove(&self, timeout: Duration) -> bool {
        if !self.exists() {
            return true;
        }
        // A frozen process still dies of SIGKILL; thawing first merely speeds it up.
        let _ = self.freeze(false);
        let _ = self.kill();
        let until = Instant::now() + timeout;
        while self.populated() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
        let gone = match fs::remove_dir(&self.path) {
            Ok(()) => true,
            Err(e) => e.kind() == io::ErrorKind::NotFound,
        };
        // The executor's parent goes with its last attempt (it fails while another is in
        // it), so finished daemons and test runs leave no empty cgroups behind.
        if gone {
            if let Some(parent) = self.path.parent() {
                let _ = fs::remove_dir(parent);
            }
        }
        gone
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cgroup2_mount_is_found_in_hybrid_and_unified_mountinfo() {
        let hybrid = "\
25 30 0:23 / /sys rw,nosuid shared:7 - sysfs sysfs rw
35 25 0:30 / /sys/fs/cgroup ro,nosuid shared:9 - tmpfs tmpfs ro,mode=755
36 35 0:31 / /sys/fs/cgroup/unified rw,nosuid shared:10 - cgroup2 cgroup2 rw,nsdelegate
37 35 0:32 / /sys/fs/cgroup/systemd rw,nosuid shared:11 - cgroup cgroup rw,name=systemd
40 35 0:35 / /sys/fs/cgroup/cpu,cpuacct rw shared:16 - cgroup cgroup rw,cpu,cpuacct";
        assert_eq!(
            cgroup2_mount(hybrid),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        let unified =
            "31 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev shared:4 - cgroup2 cgroup2 rw,nsdelegate";
        assert_eq!(
            cgroup2_mount(unified),
            Some(PathBuf::from("/sys/fs/cgroup"))
        );
        let v1_only = "37 35 0:32 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd";
        assert_eq!(cgroup2_mount(v1_only), None);
        assert_eq!(cgroup2_mount(""), None);
        assert_eq!(cgroup2_mount("garbage - cgroup2"), None);
        let spaced = "36 35 0:31 / /mnt/cg\\040two rw - cgroup2 cgroup2 rw";
        assert_eq!(cgroup2_mount(spaced), Some(PathBuf::from("/mnt/cg two")));
    }

    #[test]
    fn parent_names_are_stable_and_distinct() {
        let a = parent_name(Path::new("/var/lib/foresight/clusters/local"));
        assert_eq!(
            a,
            parent_name(Path::new("/var/lib/foresight/clusters/local"))
        );
        assert_ne!(
            a,
            parent_name(Path::new("/var/lib/foresight/clusters/other"))
        );
        assert!(
            a.starts_with("foresight-") && a.len() == "foresight-".len() + 16,
            "{a}"
        );
    }

    #[test]
    fn session_is_chosen_without_probing() {
        let root = Path::new("/nonexistent/foresight-root");
        assert!(matches!(
            resolve(Confinement::Session, root),
            Ok(Confined::Session(_))
        ));
    }

    #[test]
    fn confinement_reads_its_three_words() {
        #[derive(Deserialize)]
        struct C {
            confinement: Confinement,
        }
        for (text, want) in [
            ("auto", Confinement::Auto),
            ("cgroup", Confinement::Cgroup),
            ("session", Confinement::Session),
        ] {
            let c: C =
                serde_json::from_str(&format!("{{\"confinement\":\"{text}\"}}")).expect("parses");
            assert_eq!(c.confinement, want);
            assert_eq!(want.to_string(), text);
        }
        let err = serde_json::from_str::<C>("{\"confinement\":\"cgroups\"}")
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains("cgroups") && err.contains("session"), "{err}");
    }
}
