#![allow(clippy::unwrap_used)]
//! The real [`SystemRunner`] on ordinary programs (no Slurm needed): the fixed environment,
//! `SLURM_CONF` per call, exit status, stdin, timeouts, spawn failures, another user.

use foresight_rm::slurm::*;
use std::time::Duration;

fn sh(script: &str) -> Invocation {
    Invocation::new("sh", ["-c", script])
}

#[tokio::test]
async fn environment_is_fixed_and_per_call() {
    let runner = SystemRunner::default();
    let mut inv = sh("echo \"$TZ|$SLURM_TIME_FORMAT|$LC_ALL|$SLURM_CONF|$EXTRA|${HOME-unset}\"; echo oops >&2; exit 3");
    inv.slurm_conf = Some("/x/c1/slurm.conf".into());
    inv.env.push(("EXTRA".into(), "yes".into()));
    let out = runner.run(&inv).await.unwrap();
    assert_eq!(out.stdout, "UTC|standard|C|/x/c1/slurm.conf|yes|unset\n");
    assert_eq!(out.stderr, "oops\n");
    assert_eq!(out.status, Some(3));
    assert!(!out.success());

    // The daemon's own SLURM_* variables never leak into a command.
    let out = runner
        .run(&sh(
            "env | grep -c '^SQUEUE_\\|^SBATCH_\\|^SLURM_CONF=' || true",
        ))
        .await
        .unwrap();
    assert_eq!(out.stdout.trim(), "0");
}

#[tokio::test]
async fn stdin_reaches_the_program() {
    let mut inv = Invocation::new("cat", Vec::<String>::new());
    inv.stdin = Some("#!/bin/sh\nsleep 1\n".into());
    let out = SystemRunner::default().run(&inv).await.unwrap();
    assert_eq!(out.stdout, "#!/bin/sh\nsleep 1\n");
    assert!(out.success());
}

#[tokio::test]
async fn a_slow_command_is_killed() {
    let runner = SystemRunner::new(Duration::from_millis(300));
    let t0 = std::time::Instant::now();
    let e = runner
        .run(&Invocation::new("sleep", ["30"]))
        .await
        .unwrap_err();
    assert!(matches!(e, SlurmError::Timeout { .. }), "{e}");
    assert!(e.is_unavailable());
    assert!(e.to_string().contains("sleep 30"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_missing_program_is_a_spawn_error() {
    let e = SystemRunner::default()
        .run(&Invocation::new("no-such-slurm-command", ["--json"]))
        .await
        .unwrap_err();
    assert!(matches!(e, SlurmError::Spawn { .. }), "{e}");
    assert!(
        e.to_string().contains("no-such-slurm-command --json"),
        "{e}"
    );
}

#[tokio::test]
async fn a_signal_has_no_status() {
    let out = SystemRunner::default()
        .run(&sh("kill -9 $$"))
        .await
        .unwrap();
    assert_eq!(out.status, None);
    let e = check_status("sh", &out).unwrap_err();
    assert!(e.to_string().contains("killed by a signal"), "{e}");
}

/// As another user through runuser: only as root (CI runs as root).
#[tokio::test]
async fn as_another_user() {
    let me = SystemRunner::default()
        .run(&Invocation::new("id", ["-u"]))
        .await
        .unwrap();
    if me.stdout.trim() != "0" {
        assert!(
            std::env::var_os("CI").is_none(),
            "not root under CI: runuser needs root"
        );
        eprintln!("skipped: needs root for runuser");
        return;
    }
    let mut inv = sh("id -un; echo $SLURM_CONF");
    inv.user = Some("nobody".into());
    inv.slurm_conf = Some("/x/slurm.conf".into());
    let out = SystemRunner::default().run(&inv).await.unwrap();
    assert_eq!(out.stdout, "nobody\n/x/slurm.conf\n", "{out:?}");
    assert!(
        inv.display()
            .starts_with("[as nobody] SLURM_CONF=/x/slurm.conf sh -c "),
        "{}",
        inv.display()
    );
}
