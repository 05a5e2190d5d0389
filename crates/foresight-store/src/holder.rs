//! Who holds a store. One service per store: a second one would load the first one's
//! running jobs, find no process of its own for them and launch them again. The store
//! itself is locked (the SQLite file, the PostgreSQL database), not the service's data
//! directory, since two data directories can name one store; a refused service is told who
//! holds it, so that its operator can find that service.

use std::fmt;
use std::path::Path;

/// The service that opens a store, as a refused one is shown it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The host it runs on.
    pub host: String,
    /// Its process id on that host.
    pub pid: u32,
    /// Its data directory, when it has one (a test or a tool opening a store has none).
    pub data_dir: Option<String>,
}

impl Holder {
    /// This process, serving from `data_dir`.
    pub fn this_process(data_dir: Option<&Path>) -> Holder {
        let host = nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_else(|_| "an unnamed host".into());
        Holder {
            host,
            pid: std::process::id(),
            data_dir: data_dir.map(|d| d.display().to_string()),
        }
    }

    /// What a PostgreSQL session of this holder calls itself (`application_name`), which
    /// the database shows to a refused service: at most 63 bytes of printable ASCII, what
    /// PostgreSQL keeps of it (it cuts the rest and turns other characters into `?`).
    pub(crate) fn application_name(&self) -> String {
        let mut name = format!("foresight (pid {} on {}", self.pid, self.host);
        if let Some(dir) = &self.data_dir {
            name.push_str(", data ");
            name.push_str(dir);
        }
        name.push(')');
        let mut name: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_graphic() || c == ' ' {
                    c
                } else {
                    '?'
                }
            })
            .collect();
        if name.len() > MAX_APPLICATION_NAME {
            name.truncate(MAX_APPLICATION_NAME - 4);
            name.push_str("...)");
        }
        name
    }
}

/// PostgreSQL's `NAMEDATALEN - 1`: the longest `application_name` it keeps whole.
const MAX_APPLICATION_NAME: usize = 63;

/// `the server with PID 12 on host-a (data directory /var/lib/foresight)`.
impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the server with PID {} on {}", self.pid, self.host)?;
        match &self.data_dir {
            Some(dir) => write!(f, " (data directory {dir})"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_application_name_is_what_postgres_keeps_of_it() {
        struct Case {
            name: &'static str,
            data_dir: Option<&'static str>,
            want: &'static str,
        }
        let cases = [
            Case {
                name: "no data directory",
                data_dir: None,
                want: "foresight (pid 7 on h)",
            },
            Case {
                name: "a short one",
                data_dir: Some("/srv/f"),
                want: "foresight (pid 7 on h, data /srv/f)",
            },
            Case {
                name: "a long one is cut to 63 bytes",
                data_dir: Some("/var/lib/foresight/a/very/long/path/that/goes/on"),
                want: "foresight (pid 7 on h, data /var/lib/foresight/a/very/long/...)",
            },
            Case {
                name: "not ASCII",
                data_dir: Some("/srv/fé"),
                want: "foresight (pid 7 on h, data /srv/f?)",
            },
        ];
        for c in cases {
            let h = Holder {
                host: "h".into(),
                pid: 7,
                data_dir: c.data_dir.map(str::to_string),
            };
            let got = h.application_name();
            assert_eq!(got, c.want, "{}", c.name);
            assert!(got.len() <= MAX_APPLICATION_NAME, "{}", c.name);
        }
    }

    #[test]
    fn a_holder_shows_its_pid_host_and_data_directory() {
        let h = Holder {
            host: "node1".into(),
            pid: 42,
            data_dir: Some("/srv/f".into()),
        };
        assert_eq!(
            h.to_string(),
            "the server with PID 42 on node1 (data directory /srv/f)"
        );
    }
}
