//! A host of its own on this machine: a network namespace joined to the test's (root)
//! namespace by one veth pair, its link capped by `tc tbf` at both ends and made lossy by
//! nftables' `numgen random` inside the namespace. Everything is removed on drop, also when
//! the test panics.

use std::net::Ipv4Addr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};

/// How a host's link behaves.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    /// The bandwidth cap of each direction, Mbit/s (`tc tbf` on both ends).
    pub rate_mbit: u32,
    /// Packets dropped at random, per cent, in each direction.
    pub loss_percent: u32,
    /// When set, inbound new TCP connections to any other port are refused (a site that
    /// admits nothing from the grid; its administrator's API port stays open).
    pub only_inbound_port: Option<u16>,
}

/// The links of the issue: 100 Mbit/s, 1 % loss (the delay is the relay's).
pub const WAN: Shape = Shape {
    rate_mbit: 100,
    loss_percent: 1,
    only_inbound_port: None,
};

/// Links made by this process so far (each gets its own /24).
static LINKS: AtomicU8 = AtomicU8::new(0);

/// A network namespace with one link to the root namespace.
pub struct Host {
    /// The namespace's name (`ip netns exec NAME ...`).
    pub ns: String,
    /// The veth end inside the namespace.
    inner: String,
    /// The veth end in the root namespace.
    outer: String,
    /// The namespace's address.
    pub ip: Ipv4Addr,
    /// The root namespace's address on this link (where a relay for this host listens).
    pub peer: Ipv4Addr,
}

impl Host {
    /// A new namespace with its link shaped by `shape`.
    pub fn new(shape: Shape) -> Host {
        let k = LINKS.fetch_add(1, Ordering::SeqCst);
        let pid = std::process::id();
        // Short (interface names hold 15 bytes) and unique per process and link.
        let tag = format!("{:x}x{k}", pid % 0x10_0000);
        let subnet = 100 + (pid % 100) as u8;
        let host = Host {
            ns: format!("fsh{tag}"),
            inner: format!("fsh{tag}i"),
            outer: format!("fsh{tag}o"),
            ip: Ipv4Addr::new(10, subnet, k, 2),
            peer: Ipv4Addr::new(10, subnet, k, 1),
        };
        // Left behind by an earlier run of a process with the same id, killed.
        let _ = quiet(&["ip", "netns", "del", &host.ns]);
        let _ = quiet(&["ip", "link", "del", &host.outer]);
        host.build(shape);
        host
    }

    fn build(&self, shape: Shape) {
        let (ns, inner, outer) = (self.ns.as_str(), self.inner.as_str(), self.outer.as_str());
        let (ip, peer) = (format!("{}/24", self.ip), format!("{}/24", self.peer));
        sh(&["ip", "netns", "add", ns]);
        sh(&[
            "ip", "link", "add", outer, "type", "veth", "peer", "name", inner,
        ]);
        sh(&["ip", "link", "set", inner, "netns", ns]);
        sh(&["ip", "addr", "add", &peer, "dev", outer]);
        sh(&["ip", "link", "set", outer, "up"]);
        sh(&["ip", "-n", ns, "addr", "add", &ip, "dev", inner]);
        sh(&["ip", "-n", ns, "link", "set", inner, "up"]);
        sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
        let rate = format!("{}mbit", shape.rate_mbit);
        // A burst of 1 MB: veths hand tbf segments of up to 64 KB (offloads), and a burst
        // smaller than one of them drops it whole.
        let tbf = ["tbf", "rate", &rate, "burst", "1mb", "latency", "100ms"];
        let mut cmd = vec!["tc", "qdisc", "add", "dev", outer, "root"];
        cmd.extend(tbf);
        sh(&cmd);
        let mut cmd = vec![
            "ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", inner, "root",
        ];
        cmd.extend(tbf);
        sh(&cmd);
        let refuse = shape
            .only_inbound_port
            .map(|p| format!("iifname \"{inner}\" ct state new tcp dport != {p} drop"))
            .unwrap_or_default();
        let loss = shape.loss_percent;
        self.nft(&format!(
            "table inet fsh {{
               chain input {{ type filter hook input priority 0; policy accept;
                 iifname \"{inner}\" numgen random mod 100 < {loss} drop
                 {refuse}
               }}
               chain output {{ type filter hook output priority 0; policy accept;
                 oifname \"{inner}\" numgen random mod 100 < {loss} drop
               }}
             }}"
        ));
    }

    /// Loads nftables rules `script` into the namespace.
    fn nft(&self, script: &str) {
        let path =
            std::env::temp_dir().join(format!("{}-{}.nft", self.ns, LINKS.load(Ordering::SeqCst)));
        std::fs::write(&path, script).unwrap();
        let p = path.display().to_string();
        sh(&["ip", "netns", "exec", &self.ns, "nft", "-f", &p]);
        let _ = std::fs::remove_file(path);
    }

    /// The command that runs a program in this namespace (`ip netns exec NS`).
    pub fn exec(&self) -> Vec<String> {
        ["ip", "netns", "exec", &self.ns]
            .map(str::to_string)
            .to_vec()
    }

    /// Cuts the link: every packet in or out of it is dropped (connections stall, as on a
    /// cut cable; nothing is reset) until [`Host::restore`].
    pub fn cut(&self) {
        let i = &self.inner;
        self.nft(&format!(
            "table inet fshcut {{
               chain input {{ type filter hook input priority -10; iifname \"{i}\" drop; }}
               chain output {{ type filter hook output priority -10; oifname \"{i}\" drop; }}
             }}"
        ));
    }

    /// Restores a link [`Host::cut`].
    pub fn restore(&self) {
        sh(&[
            "ip", "netns", "exec", &self.ns, "nft", "delete", "table", "inet", "fshcut",
        ]);
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // Deleting the namespace deletes its veth end, and with it the pair.
        let _ = quiet(&["ip", "netns", "del", &self.ns]);
        let _ = quiet(&["ip", "link", "del", &self.outer]);
    }
}

/// Runs `args`; panics with its stderr when it fails.
pub fn sh(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", args.join(" ")));
    assert!(
        out.status.success(),
        "{} failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs `args`, whatever it says; whether it succeeded.
fn quiet(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}
