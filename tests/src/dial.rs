//! An executor that dials in, for the suites: a test CA and a certificate for `localhost` it
//! signed (made with `openssl`), a token, the amberd config that listens for executor `far` on a free
//! loopback port, and the `amber-exec --connect` process, stopped on drop.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use tempfile::TempDir;

use crate::daemon::bin_path;

/// The name the executor dials in under.
pub const NAME: &str = "far";

/// The files an executor that dials in needs, and amberd's config for it.
pub struct DialSetup {
    pub dir: TempDir,
    pub port: u16,
    /// amberd's certificate (`cert.pem`, key `key.pem`) and the CA that signed it (`ca.pem`).
    pub cert: PathBuf,
    pub ca: PathBuf,
    pub token_file: PathBuf,
}

impl DialSetup {
    /// A certificate, a key and a token in a temp dir, and a free port.
    pub fn new() -> DialSetup {
        DialSetup::for_addresses(&[])
    }

    /// [`DialSetup::new`], its certificate valid for `addresses` (IPs) too: amberd as other
    /// "machines" reach it.
    pub fn for_addresses(addresses: &[&str]) -> DialSetup {
        let dir = tempfile::Builder::new()
            .prefix("amber-dial-")
            .tempdir()
            .unwrap();
        let root = dir.path().canonicalize().unwrap();
        // A CA, and a certificate for localhost it signed (webpki takes no self-signed leaf).
        let openssl = |args: &[&str]| {
            let status = Command::new("openssl")
                .args(args)
                .current_dir(&root)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("openssl");
            assert!(status.success(), "openssl {args:?}");
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let mut ca = vec!["req", "-x509", "-days", "1", "-subj", "/CN=amber test CA"];
        ca.extend(ec);
        ca.extend(["-keyout", "ca-key.pem", "-out", "ca.pem"]);
        openssl(&ca);
        let mut csr = vec!["req", "-subj", "/CN=localhost"];
        csr.extend(ec);
        csr.extend(["-keyout", "key.pem", "-out", "cert.csr"]);
        openssl(&csr);
        let mut names = "DNS:localhost,IP:127.0.0.1".to_owned();
        for address in addresses {
            names.push_str(&format!(",IP:{address}"));
        }
        std::fs::write(
            root.join("leaf.ext"),
            format!("subjectAltName={names}\nbasicConstraints=CA:FALSE\n"),
        )
        .unwrap();
        openssl(&[
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
        ]);
        let token_file = root.join("token");
        std::fs::write(&token_file, format!("{}\n", uuid_like())).unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        DialSetup {
            cert: root.join("cert.pem"),
            ca: root.join("ca.pem"),
            token_file,
            port,
            dir,
        }
    }

    /// amberd's config: the listener and `[environments.far]`.
    pub fn config(&self) -> String {
        let root = self.cert.parent().unwrap();
        format!(
            "\n[executors]\nlisten = \"127.0.0.1:{port}\"\ntls_cert = \"{cert}\"\ntls_key = \"{key}\"\n\
             \n[environments.{NAME}]\ndial_in = true\ntoken_file = \"{token}\"\nreconnect_secs = 10\n",
            port = self.port,
            cert = self.cert.display(),
            key = root.join("key.pem").display(),
            token = self.token_file.display(),
        )
    }

    /// Starts `amber-exec --connect` to `port` (amberd's, or a proxy's) with `token_file`.
    pub fn dial(&self, port: u16, token_file: &Path) -> Dialler {
        let state = self
            .dir
            .path()
            .join(format!("state-{port}-{}", uuid_like()));
        let child = Command::new(bin_path("amber-exec"))
            .arg("--connect")
            .arg(format!("wss://localhost:{port}/executors"))
            .args(["--name", NAME, "--token-file"])
            .arg(token_file)
            .arg("--ca")
            .arg(&self.ca)
            .arg("--state-dir")
            .arg(&state)
            .arg("--cache-dir")
            .arg(state.join("cache"))
            .env("AMBER_EXEC_LOG", "debug")
            .stdout(Stdio::null())
            .stderr(Stdio::from(
                std::fs::File::create(self.dir.path().join(format!("dial-{port}.log"))).unwrap(),
            ))
            .spawn()
            .expect("start amber-exec --connect");
        Dialler { child }
    }

    /// What the dialling executors logged.
    pub fn logs(&self) -> String {
        let mut all = String::new();
        for entry in std::fs::read_dir(self.dir.path()).unwrap().flatten() {
            if entry.file_name().to_string_lossy().starts_with("dial-") {
                all.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
            }
        }
        all
    }
}

impl Default for DialSetup {
    fn default() -> Self {
        Self::new()
    }
}

/// A running `amber-exec --connect`.
pub struct Dialler {
    pub child: Child,
}

impl Drop for Dialler {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn uuid_like() -> String {
    let mut bytes = [0u8; 16];
    if let Ok(mut random) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = random.read_exact(&mut bytes);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
