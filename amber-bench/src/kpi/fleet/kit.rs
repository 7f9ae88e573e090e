//! What the fleet KPI's daemons and runners need, made fresh for each run in a scratch dir: a
//! test CA and a certificate for `localhost` it signed (`openssl`), the pool's token, a bare
//! git repository the runners clone over `file://`, and the workspace root; amberd's config
//! for them; the `amber-exec runner` processes (killed when dropped); and a reading of a
//! `/metrics` page (amberd's or a runner's).

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::error::BenchError;

/// The pool every runner joins.
pub(crate) const POOL: &str = "default";

/// The TLS files, the token, the repository and the workspace root of one fleet.
pub(crate) struct FleetKit {
    /// Canonical path of the kit's temp dir (amberd wants absolute paths).
    root: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    ca: PathBuf,
    token_file: PathBuf,
    /// `file://` URL of the bare repository.
    pub repo_url: String,
    /// `[fleet] workspace_root` and every runner's `--workspaces`.
    work: PathBuf,
    _dir: TempDir,
}

/// Runs `program` in `dir`; an error with its stderr when it fails.
fn run(program: &str, args: &[&str], dir: &Path) -> Result<(), BenchError> {
    let output = Command::new(program)
        .args(args)
        .current_dir(dir)
        // The seed commit must not depend on the user's git identity or config.
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| BenchError::Skipped(format!("cannot run {program}: {e}")))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(BenchError::Failed(format!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        )))
    }
}

impl FleetKit {
    /// Makes the CA, the certificate, the token and the repository under `scratch`.
    pub(crate) fn new(scratch: &Path) -> Result<FleetKit, BenchError> {
        let dir = tempfile::Builder::new()
            .prefix("fleet-")
            .tempdir_in(scratch)
            .map_err(BenchError::io("create the fleet's scratch dir"))?;
        let root = dir
            .path()
            .canonicalize()
            .map_err(BenchError::io("resolve the fleet's scratch dir"))?;
        // A CA and a leaf it signed: the runners' TLS stack takes no self-signed leaf.
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let ca_args = [
            &[
                "req",
                "-x509",
                "-days",
                "1",
                "-subj",
                "/CN=amber-bench fleet CA",
            ][..],
            &ec,
            &["-keyout", "ca-key.pem", "-out", "ca.pem"],
        ]
        .concat();
        run("openssl", &ca_args, &root)?;
        let csr_args = [
            &["req", "-subj", "/CN=localhost"][..],
            &ec,
            &["-keyout", "key.pem", "-out", "cert.csr"],
        ]
        .concat();
        run("openssl", &csr_args, &root)?;
        std::fs::write(
            root.join("leaf.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n",
        )
        .map_err(BenchError::io("write the certificate's extensions"))?;
        run(
            "openssl",
            &[
                "x509",
                "-req",
                "-in",
                "cert.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca-key.pem",
                "-CAcreateserial",
                "-days",
                "1",
                "-extfile",
                "leaf.ext",
                "-out",
                "cert.pem",
            ],
            &root,
        )?;
        let token_file = root.join("pool.token");
        std::fs::write(&token_file, format!("{}\n", random_hex()))
            .map_err(BenchError::io("write the pool's token"))?;

        let seed = root.join("seed");
        std::fs::create_dir_all(&seed).map_err(BenchError::io("create the seed repository"))?;
        std::fs::write(seed.join("README.md"), "# fleet bench\n")
            .map_err(BenchError::io("write the seed README"))?;
        let identity = [
            "-c",
            "user.name=amber-bench",
            "-c",
            "user.email=amber-bench@localhost",
            "-c",
            "commit.gpgsign=false",
        ];
        run("git", &["init", "-q", "-b", "main"], &seed)?;
        run("git", &["add", "-A"], &seed)?;
        run(
            "git",
            &[&identity[..], &["commit", "-qm", "seed"]].concat(),
            &seed,
        )?;
        run("git", &["clone", "-q", "--bare", "seed", "repo.git"], &root)?;
        let work = root.join("work");
        std::fs::create_dir_all(&work).map_err(BenchError::io("create the workspace root"))?;
        Ok(FleetKit {
            repo_url: format!("file://{}", root.join("repo.git").display()),
            cert: root.join("cert.pem"),
            key: root.join("key.pem"),
            ca: root.join("ca.pem"),
            token_file,
            work,
            root,
            _dir: dir,
        })
    }

    /// amberd's config for this fleet: the executor listener on `ports.executors`, the
    /// metrics on `ports.metrics`, the pool, and how long an idle session keeps its runner.
    pub(crate) fn config(&self, ports: Ports, idle_release_secs: u64) -> String {
        fleet_config(
            &FleetPaths {
                cert: &self.cert,
                key: &self.key,
                token_file: &self.token_file,
                work: &self.work,
            },
            ports,
            idle_release_secs,
        )
    }

    /// Starts `amber-exec runner` `id` with `capacity`, dialling amberd on `port`; its
    /// metrics on `metrics_port` if given. Its log goes to `runner-ID.log` in the kit.
    pub(crate) fn runner(
        &self,
        amber_exec: &Path,
        port: u16,
        id: &str,
        capacity: u32,
        metrics_port: Option<u16>,
    ) -> Result<Child, BenchError> {
        let state = self.root.join(format!("state-{id}"));
        let log = std::fs::File::create(self.log_of(id))
            .map_err(BenchError::io(format!("create runner {id}'s log")))?;
        let mut cmd = Command::new(amber_exec);
        cmd.arg("runner")
            .arg("--connect")
            .arg(format!("wss://localhost:{port}/executors"))
            .args(["--pool", POOL, "--id", id, "--capacity"])
            .arg(capacity.to_string())
            .arg("--token-file")
            .arg(&self.token_file)
            .arg("--ca")
            .arg(&self.ca)
            .arg("--workspaces")
            .arg(&self.work)
            .arg("--state-dir")
            .arg(&state)
            .arg("--cache-dir")
            .arg(state.join("cache"))
            .env("AMBER_EXEC_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        if let Some(metrics) = metrics_port {
            cmd.arg("--metrics-listen")
                .arg(format!("127.0.0.1:{metrics}"));
        }
        cmd.spawn()
            .map_err(BenchError::io(format!("start runner {id}")))
    }

    fn log_of(&self, id: &str) -> PathBuf {
        self.root.join(format!("runner-{id}.log"))
    }

    /// The last lines runner `id` logged (for an error message).
    pub(crate) fn log_tail(&self, id: &str) -> String {
        let log = std::fs::read_to_string(self.log_of(id)).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(3).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }
}

/// The paths amberd's config names.
struct FleetPaths<'a> {
    cert: &'a Path,
    key: &'a Path,
    token_file: &'a Path,
    work: &'a Path,
}

/// The ports of one fleet daemon: the runners' listener and the metrics.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ports {
    pub executors: u16,
    pub metrics: u16,
}

impl Ports {
    pub(crate) fn free() -> Result<Ports, BenchError> {
        Ok(Ports {
            executors: free_port()?,
            metrics: free_port()?,
        })
    }
}

fn toml_string(text: &Path) -> String {
    toml::Value::String(text.display().to_string()).to_string()
}

fn fleet_config(paths: &FleetPaths<'_>, ports: Ports, idle_release_secs: u64) -> String {
    format!(
        "\n[executors]\nlisten = \"127.0.0.1:{executors}\"\ntls_cert = {cert}\ntls_key = {key}\n\
         \n[metrics]\nlisten = \"127.0.0.1:{metrics}\"\n\
         \n[fleet]\nworkspace_root = {work}\nheartbeat_secs = 5\nidle_release_secs = {idle_release_secs}\n\
         \n[fleet.pools.{POOL}]\ntoken_file = {token}\n",
        executors = ports.executors,
        metrics = ports.metrics,
        cert = toml_string(paths.cert),
        key = toml_string(paths.key),
        work = toml_string(paths.work),
        token = toml_string(paths.token_file),
    )
}

/// A loopback port free right now (bound and let go: the daemon binds it next).
pub(crate) fn free_port() -> Result<u16, BenchError> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(BenchError::io("find a free port"))
}

fn random_hex() -> String {
    let mut bytes = [0u8; 16];
    if let Ok(mut random) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = random.read_exact(&mut bytes);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runner processes, killed (SIGKILL) and reaped when dropped: none outlives the KPI.
#[derive(Default)]
pub(crate) struct Runners {
    children: Vec<(String, Child)>,
}

impl Runners {
    pub(crate) fn push(&mut self, id: &str, child: Child) {
        self.children.push((id.to_owned(), child));
    }

    pub(crate) fn pids(&self) -> Vec<u32> {
        self.children.iter().map(|(_, c)| c.id()).collect()
    }

    /// The first runner that exited: its id and status.
    pub(crate) fn exited(&mut self) -> Option<(String, std::process::ExitStatus)> {
        self.children.iter_mut().find_map(|(id, c)| {
            c.try_wait()
                .ok()
                .flatten()
                .map(|status| (id.clone(), status))
        })
    }
}

impl Drop for Runners {
    fn drop(&mut self) {
        for (_, child) in &mut self.children {
            let _ = child.kill();
        }
        for (_, child) in &mut self.children {
            let _ = child.wait();
        }
    }
}

/// `GET /metrics` on a loopback port: the page's body.
pub(crate) async fn scrape(port: u16) -> Result<String, BenchError> {
    let io = || BenchError::io(format!("read http://127.0.0.1:{port}/metrics"));
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(io())?;
    // HTTP/1.0: the answer is the body up to the close, never chunked.
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .map_err(io())?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await.map_err(io())?;
    let text = String::from_utf8_lossy(&response);
    Ok(text
        .split_once("\r\n\r\n")
        .map_or_else(String::new, |(_, body)| body.to_owned()))
}

/// The value of the sample `name` whose labels include every one of `labels`, in a
/// Prometheus text page; `None` when there is none (a cleared gauge is absent: zero).
pub(crate) fn metric(page: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    page.lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (series_name, series_labels) = match series.split_once('{') {
                Some((n, rest)) => (n, rest.strip_suffix('}')?),
                None => (series, ""),
            };
            let has = |(key, want): &(&str, &str)| {
                series_labels.split(',').any(|pair| {
                    pair.split_once('=').is_some_and(|(k, v)| {
                        k == *key
                            && v.strip_prefix('"').and_then(|v| v.strip_suffix('"')) == Some(*want)
                    })
                })
            };
            (series_name == name && labels.iter().all(has))
                .then(|| value.parse().ok())
                .flatten()
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_config_is_valid_toml_naming_the_pool_and_the_ports() {
        let paths = FleetPaths {
            cert: Path::new("/k/cert.pem"),
            key: Path::new("/k/key.pem"),
            token_file: Path::new("/k/a \"b\"/token"),
            work: Path::new("/k/work"),
        };
        let ports = Ports {
            executors: 7443,
            metrics: 9464,
        };
        let text = format!(
            "[agent]\nconfirm_finish = false\n{}",
            fleet_config(&paths, ports, 0)
        );
        let value: toml::Value = toml::from_str(&text).unwrap();
        assert_eq!(
            value["executors"]["listen"].as_str(),
            Some("127.0.0.1:7443")
        );
        assert_eq!(value["metrics"]["listen"].as_str(), Some("127.0.0.1:9464"));
        assert_eq!(value["fleet"]["workspace_root"].as_str(), Some("/k/work"));
        assert_eq!(value["fleet"]["idle_release_secs"].as_integer(), Some(0));
        assert_eq!(
            value["fleet"]["pools"][POOL]["token_file"].as_str(),
            Some("/k/a \"b\"/token")
        );
    }

    #[test]
    fn a_sample_is_found_by_name_and_labels() {
        let page = "# HELP amber_runners Runners\n# TYPE amber_runners gauge\n\
                    amber_runners{pool=\"default\",state=\"connected\"} 20\n\
                    amber_runners{pool=\"default\",state=\"busy\"} 3\n\
                    amber_fleet_sessions{state=\"queued\"} 1000\n\
                    amber_runner_sessions{runner=\"r1\",pool=\"default\"} 0\n\
                    amber_uptime 12.5\n";
        for (name, labels, want) in [
            ("amber_runners", &[("state", "connected")][..], Some(20.0)),
            (
                "amber_runners",
                &[("pool", "default"), ("state", "busy")],
                Some(3.0),
            ),
            ("amber_runners", &[("state", "draining")], None),
            ("amber_fleet_sessions", &[("state", "queued")], Some(1000.0)),
            ("amber_fleet_sessions", &[("state", "assigned")], None),
            ("amber_runner_sessions", &[], Some(0.0)),
            ("amber_uptime", &[], Some(12.5)),
            ("amber_runner", &[], None),
        ] {
            assert_eq!(metric(page, name, labels), want, "{name} {labels:?}");
        }
    }
}
