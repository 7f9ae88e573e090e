#!/usr/bin/env python3
"""Renders a kustomization of deploy/kubernetes to JSON, for the CI check of the manifests.

    python3 render.py DIR           {"renderer": ..., "objects": [...]} on stdout
    python3 render.py --yaml FILE   the YAML documents of FILE as a JSON list

Needs PyYAML (kubernetes-validate installs it). Which renderer:

- kustomize itself: `kustomize build`, else `kubectl kustomize` (kubectl 1.21 or later; older
  ones embed kustomize 2, which cannot read these files). When it is there, the built-in
  renderer below runs too and both must give the same objects, so the fallback is checked on
  every machine that has kustomize.
- otherwise a small built-in renderer. It knows only the kustomization fields these
  manifests use (namespace, resources, images, generatorOptions with stable names,
  configMapGenerator and secretGenerator from files, literals and env files, and patches that
  delete an object) and refuses any other field rather than render it wrongly.

AMBER_KUSTOMIZE=builtin forces the built-in renderer; AMBER_KUSTOMIZE=kustomize fails when
no usable kustomize is found.
"""

import base64
import json
import os
import re
import shutil
import subprocess
import sys

import yaml

KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
KNOWN_FIELDS = {
    "apiVersion",
    "kind",
    "namespace",
    "resources",
    "images",
    "generatorOptions",
    "configMapGenerator",
    "secretGenerator",
    "patches",
}
# Kinds without a namespace, as kustomize's namespace transformer knows them (the ones a
# kustomization of amber may plausibly hold).
CLUSTER_SCOPED = {
    "Namespace",
    "ClusterRole",
    "ClusterRoleBinding",
    "CustomResourceDefinition",
    "PersistentVolume",
    "StorageClass",
    "PriorityClass",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "APIService",
}


class RenderError(Exception):
    pass


def load_documents(path):
    with open(path, encoding="utf-8") as f:
        return [doc for doc in yaml.safe_load_all(f) if doc is not None]


def kustomization_file(directory):
    for name in KUSTOMIZATION_NAMES:
        path = os.path.join(directory, name)
        if os.path.isfile(path):
            return path
    raise RenderError(f"{directory}: no kustomization.yaml")


def inside(root, path):
    """`path` under `root`, as kustomize's default load restrictor demands."""
    full = os.path.realpath(os.path.join(root, path))
    if os.path.commonpath([full, os.path.realpath(root)]) != os.path.realpath(root):
        raise RenderError(f"{path}: outside {root}, which kustomize refuses")
    return full


def split_source(entry):
    """A generator's `files` entry: `KEY=PATH` or `PATH` (the key is the file's name)."""
    if "=" in entry:
        key, path = entry.split("=", 1)
        return key, path
    return os.path.basename(entry), entry


def env_lines(path):
    pairs = []
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.rstrip("\r\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if "=" not in line:
                raise RenderError(f"{path}:{number}: not KEY=VALUE")
            key, value = line.split("=", 1)
            pairs.append((key.lstrip(), value))
    return pairs


def generate(directory, spec, kind, options):
    allowed = {"name", "files", "literals", "envs"} | ({"type"} if kind == "Secret" else set())
    unknown = set(spec) - allowed
    if unknown:
        raise RenderError(f"{kind} generator {spec.get('name')}: unknown fields {sorted(unknown)}")
    data = {}
    for entry in spec.get("files", []):
        key, path = split_source(entry)
        full = inside(directory, path)
        try:
            with open(full, "rb") as f:
                data[key] = f.read()
        except FileNotFoundError:
            raise RenderError(f"{kind} {spec['name']}: {path} does not exist") from None
    for literal in spec.get("literals", []):
        key, value = literal.split("=", 1)
        data[key] = value.encode()
    for path in spec.get("envs", []):
        full = inside(directory, path)
        if not os.path.isfile(full):
            raise RenderError(f"{kind} {spec['name']}: {path} does not exist")
        for key, value in env_lines(full):
            data[key] = value.encode()
    obj = {"apiVersion": "v1", "kind": kind, "metadata": {"name": spec["name"]}}
    if options.get("labels"):
        obj["metadata"]["labels"] = dict(options["labels"])
    if options.get("annotations"):
        obj["metadata"]["annotations"] = dict(options["annotations"])
    if kind == "Secret":
        obj["type"] = spec.get("type", "Opaque")
        obj["data"] = {k: base64.b64encode(v).decode() for k, v in data.items()}
    else:
        obj["data"] = {k: v.decode() for k, v in data.items()}
    return obj


def set_images(objects, images):
    def rewrite(image):
        for rule in images:
            name = rule["name"]
            if image == name or image.startswith(name + ":") or image.startswith(name + "@"):
                new = rule.get("newName", name)
                if "digest" in rule:
                    return f"{new}@{rule['digest']}"
                if "newTag" in rule:
                    return f"{new}:{rule['newTag']}"
                rest = image[len(name):]
                return new + rest
        return image

    def walk(node):
        if isinstance(node, dict):
            for key in ("containers", "initContainers", "ephemeralContainers"):
                for container in node.get(key) or []:
                    if isinstance(container, dict) and isinstance(container.get("image"), str):
                        container["image"] = rewrite(container["image"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    for obj in objects:
        walk(obj)


def delete_patch(directory, entry, objects):
    if set(entry) - {"path", "patch"}:
        raise RenderError(f"patch {entry}: only `path` or `patch`, without a target, is known here")
    docs = load_documents(inside(directory, entry["path"])) if "path" in entry else [
        d for d in yaml.safe_load_all(entry["patch"]) if d is not None]
    for doc in docs:
        if doc.get("$patch") != "delete":
            raise RenderError("the built-in renderer applies only `$patch: delete` patches")
        meta = doc.get("metadata", {})
        match = [o for o in objects
                 if o.get("apiVersion") == doc.get("apiVersion") and o.get("kind") == doc.get("kind")
                 and o["metadata"].get("name") == meta.get("name")
                 and ("namespace" not in meta or o["metadata"].get("namespace") == meta["namespace"])]
        if len(match) != 1:
            raise RenderError(f"delete patch for {doc.get('kind')}/{meta.get('name')}: matches {len(match)} objects")
        objects.remove(match[0])


def render_builtin(directory):
    k = load_documents(kustomization_file(directory))[0]
    unknown = set(k) - KNOWN_FIELDS
    if unknown:
        raise RenderError(
            f"{directory}: the built-in renderer does not know {sorted(unknown)}; "
            "use kustomize (kubectl 1.21+) or teach deploy/kubernetes/render.py")
    objects = []
    for entry in k.get("resources", []):
        # A directory (another kustomization) may be anywhere; a file must be below.
        full = os.path.realpath(os.path.join(directory, entry))
        if os.path.isdir(full):
            objects.extend(render_builtin(full))
        else:
            objects.extend(load_documents(inside(directory, entry)))
    options = k.get("generatorOptions", {})
    generators = [("ConfigMap", g) for g in k.get("configMapGenerator", [])] + [
        ("Secret", g) for g in k.get("secretGenerator", [])]
    if generators and not options.get("disableNameSuffixHash"):
        raise RenderError("the built-in renderer needs generatorOptions.disableNameSuffixHash: true")
    if set(options) - {"disableNameSuffixHash", "labels", "annotations"}:
        raise RenderError(f"generatorOptions: unknown fields {sorted(set(options))}")
    for kind, spec in generators:
        objects.append(generate(directory, spec, kind, options))
    for entry in k.get("patches", []):
        delete_patch(directory, entry, objects)
    if k.get("images"):
        set_images(objects, k["images"])
    if "namespace" in k:
        for obj in objects:
            if obj.get("kind") not in CLUSTER_SCOPED:
                obj.setdefault("metadata", {})["namespace"] = k["namespace"]
    return objects


def kustomize_command():
    """A kustomize of version 4 or later, as an argv prefix, or None."""
    if shutil.which("kustomize"):
        out = subprocess.run(["kustomize", "version"], capture_output=True, text=True).stdout
        m = re.search(r"v(\d+)\.", out)
        if m and int(m.group(1)) >= 4:
            return ["kustomize", "build"]
    if shutil.which("kubectl"):
        out = subprocess.run(["kubectl", "version", "--client"], capture_output=True, text=True).stdout
        m = re.search(r"Kustomize Version: v(\d+)\.", out)
        if m and int(m.group(1)) >= 4:
            return ["kubectl", "kustomize"]
    return None


def canonical(objects):
    # kustomize wraps the base64 of a long Secret value at 76 columns; Kubernetes decodes
    # either form alike.
    for obj in objects:
        if obj.get("kind") == "Secret" and isinstance(obj.get("data"), dict):
            obj["data"] = {k: "".join(v.split()) for k, v in obj["data"].items()}
    return sorted(objects, key=lambda o: (o.get("apiVersion", ""), o.get("kind", ""),
                                          o.get("metadata", {}).get("namespace", ""),
                                          o.get("metadata", {}).get("name", "")))


def render(directory):
    want = os.environ.get("AMBER_KUSTOMIZE", "auto")
    builtin = canonical(render_builtin(directory))
    if want == "builtin":
        return {"renderer": "built-in (AMBER_KUSTOMIZE=builtin)", "objects": builtin}
    command = kustomize_command()
    if command is None:
        if want == "kustomize":
            raise RenderError("AMBER_KUSTOMIZE=kustomize, but no kustomize v4+ (or kubectl 1.21+) is on PATH")
        return {"renderer": "built-in (no kustomize v4+ or kubectl 1.21+ on PATH)", "objects": builtin}
    done = subprocess.run(command + [directory], capture_output=True, text=True)
    if done.returncode != 0:
        raise RenderError(f"{' '.join(command)} {directory} failed:\n{done.stderr}")
    real = canonical([d for d in yaml.safe_load_all(done.stdout) if d is not None])
    if real != builtin:
        names = lambda objs: [f"{o['kind']}/{o['metadata']['name']}" for o in objs]
        detail = ""
        for a, b in zip(real, builtin):
            if a != b:
                detail = (f"first difference, {a['kind']}/{a['metadata']['name']}:\n"
                          f"kustomize: {json.dumps(a, sort_keys=True)}\n"
                          f"built-in:  {json.dumps(b, sort_keys=True)}")
                break
        raise RenderError(
            f"{' '.join(command)} and the built-in renderer disagree on {directory}\n"
            f"kustomize: {names(real)}\nbuilt-in:  {names(builtin)}\n{detail}")
    return {"renderer": " ".join(command) + " (the built-in renderer agrees)", "objects": real}


def main(argv):
    try:
        if len(argv) == 3 and argv[1] == "--yaml":
            json.dump(load_documents(argv[2]), sys.stdout)
        elif len(argv) == 2:
            json.dump(render(argv[1]), sys.stdout)
        else:
            print(__doc__, file=sys.stderr)
            return 2
    except (RenderError, yaml.YAMLError, OSError) as err:
        print(f"render.py: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
