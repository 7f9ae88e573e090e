//! `deploy/kubernetes/` as a user applies it. The base and the `hpa` overlay are rendered
//! (`deploy/kubernetes/render.py`: kustomize when it is on PATH, checked against the built-in
//! renderer; the built-in one alone otherwise), from a copy of the tree with stand-in files for
//! the Secrets the user creates. Then:
//!
//! - every object of a Kubernetes API group passes `kubernetes-validate --strict` against the
//!   oldest and the newest Kubernetes it bundles schemas for; a warning (no schema: a typo in
//!   `apiVersion` or `kind`) fails too. A misspelt field must fail it (the validator is strict);
//! - objects of other groups (KEDA's `ScaledObject`) have no schema there: their required fields
//!   and their ties to the rest are checked here instead, and any other such kind fails the test
//!   until it gets checks of its own;
//! - what a user relies on: resource requests, the restricted Pod Security Standard, the runner's
//!   grace period over its `--grace`, `--sandbox-in-place`, every Secret and ConfigMap (and key)
//!   that a pod names exists, every path a command line or amberd's config names is mounted from
//!   the object that holds it, selectors of Services, the PodDisruptionBudget, NetworkPolicies and
//!   autoscalers select the pods they are for, and the autoscaler asks for
//!   `amber_fleet_queue_depth`.
//!
//! The validator comes from PyPI (`kubernetes-validate`, pinned in `.ci/run`, which installs it
//! into `target/ci-venv`). Without it these tests fail, saying how to install it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use amber_tests::steps::{run_bounded, run_bounded_with_stdin};
use serde_json::{Value, json};

/// The oldest and newest Kubernetes that kubernetes-validate 1.37.0 has schemas for; the
/// manifests claim both (docs/fleet.md).
const KUBERNETES_VERSIONS: &[&str] = &["1.25.0", "1.37.0"];
const NAMESPACE: &str = "amber";
const RUNNER: &str = "amber-runner";
const AMBERD: &str = "amberd";
const QUEUE_METRIC: &str = "amber_fleet_queue_depth";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

// ---------------------------------------------------------------------------------------------
// The tools: kubernetes-validate, and the Python it runs on (which has PyYAML).

struct Tools {
    validator: PathBuf,
    python: PathBuf,
}

fn executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| executable(p))
}

/// `$KUBERNETES_VALIDATE`, else `kubernetes-validate` on PATH, else `.ci/run`'s venv.
fn tools() -> Tools {
    let venv = repo().join("target/ci-venv/bin");
    let named = std::env::var_os("KUBERNETES_VALIDATE").map(PathBuf::from);
    if let Some(named) = &named {
        assert!(
            executable(named),
            "KUBERNETES_VALIDATE={} is not an executable file",
            named.display()
        );
    }
    let validator = named
        .or_else(|| on_path("kubernetes-validate"))
        .or_else(|| Some(venv.join("kubernetes-validate")).filter(|p| executable(p)))
        .unwrap_or_else(|| {
            panic!(
                "kubernetes-validate is not installed: these tests validate deploy/kubernetes \
                 against the Kubernetes schemas with it. Install it as .ci/run does:\n  \
                 python3 -m venv target/ci-venv && target/ci-venv/bin/pip install \
                 kubernetes-validate==1.37.0\n(on Debian `apt-get install python3-venv` first), \
                 or put it on PATH, or name it in $KUBERNETES_VALIDATE"
            )
        });
    // A pip console script names its interpreter on its first line.
    let script = std::fs::read_to_string(&validator)
        .unwrap_or_else(|e| panic!("read {}: {e}", validator.display()));
    let shebang = script.lines().next().unwrap_or_default();
    let interpreter: Vec<&str> = shebang
        .strip_prefix("#!")
        .unwrap_or_else(|| panic!("{} has no #! line", validator.display()))
        .split_whitespace()
        .collect();
    let python = match interpreter.as_slice() {
        [env, program, ..] if env.ends_with("/env") => {
            on_path(program).unwrap_or_else(|| panic!("{program} (from {shebang}) is not on PATH"))
        }
        [program, ..] => PathBuf::from(program),
        [] => panic!("{}: empty #! line", validator.display()),
    };
    Tools { validator, python }
}

impl Tools {
    /// Runs the validator's Python on `args`; its stdout, which must be JSON.
    fn python_json(&self, args: &[&str], stdin: Option<&str>) -> Value {
        let mut cmd = Command::new(&self.python);
        cmd.args(args);
        let (code, stdout, stderr) = match stdin {
            None => run_bounded(cmd),
            Some(text) => {
                let file = tempfile::NamedTempFile::new().unwrap();
                std::fs::write(file.path(), text).unwrap();
                let input = std::fs::File::open(file.path()).unwrap();
                run_bounded_with_stdin(cmd, input.into())
            }
        };
        assert_eq!(
            code,
            Some(0),
            "{} {args:?} failed:\n{stderr}",
            self.python.display()
        );
        serde_json::from_str(&stdout)
            .unwrap_or_else(|e| panic!("{args:?} printed no JSON ({e}):\n{stdout}\n{stderr}"))
    }

    /// `kubernetes-validate --strict` on each object, against each of KUBERNETES_VERSIONS:
    /// (passed, the validator's output) — passed only when every object passed on every
    /// version with no warning.
    fn validate(&self, objects: &[&Value]) -> (bool, String) {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = Command::new(&self.validator);
        cmd.arg("--strict");
        for version in KUBERNETES_VERSIONS {
            cmd.args(["-k", version]);
        }
        for (i, obj) in objects.iter().enumerate() {
            let file = dir
                .path()
                .join(format!("{i:02}-{}.json", name_of(obj).replace('/', "-")));
            std::fs::write(&file, serde_json::to_vec(obj).unwrap()).unwrap();
            cmd.arg(file);
        }
        let (code, stdout, stderr) = run_bounded(cmd);
        let output = format!("{stdout}{stderr}");
        let passed = output
            .lines()
            .filter(|l| l.contains(" passed for resource "))
            .count();
        let complaints = output
            .lines()
            .any(|l| l.starts_with("WARN") || l.starts_with("ERROR") || l.starts_with("FATAL"));
        let ok =
            code == Some(0) && !complaints && passed == objects.len() * KUBERNETES_VERSIONS.len();
        (ok, output)
    }
}

// ---------------------------------------------------------------------------------------------
// Rendering.

/// Copies a tree, but not the files a user may have put in a `secrets` folder (real keys).
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    let secrets = from.file_name().is_some_and(|n| n == "secrets");
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else if !secrets || entry.file_name() == "README.md" || entry.file_name() == ".gitignore"
        {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// The files a user creates under base/secrets (secrets/README.md), as stand-ins.
const SECRET_FILES: &[(&str, &str)] = &[
    (
        "ca.crt",
        "-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n",
    ),
    (
        "tls.crt",
        "-----BEGIN CERTIFICATE-----\nstand-in\n-----END CERTIFICATE-----\n",
    ),
    (
        "tls.key",
        "-----BEGIN PRIVATE KEY-----\nstand-in\n-----END PRIVATE KEY-----\n",
    ),
    ("pool-default.token", "0123456789abcdef0123456789abcdef"),
    (
        "provider.env",
        "# the provider key\nOPENAI_API_KEY=sk-stand-in\n",
    ),
];

struct Rendered {
    renderer: String,
    objects: Vec<Value>,
    /// The copy of deploy/kubernetes it was rendered from.
    _tree: tempfile::TempDir,
}

/// Renders `deploy/kubernetes/<dir>` as a user would, after creating the Secrets' files.
fn render(tools: &Tools, dir: &str) -> Rendered {
    let tree = tempfile::tempdir().unwrap();
    copy_tree(&repo().join("deploy/kubernetes"), tree.path());
    let secrets = tree.path().join("base/secrets");
    for (name, content) in SECRET_FILES {
        std::fs::write(secrets.join(name), content).unwrap();
    }
    let script = tree.path().join("render.py");
    let target = tree.path().join(dir);
    let out = tools.python_json(&[script.to_str().unwrap(), target.to_str().unwrap()], None);
    let renderer = out["renderer"].as_str().unwrap().to_owned();
    eprintln!("{dir}: rendered with {renderer}");
    let objects = out["objects"].as_array().unwrap().clone();
    assert!(!objects.is_empty(), "{dir} rendered nothing");
    Rendered {
        renderer,
        objects,
        _tree: tree,
    }
}

// ---------------------------------------------------------------------------------------------
// Reading objects.

fn name_of(obj: &Value) -> String {
    format!(
        "{}/{}",
        obj["kind"].as_str().unwrap_or("?"),
        obj["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// Whether `apiVersion` is one of Kubernetes' own API groups (the ones with schemas).
fn is_kubernetes_group(obj: &Value) -> bool {
    let api = obj["apiVersion"].as_str().unwrap();
    match api.split_once('/') {
        None => true,
        Some((group, _)) => !group.contains('.') || group.ends_with(".k8s.io"),
    }
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}

fn get<'a>(objects: &'a [Value], kind: &str, name: &str) -> &'a Value {
    find(objects, kind, name).unwrap_or_else(|| panic!("no {kind}/{name} in the rendering"))
}

fn of_kind<'a>(objects: &'a [Value], kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
    objects.iter().filter(move |o| o["kind"] == kind)
}

fn workloads(objects: &[Value]) -> impl Iterator<Item = &Value> {
    objects
        .iter()
        .filter(|o| o["kind"] == "Deployment" || o["kind"] == "StatefulSet")
}

fn arr(v: &Value) -> &[Value] {
    v.as_array().map(Vec::as_slice).unwrap_or_default()
}

fn containers(pod_spec: &Value) -> impl Iterator<Item = &Value> {
    arr(&pod_spec["initContainers"])
        .iter()
        .chain(arr(&pod_spec["containers"]))
}

/// Whether a label selector (`matchLabels`, `matchExpressions`) selects `labels`.
fn selects(selector: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let by_labels = selector["matchLabels"]
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let by_expressions = arr(&selector["matchExpressions"]).iter().all(|e| {
        let key = e["key"].as_str().unwrap();
        let values: Vec<&str> = arr(&e["values"]).iter().filter_map(Value::as_str).collect();
        match e["operator"].as_str().unwrap() {
            "In" => label(key).is_some_and(|v| values.contains(&v)),
            "NotIn" => label(key).is_none_or(|v| !values.contains(&v)),
            "Exists" => label(key).is_some(),
            "DoesNotExist" => label(key).is_none(),
            other => panic!("unknown selector operator {other}"),
        }
    });
    by_labels && by_expressions
}

/// The command line of a container: command then args.
fn argv(container: &Value) -> Vec<String> {
    arr(&container["command"])
        .iter()
        .chain(arr(&container["args"]))
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// The value of `--flag VALUE` (or `--flag=VALUE`) in `argv`: every occurrence.
fn flag_values(argv: &[String], flag: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, arg) in argv.iter().enumerate() {
        if arg == flag {
            out.push(argv.get(i + 1).cloned().unwrap_or_default());
        } else if let Some(v) = arg.strip_prefix(&format!("{flag}=")) {
            out.push(v.to_owned());
        }
    }
    out
}

fn flag(argv: &[String], flag: &str) -> String {
    let values = flag_values(argv, flag);
    assert_eq!(
        values.len(),
        1,
        "{flag} given {} times in {argv:?}",
        values.len()
    );
    values[0].clone()
}

fn number(v: &Value) -> f64 {
    v.as_f64()
        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
        .unwrap_or_else(|| panic!("{v} is not a number"))
}

/// A container port by number or by name.
fn container_port(container: &Value, port: &Value) -> u64 {
    if let Some(n) = port.as_u64() {
        return n;
    }
    let name = port.as_str().unwrap();
    arr(&container["ports"])
        .iter()
        .find(|p| p["name"] == name)
        .and_then(|p| p["containerPort"].as_u64())
        .unwrap_or_else(|| panic!("no port named {name} in container {}", container["name"]))
}

fn listen_port(addr: &str) -> u64 {
    addr.rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| panic!("{addr} has no port"))
}

/// Where a file a container reads comes from.
#[derive(Debug, PartialEq)]
struct Source {
    kind: &'static str,
    name: String,
    key: String,
    optional: bool,
}

/// The ConfigMap or Secret key that `path` in `container` of `pod_spec` is, through its volume
/// mounts; panics when no mount covers it or the volume is of another kind.
fn source_of(pod_spec: &Value, container: &Value, path: &str) -> Source {
    let mount = arr(&container["volumeMounts"])
        .iter()
        .filter(|m| {
            let at = m["mountPath"].as_str().unwrap();
            path == at || path.starts_with(&format!("{}/", at.trim_end_matches('/')))
        })
        .max_by_key(|m| m["mountPath"].as_str().unwrap().len())
        .unwrap_or_else(|| {
            panic!(
                "{path}: no volume of {} is mounted there",
                container["name"]
            )
        });
    let at = mount["mountPath"].as_str().unwrap();
    let volume = arr(&pod_spec["volumes"])
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap_or_else(|| panic!("volume {} is mounted but not declared", mount["name"]));
    let relative = match mount["subPath"].as_str() {
        Some(sub) => {
            assert_eq!(
                path, at,
                "{path} is below a file mounted with subPath at {at}"
            );
            sub.to_owned()
        }
        None => path[at.len()..].trim_start_matches('/').to_owned(),
    };
    let (kind, spec) = if volume["configMap"].is_object() {
        ("ConfigMap", &volume["configMap"])
    } else if volume["secret"].is_object() {
        ("Secret", &volume["secret"])
    } else {
        panic!(
            "{path} is on volume {}, neither a ConfigMap nor a Secret",
            volume["name"]
        );
    };
    let name = spec["name"]
        .as_str()
        .or_else(|| spec["secretName"].as_str())
        .unwrap()
        .to_owned();
    let key = match spec["items"].as_array() {
        Some(items) => items
            .iter()
            .find(|i| i["path"] == relative.as_str())
            .and_then(|i| i["key"].as_str())
            .unwrap_or_else(|| panic!("{path}: no item of {kind} {name} is at {relative}"))
            .to_owned(),
        None => relative,
    };
    Source {
        kind,
        name,
        key,
        optional: spec["optional"] == true,
    }
}

/// The volume mounted exactly at `path` in `container`.
fn volume_at<'a>(pod_spec: &'a Value, container: &Value, path: &str) -> &'a Value {
    let mount = arr(&container["volumeMounts"])
        .iter()
        .find(|m| m["mountPath"] == path)
        .unwrap_or_else(|| panic!("nothing is mounted at {path} in {}", container["name"]));
    arr(&pod_spec["volumes"])
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap_or_else(|| panic!("volume {} is mounted but not declared", mount["name"]))
}

fn data_keys(obj: &Value) -> Vec<String> {
    ["data", "stringData", "binaryData"]
        .iter()
        .filter_map(|f| obj[*f].as_object())
        .flat_map(|m| m.keys().cloned())
        .collect()
}

/// The key `source` names exists in the rendering (unless the volume is optional and its
/// object is left to the user).
fn assert_exists(objects: &[Value], source: &Source, what: &str) {
    match find(objects, source.kind, &source.name) {
        Some(obj) => assert!(
            data_keys(obj).contains(&source.key),
            "{what}: {} {} has no key {} (it has {:?})",
            source.kind,
            source.name,
            source.key,
            data_keys(obj)
        ),
        None => assert!(
            source.optional,
            "{what}: {} {} does not exist",
            source.kind, source.name
        ),
    }
}

fn pod_spec(workload: &Value) -> &Value {
    &workload["spec"]["template"]["spec"]
}

fn pod_labels(workload: &Value) -> &Value {
    &workload["spec"]["template"]["metadata"]["labels"]
}

fn container<'a>(workload: &'a Value, name: &str) -> &'a Value {
    arr(&pod_spec(workload)["containers"])
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("{} has no container {name}", name_of(workload)))
}

/// amberd's config.toml parsed (Python's tomllib), as JSON.
fn parse_toml(tools: &Tools, text: &str) -> Value {
    tools.python_json(
        &[
            "-c",
            "import json, sys, tomllib; json.dump(tomllib.loads(sys.stdin.read()), sys.stdout, default=str)",
        ],
        Some(text),
    )
}

// ---------------------------------------------------------------------------------------------
// The checks.

/// Schemas for the Kubernetes objects; the other groups' kinds must be ones checked below.
fn validate_against_schemas(tools: &Tools, rendered: &Rendered, what: &str) {
    let (core, custom): (Vec<&Value>, Vec<&Value>) = rendered
        .objects
        .iter()
        .partition(|o| is_kubernetes_group(o));
    let (ok, output) = tools.validate(&core);
    assert!(
        ok,
        "{what} ({}): kubernetes-validate --strict refused or warned:\n{output}",
        rendered.renderer
    );
    for obj in custom {
        assert!(
            obj["apiVersion"] == "keda.sh/v1alpha1" && obj["kind"] == "ScaledObject",
            "{what}: {} ({}) has no schema in kubernetes-validate and no checks in this test: \
             add them",
            name_of(obj),
            obj["apiVersion"]
        );
    }
}

/// Every object is in the namespace amber, which exists and enforces the restricted profile.
fn check_namespace(objects: &[Value]) {
    let ns = get(objects, "Namespace", NAMESPACE);
    assert_eq!(
        ns["metadata"]["labels"]["pod-security.kubernetes.io/enforce"], "restricted",
        "the namespace should enforce the restricted Pod Security Standard"
    );
    for obj in objects.iter().filter(|o| o["kind"] != "Namespace") {
        assert_eq!(obj["metadata"]["namespace"], NAMESPACE, "{}", name_of(obj));
    }
}

/// Requests, limits and the restricted Pod Security Standard for every container.
fn check_workloads(objects: &[Value]) {
    for w in workloads(objects) {
        let what = name_of(w);
        assert!(
            selects(&w["spec"]["selector"], pod_labels(w)),
            "{what}: its selector does not select its own pods"
        );
        let pod = pod_spec(w);
        let psc = &pod["securityContext"];
        assert_eq!(psc["runAsNonRoot"], true, "{what}: runAsNonRoot");
        assert_eq!(
            psc["seccompProfile"]["type"], "RuntimeDefault",
            "{what}: seccompProfile"
        );
        assert_ne!(psc["runAsUser"], 0, "{what}: runs as root");
        for host in ["hostNetwork", "hostPID", "hostIPC"] {
            assert_ne!(pod[host], true, "{what}: {host}");
        }
        assert_eq!(
            pod["automountServiceAccountToken"], false,
            "{what}: talks to no API"
        );
        for v in arr(&pod["volumes"]) {
            assert!(
                v["hostPath"].is_null(),
                "{what}: hostPath volume {}",
                v["name"]
            );
        }
        for c in containers(pod) {
            let cwhat = format!("{what} container {}", c["name"]);
            let requests = &c["resources"]["requests"];
            for r in ["cpu", "memory"] {
                assert!(
                    requests[r].is_string(),
                    "{cwhat}: no resources.requests.{r}"
                );
            }
            assert!(
                c["resources"]["limits"]["memory"].is_string(),
                "{cwhat}: no memory limit"
            );
            let sc = &c["securityContext"];
            assert_eq!(sc["allowPrivilegeEscalation"], false, "{cwhat}");
            assert_eq!(sc["readOnlyRootFilesystem"], true, "{cwhat}");
            assert_ne!(sc["privileged"], true, "{cwhat}");
            assert!(
                arr(&sc["capabilities"]["drop"]).contains(&json!("ALL")),
                "{cwhat}: drop ALL"
            );
            assert!(
                arr(&sc["capabilities"]["add"]).is_empty(),
                "{cwhat}: adds capabilities"
            );
            let image = c["image"].as_str().unwrap();
            assert!(
                image.contains('/') && image.contains(':'),
                "{cwhat}: image {image} was not set by kustomization's `images`"
            );
        }
    }
}

/// Every ConfigMap and Secret a pod names (volumes, envFrom, env) exists, with the keys named.
fn check_references(objects: &[Value]) {
    for w in workloads(objects) {
        let what = name_of(w);
        let pod = pod_spec(w);
        for v in arr(&pod["volumes"]) {
            for (kind, spec) in [("ConfigMap", &v["configMap"]), ("Secret", &v["secret"])] {
                if !spec.is_object() {
                    continue;
                }
                let name = spec["name"]
                    .as_str()
                    .or_else(|| spec["secretName"].as_str())
                    .unwrap();
                let keys: Vec<&str> = arr(&spec["items"])
                    .iter()
                    .filter_map(|i| i["key"].as_str())
                    .collect();
                match find(objects, kind, name) {
                    Some(obj) => {
                        for key in keys {
                            assert!(
                                data_keys(obj).iter().any(|k| k == key),
                                "{what}: {kind} {name} has no key {key}"
                            );
                        }
                    }
                    None => assert!(
                        spec["optional"] == true,
                        "{what}: volume {} names {kind} {name}, which does not exist",
                        v["name"]
                    ),
                }
            }
        }
        for c in containers(pod) {
            for from in arr(&c["envFrom"]) {
                for (kind, r) in [
                    ("ConfigMap", &from["configMapRef"]),
                    ("Secret", &from["secretRef"]),
                ] {
                    if let Some(name) = r["name"].as_str() {
                        assert!(
                            find(objects, kind, name).is_some() || r["optional"] == true,
                            "{what}: envFrom names {kind} {name}, which does not exist"
                        );
                    }
                }
            }
            for e in arr(&c["env"]) {
                for (kind, r) in [
                    ("ConfigMap", &e["valueFrom"]["configMapKeyRef"]),
                    ("Secret", &e["valueFrom"]["secretKeyRef"]),
                ] {
                    if let Some(name) = r["name"].as_str() {
                        let source = Source {
                            kind,
                            name: name.to_owned(),
                            key: r["key"].as_str().unwrap().to_owned(),
                            optional: r["optional"] == true,
                        };
                        assert_exists(objects, &source, &format!("{what} env {}", e["name"]));
                    }
                }
            }
            // A file mounted with subPath must be a key of its object.
            for m in arr(&c["volumeMounts"]) {
                if m["subPath"].is_string() {
                    let source = source_of(pod, c, m["mountPath"].as_str().unwrap());
                    assert_exists(
                        objects,
                        &source,
                        &format!("{what} mount {}", m["mountPath"]),
                    );
                }
            }
        }
    }
}

/// amberd: one replica, its data on a claim, ready when 7443 answers, its config a ConfigMap key
/// that parses as TOML and names paths that are mounted from the right Secrets.
fn check_amberd(tools: &Tools, objects: &[Value]) -> Value {
    let sts = get(objects, "StatefulSet", AMBERD);
    assert_eq!(sts["spec"]["replicas"], 1, "one amberd owns its store");
    let c = container(sts, AMBERD);
    let args = argv(c);
    assert!(
        args.iter().any(|a| a == "amberd"),
        "amberd's command: {args:?}"
    );
    let pod = pod_spec(sts);

    // The data dir is the claim's volume.
    let data_dir = flag(&args, "--data-dir");
    let mount = arr(&c["volumeMounts"])
        .iter()
        .find(|m| m["mountPath"] == data_dir.as_str())
        .unwrap_or_else(|| panic!("--data-dir {data_dir} is not mounted"));
    assert!(
        arr(&sts["spec"]["volumeClaimTemplates"])
            .iter()
            .any(|t| t["metadata"]["name"] == mount["name"]),
        "--data-dir {data_dir} should be a volumeClaimTemplate's volume"
    );
    // The socket's directory is writable (an emptyDir).
    let socket = flag(&args, "--socket");
    let socket_dir = Path::new(&socket).parent().unwrap().to_str().unwrap();
    assert!(
        volume_at(pod, c, socket_dir)["emptyDir"].is_object(),
        "{socket_dir}: an emptyDir"
    );

    // The config file.
    let config_path = flag(&args, "--config");
    let source = source_of(pod, c, &config_path);
    assert_eq!(source.kind, "ConfigMap", "--config {config_path}");
    assert_exists(objects, &source, "amberd --config");
    let text = get(objects, "ConfigMap", &source.name)["data"][&source.key]
        .as_str()
        .unwrap()
        .to_owned();
    let config = parse_toml(tools, &text);

    // The runners' listener: TLS from the Secret amberd-tls, the port the readiness probe and
    // the Service use.
    let executors = &config["executors"];
    let port = listen_port(executors["listen"].as_str().unwrap());
    for (field, key) in [("tls_cert", "tls.crt"), ("tls_key", "tls.key")] {
        let path = executors[field]
            .as_str()
            .unwrap_or_else(|| panic!("[executors] {field}"));
        let source = source_of(pod, c, path);
        assert_eq!(source.kind, "Secret", "[executors] {field} {path}");
        assert_eq!(source.key, key, "[executors] {field} {path}");
        assert_exists(objects, &source, &format!("[executors] {field}"));
        assert_eq!(
            get(objects, "Secret", &source.name)["type"],
            "kubernetes.io/tls",
            "{} should be a TLS Secret",
            source.name
        );
    }
    let probe = &c["readinessProbe"]["tcpSocket"]["port"];
    assert_eq!(
        container_port(c, probe),
        port,
        "readiness should be the executors' port"
    );

    // Each pool's token file is mounted from a Secret.
    let pools = config["fleet"]["pools"]
        .as_object()
        .expect("[fleet.pools.*]");
    assert!(!pools.is_empty(), "no pool in [fleet.pools]");
    for (name, pool) in pools {
        let path = pool["token_file"].as_str().unwrap();
        let source = source_of(pod, c, path);
        assert_eq!(source.kind, "Secret", "pool {name} token_file {path}");
        assert!(!source.optional, "pool {name}'s token may not be optional");
        assert_exists(objects, &source, &format!("pool {name} token_file"));
        assert!(
            pool["max_sessions"].as_u64().is_some_and(|n| n > 0),
            "pool {name} max_sessions"
        );
    }

    // The Service: it selects amberd, and its ports reach the executors' and metrics' ports.
    let svc = get(objects, "Service", AMBERD);
    assert!(
        selects(
            &json!({"matchLabels": svc["spec"]["selector"]}),
            pod_labels(sts)
        ),
        "Service amberd does not select amberd's pods"
    );
    let metrics = listen_port(config["metrics"]["listen"].as_str().unwrap());
    for (name, want) in [("executors", port), ("metrics", metrics)] {
        let p = arr(&svc["spec"]["ports"])
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("Service amberd has no port {name}"));
        assert_eq!(p["port"], want, "Service port {name}");
        assert_eq!(
            container_port(c, &p["targetPort"]),
            want,
            "Service targetPort {name}"
        );
    }
    config
}

/// The runner: its command line, grace, mounts, and that it dials amberd's Service.
/// Returns its capacity.
fn check_runner(objects: &[Value], config: &Value) -> u64 {
    let deploy = get(objects, "Deployment", RUNNER);
    assert!(
        deploy["spec"]["replicas"].is_null(),
        "the autoscaler owns the runners' replicas: an apply must not reset them"
    );
    let pod = pod_spec(deploy);
    let c = arr(&pod["containers"])
        .iter()
        .find(|c| {
            argv(c)
                .windows(2)
                .any(|w| w[0].ends_with("amber-exec") && w[1] == "runner")
        })
        .expect("no container runs `amber-exec runner`");
    let args = argv(c);
    assert!(
        args.iter().any(|a| a == "--sandbox-in-place"),
        "the runner needs --sandbox-in-place in an unprivileged pod: {args:?}"
    );
    let capacity: u64 = flag(&args, "--capacity").parse().expect("--capacity N");
    assert!(capacity > 0, "--capacity");
    let grace: u64 = flag(&args, "--grace").parse().expect("--grace SECS");
    let termination = pod["terminationGracePeriodSeconds"]
        .as_u64()
        .expect("terminationGracePeriodSeconds");
    assert!(
        termination > grace,
        "terminationGracePeriodSeconds {termination} must exceed --grace {grace}: the kubelet \
         would kill turns the runner could have parked"
    );

    // It dials amberd's Service, on the executors' port.
    let connect = flag(&args, "--connect");
    let url = connect
        .strip_prefix("wss://")
        .unwrap_or_else(|| panic!("--connect {connect}: TLS (wss://) only"));
    let (authority, path) = url.split_once('/').unwrap();
    assert_eq!(path, "executors", "--connect path");
    let (host, port) = authority.split_once(':').unwrap();
    assert_eq!(host, format!("{AMBERD}.{NAMESPACE}.svc"), "--connect host");
    let port: u64 = port.parse().unwrap();
    assert_eq!(
        port,
        listen_port(config["executors"]["listen"].as_str().unwrap()),
        "--connect port"
    );
    let svc = get(objects, "Service", AMBERD);
    assert!(
        arr(&svc["spec"]["ports"]).iter().any(|p| p["port"] == port),
        "Service amberd has no port {port}"
    );

    // Its pool exists in amberd's config, and its token is that pool's token: the same Secret
    // key that amberd mounts at the pool's token_file.
    let pool = flag(&args, "--pool");
    assert!(
        config["fleet"]["pools"][&pool].is_object(),
        "--pool {pool}: no [fleet.pools.{pool}] in amberd's config"
    );
    let token = source_of(pod, c, &flag(&args, "--token-file"));
    assert_eq!(token.kind, "Secret", "--token-file");
    assert!(!token.optional, "the pool token may not be optional");
    assert_exists(objects, &token, "runner --token-file");
    let sts = get(objects, "StatefulSet", AMBERD);
    let amberd_token = source_of(
        pod_spec(sts),
        container(sts, AMBERD),
        config["fleet"]["pools"][&pool]["token_file"]
            .as_str()
            .unwrap(),
    );
    assert_eq!(
        token, amberd_token,
        "the runner's token is not amberd's token of pool {pool}"
    );
    let ca = source_of(pod, c, &flag(&args, "--ca"));
    assert_eq!(ca.kind, "Secret", "--ca");
    assert_exists(objects, &ca, "runner --ca");

    // Workspaces and cache are scratch space of the pod; workspaces where amberd says.
    let workspaces = flag(&args, "--workspaces");
    assert_eq!(
        config["fleet"]["workspace_root"],
        workspaces.as_str(),
        "[fleet] workspace_root"
    );
    for dir in [workspaces, flag(&args, "--cache-dir")] {
        assert!(
            volume_at(pod, c, &dir)["emptyDir"].is_object(),
            "{dir} should be an emptyDir"
        );
    }
    let metrics = flag(&args, "--metrics-listen");
    let metrics_port = listen_port(&metrics);
    assert!(
        arr(&c["ports"])
            .iter()
            .any(|p| p["containerPort"] == metrics_port),
        "runner metrics port {metrics_port} not declared"
    );
    for label in flag_values(&args, "--label") {
        assert!(
            label
                .split_once('=')
                .is_some_and(|(k, v)| !k.is_empty() && !v.is_empty()),
            "--label {label}: KEY=VALUE"
        );
    }

    // Git credentials are the runner's own: its git config (a ConfigMap at ~/.gitconfig) reads
    // them from the optional Secret at ~/.ssh, a location sandboxed commands cannot read.
    let home = arr(&c["env"])
        .iter()
        .find(|e| e["name"] == "HOME")
        .and_then(|e| e["value"].as_str())
        .expect("the runner's HOME");
    let gitconfig = source_of(pod, c, &format!("{home}/.gitconfig"));
    assert_eq!(gitconfig.kind, "ConfigMap", "~/.gitconfig");
    assert_exists(objects, &gitconfig, "runner ~/.gitconfig");
    let text = get(objects, "ConfigMap", &gitconfig.name)["data"][&gitconfig.key]
        .as_str()
        .unwrap();
    assert!(
        text.contains(&format!("{home}/.ssh/")),
        "the credential helper should read ~/.ssh: {text}"
    );
    let credentials = volume_at(pod, c, &format!("{home}/.ssh"));
    assert_eq!(
        credentials["secret"]["optional"], true,
        "git credentials: an optional Secret at ~/.ssh"
    );

    // The PodDisruptionBudget selects the runners and nothing else.
    let pdbs: Vec<&Value> = of_kind(objects, "PodDisruptionBudget")
        .filter(|p| selects(&p["spec"]["selector"], pod_labels(deploy)))
        .collect();
    assert_eq!(
        pdbs.len(),
        1,
        "one PodDisruptionBudget should select the runner pods"
    );
    assert!(
        !selects(&pdbs[0]["spec"]["selector"], pod_labels(sts)),
        "the runners' PodDisruptionBudget also selects amberd"
    );
    capacity
}

/// NetworkPolicies: each selects pods that exist; amberd's 7443 is open to runner pods only,
/// its metrics to the monitoring namespace; runners may reach amberd's 7443 and DNS.
fn check_network_policies(objects: &[Value], config: &Value) {
    let pods: Vec<(String, &Value)> = workloads(objects)
        .map(|w| (name_of(w), pod_labels(w)))
        .collect();
    let selected = |selector: &Value| -> Vec<String> {
        pods.iter()
            .filter(|(_, l)| selects(selector, l))
            .map(|(n, _)| n.clone())
            .collect()
    };
    let runner = pod_labels(get(objects, "Deployment", RUNNER));
    let amberd = pod_labels(get(objects, "StatefulSet", AMBERD));
    let executors_port = listen_port(config["executors"]["listen"].as_str().unwrap());
    let metrics_port = listen_port(config["metrics"]["listen"].as_str().unwrap());
    let mut amberd_policies = 0;
    let mut runner_policies = 0;
    for np in of_kind(objects, "NetworkPolicy") {
        let what = name_of(np);
        let spec = &np["spec"];
        assert!(
            !selected(&spec["podSelector"]).is_empty(),
            "{what} selects no pod"
        );
        // A pod peer without a namespace selector is a pod of this namespace: it must exist.
        for rule in arr(&spec["ingress"]).iter().chain(arr(&spec["egress"])) {
            for peer in arr(&rule["from"]).iter().chain(arr(&rule["to"])) {
                if peer["podSelector"].is_object() && peer["namespaceSelector"].is_null() {
                    assert!(
                        !selected(&peer["podSelector"]).is_empty(),
                        "{what}: a peer selects no pod: {peer}"
                    );
                }
            }
        }
        let rule_ports = |rule: &Value| -> Vec<u64> {
            arr(&rule["ports"])
                .iter()
                .filter_map(|p| p["port"].as_u64())
                .collect()
        };
        if selects(&spec["podSelector"], amberd) {
            amberd_policies += 1;
            let ingress = arr(&spec["ingress"]);
            assert!(
                !ingress.is_empty(),
                "{what}: amberd's ingress is not restricted"
            );
            for rule in ingress {
                let from = arr(&rule["from"]);
                assert!(
                    !from.is_empty(),
                    "{what}: an ingress rule open to every source: {rule}"
                );
                let ports = rule_ports(rule);
                assert!(
                    !ports.is_empty(),
                    "{what}: an ingress rule for every port: {rule}"
                );
                if ports.contains(&executors_port) {
                    for peer in from {
                        assert!(
                            peer["namespaceSelector"].is_null()
                                && peer["ipBlock"].is_null()
                                && selects(&peer["podSelector"], runner)
                                && !selects(&peer["podSelector"], amberd),
                            "{what}: amberd's {executors_port} should be open to runner pods only: {peer}"
                        );
                    }
                }
                if ports.contains(&metrics_port) {
                    for peer in from {
                        assert_eq!(
                            peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"],
                            "monitoring",
                            "{what}: metrics from the monitoring namespace only: {peer}"
                        );
                    }
                }
            }
        }
        if selects(&spec["podSelector"], runner) {
            runner_policies += 1;
            let types = arr(&spec["policyTypes"]);
            assert!(
                types.contains(&json!("Egress")) && types.contains(&json!("Ingress")),
                "{what}: runners' ingress and egress are restricted"
            );
            let egress = arr(&spec["egress"]);
            assert!(
                egress
                    .iter()
                    .any(|r| rule_ports(r).contains(&executors_port)
                        && arr(&r["to"])
                            .iter()
                            .any(|p| selects(&p["podSelector"], amberd))),
                "{what}: runners may not reach amberd's {executors_port}"
            );
            assert!(
                egress.iter().any(|r| rule_ports(r).contains(&53)),
                "{what}: runners may not reach DNS"
            );
            for rule in egress {
                assert!(
                    !arr(&rule["to"]).is_empty(),
                    "{what}: an egress rule open to everywhere: {rule}"
                );
            }
        }
    }
    assert_eq!(amberd_policies, 1, "one NetworkPolicy should select amberd");
    assert_eq!(
        runner_policies, 1,
        "one NetworkPolicy should select the runners"
    );
}

/// KEDA's ScaledObject (no schema in kubernetes-validate): its required fields and its ties.
fn check_scaled_object(objects: &[Value], config: &Value, capacity: u64) {
    let so = get(objects, "ScaledObject", RUNNER);
    let spec = &so["spec"];
    let target = &spec["scaleTargetRef"];
    assert_eq!(target["name"], RUNNER, "ScaledObject scaleTargetRef.name");
    assert!(
        target["kind"].is_null() || target["kind"] == "Deployment",
        "scaleTargetRef.kind"
    );
    assert!(
        target["apiVersion"].is_null() || target["apiVersion"] == "apps/v1",
        "scaleTargetRef.apiVersion"
    );
    let min = spec["minReplicaCount"].as_u64().unwrap_or(0);
    let max = spec["maxReplicaCount"].as_u64().unwrap_or(100);
    assert!(min <= max, "minReplicaCount {min} > maxReplicaCount {max}");
    check_max_covers_pools(max, capacity, config);
    let triggers = arr(&spec["triggers"]);
    assert!(!triggers.is_empty(), "ScaledObject without triggers");
    for t in triggers {
        assert_eq!(t["type"], "prometheus", "trigger type");
        let m = &t["metadata"];
        let server = m["serverAddress"]
            .as_str()
            .expect("prometheus trigger: metadata.serverAddress");
        assert!(
            server.starts_with("http://") || server.starts_with("https://"),
            "serverAddress {server}"
        );
        let query = m["query"]
            .as_str()
            .expect("prometheus trigger: metadata.query");
        assert!(
            query.contains(&format!("{QUEUE_METRIC}{{pool=\"default\"}}")),
            "the trigger should query {QUEUE_METRIC} of the runners' pool: {query}"
        );
        assert!(number(&m["threshold"]) > 0.0, "threshold");
        if !m["activationThreshold"].is_null() {
            number(&m["activationThreshold"]);
        }
        assert!(
            ["AverageValue", "Value"].contains(&t["metricType"].as_str().unwrap_or("AverageValue")),
            "metricType"
        );
        assert!(
            m.as_object().unwrap().values().all(Value::is_string),
            "KEDA trigger metadata values are strings: {m}"
        );
    }
}

/// At most the pools' cap of sessions needs max × capacity runners' slots.
fn check_max_covers_pools(max: u64, capacity: u64, config: &Value) {
    let cap: u64 = config["fleet"]["pools"]
        .as_object()
        .unwrap()
        .values()
        .map(|p| p["max_sessions"].as_u64().unwrap())
        .sum();
    assert!(
        max * capacity >= cap,
        "{max} runners of capacity {capacity} cannot run the pools' {cap} sessions"
    );
}

/// Exactly one autoscaler owns the runner Deployment (a ScaledObject makes its own HPA).
fn autoscalers_of_runner(objects: &[Value]) -> Vec<String> {
    objects
        .iter()
        .filter(|o| o["kind"] == "ScaledObject" || o["kind"] == "HorizontalPodAutoscaler")
        .filter(|o| o["spec"]["scaleTargetRef"]["name"] == RUNNER)
        .map(name_of)
        .collect()
}

/// Everything a rendering must hold, whichever autoscaler it has; amberd's config and the
/// runner's capacity.
fn check_common(tools: &Tools, rendered: &Rendered, what: &str) -> (Value, u64) {
    validate_against_schemas(tools, rendered, what);
    let objects = &rendered.objects;
    check_namespace(objects);
    check_workloads(objects);
    check_references(objects);
    let config = check_amberd(tools, objects);
    let capacity = check_runner(objects, &config);
    check_network_policies(objects, &config);
    (config, capacity)
}

// ---------------------------------------------------------------------------------------------

#[test]
fn the_base_validates_and_its_objects_fit_together() {
    let tools = tools();
    let rendered = render(&tools, "base");
    let (config, capacity) = check_common(&tools, &rendered, "base");
    check_scaled_object(&rendered.objects, &config, capacity);
    assert_eq!(
        autoscalers_of_runner(&rendered.objects),
        ["ScaledObject/amber-runner"]
    );
}

#[test]
fn the_hpa_overlay_replaces_the_scaled_object_with_an_hpa_on_the_adapters_metric() {
    let tools = tools();
    let rendered = render(&tools, "overlays/hpa");
    let (config, capacity) = check_common(&tools, &rendered, "overlays/hpa");
    let objects = &rendered.objects;
    assert_eq!(
        autoscalers_of_runner(objects),
        ["HorizontalPodAutoscaler/amber-runner"],
        "the HPA alone should scale the runners"
    );
    let hpa = get(objects, "HorizontalPodAutoscaler", RUNNER);
    let spec = &hpa["spec"];
    assert_eq!(spec["scaleTargetRef"]["kind"], "Deployment");
    check_max_covers_pools(spec["maxReplicas"].as_u64().unwrap(), capacity, &config);
    let metrics = arr(&spec["metrics"]);
    assert_eq!(metrics.len(), 1, "one metric: {metrics:?}");
    let external = &metrics[0]["external"];
    assert_eq!(metrics[0]["type"], "External");
    let metric = external["metric"]["name"].as_str().unwrap();
    assert_eq!(
        external["metric"]["selector"]["matchLabels"]["pool"],
        "default"
    );

    // The Prometheus Adapter rule that serves it (applied with the adapter, not from here).
    let values = repo().join("deploy/kubernetes/overlays/hpa/prometheus-adapter-values.yaml");
    let docs = tools.python_json(
        &[
            repo().join("deploy/kubernetes/render.py").to_str().unwrap(),
            "--yaml",
            values.to_str().unwrap(),
        ],
        None,
    );
    let rules = arr(&docs[0]["rules"]["external"]);
    let rule = rules
        .iter()
        .find(|r| r["name"]["as"] == metric)
        .unwrap_or_else(|| {
            panic!("no adapter rule serves the external metric {metric}: {rules:?}")
        });
    assert!(
        rule["seriesQuery"].as_str().unwrap().contains(QUEUE_METRIC),
        "the rule should read {QUEUE_METRIC}"
    );
    assert!(
        rule["metricsQuery"]
            .as_str()
            .unwrap()
            .contains("<<.Series>>"),
        "the rule's metricsQuery should query the series it names"
    );
    assert!(
        rule["name"]["matches"]
            .as_str()
            .unwrap()
            .contains(QUEUE_METRIC),
        "the rule's name.matches should be {QUEUE_METRIC}"
    );
}

#[test]
fn the_validator_refuses_a_misspelt_field_and_an_unknown_api_version() {
    // Strictness is what these tests lean on: a field the schema does not know fails, and so
    // does an object with no schema (kubernetes-validate only warns about that; the check
    // above counts a warning as a failure).
    let tools = tools();
    let rendered = render(&tools, "base");
    let deploy = get(&rendered.objects, "Deployment", RUNNER);
    let (ok, output) = tools.validate(&[deploy]);
    assert!(ok, "{output}");
    let mut misspelt = deploy.clone();
    misspelt["spec"]["template"]["spec"]["containers"][0]["resource"] =
        json!({"requests": {"cpu": "1"}});
    let (ok, output) = tools.validate(&[&misspelt]);
    assert!(
        !ok && output.contains("'resource' was unexpected"),
        "{output}"
    );
    let mut unknown = deploy.clone();
    unknown["apiVersion"] = json!("apps/v9");
    let (ok, output) = tools.validate(&[&unknown]);
    assert!(!ok && output.contains("WARN"), "{output}");
}

#[test]
fn the_containerfile_provides_what_the_manifests_run() {
    let file = std::fs::read_to_string(repo().join("deploy/Containerfile")).unwrap();
    // The pods run these programs, as uid 10001, which must have a passwd entry (ssh needs one).
    for program in ["amberd", "amber-exec", "amber-cli"] {
        assert!(
            file.contains(&format!("target/release/{program}")),
            "the image lacks {program}"
        );
    }
    for package in ["git", "ca-certificates", "tini", "openssh-client"] {
        assert!(
            file.split_whitespace().any(|w| w == package),
            "the runtime image should install {package}"
        );
    }
    assert!(
        file.contains("--uid 10001"),
        "the image's user should be uid 10001, as the pods run"
    );
    assert!(
        file.contains("USER 10001"),
        "the image should not run as root"
    );
    let tools = tools();
    let rendered = render(&tools, "base");
    let mut programs = BTreeMap::new();
    for w in workloads(&rendered.objects) {
        for c in containers(pod_spec(w)) {
            programs.insert(argv(c)[0].clone(), name_of(w));
            assert_eq!(
                pod_spec(w)["securityContext"]["runAsUser"],
                10001,
                "{}",
                name_of(w)
            );
        }
    }
    for (program, by) in programs {
        assert_eq!(
            program, "/usr/bin/tini",
            "{by} runs {program}, which the image does not provide"
        );
    }
}
