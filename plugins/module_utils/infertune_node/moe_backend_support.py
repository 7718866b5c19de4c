"""Judge an sglang MoE runner backend against the host's GPUs, from the installed sources alone.

Nothing here imports sglang, FlashInfer or torch: versions come from dist-info
directory names, choice lists from sglang's own files (choices.py is importable
by path with no dependencies since 0.5.20; older releases keep literal lists in
server_args.py, read with ast), the rules sglang states in code from
sglang_rules, and what FlashInfer says per compute capability from its sources.

Verdicts: unsupported (sglang refuses it, or a source says it cannot run here),
undeclared (FlashInfer does not declare this capability and nothing enforces it),
supported (a source or a measured matrix row says it runs), unknown (nothing covers it).
"""

import ast
import glob
import importlib.util
import json
import os
import re

from . import sglang_rules

SUPPORTED, UNSUPPORTED, UNDECLARED, UNKNOWN = "supported", "unsupported", "undeclared", "unknown"
# Worst first: the host's verdict is the worst of its GPU groups.
SEVERITY = (UNSUPPORTED, UNDECLARED, UNKNOWN, SUPPORTED)
# What the matrix and the messages call an unquantized (bf16/fp16) model; sglang's `None`.
UNQUANTIZED = "bf16"

# Runs under the venv's python: parse an argv with the installed release's own
# parser. ServerArgs.add_cli_args needs no GPU, but importing it needs torch.
PARSER_PROBE = r"""
import argparse, json, sys
try:
    from sglang.srt.server_args import ServerArgs
except Exception as exc:
    print(json.dumps({"imported": False, "error": "%s: %s" % (type(exc).__name__, exc)}))
    sys.exit(0)

class Refused(Exception):
    pass

class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise Refused(message)

parser = Parser(prog="sglang.launch_server")
ServerArgs.add_cli_args(parser)
try:
    parser.parse_args(json.loads(sys.argv[1]))
except Refused as exc:
    print(json.dumps({"imported": True, "ok": False, "error": str(exc)}))
else:
    print(json.dumps({"imported": True, "ok": True}))
"""


def site_dirs(venv):
    return sorted(glob.glob(os.path.join(venv, "lib", "python3*", "site-packages")))


def dist_version(sites, dist):
    """Installed version of a distribution, from its `NAME-VERSION.dist-info` directory name."""
    wanted = re.sub(r"[-_.]+", "_", dist).lower()
    for site in sites:
        for info in glob.glob(os.path.join(site, "*.dist-info")):
            name, sep, version = os.path.basename(info)[: -len(".dist-info")].rpartition("-")
            if re.sub(r"[-_.]+", "_", name).lower() == wanted:
                return version
    return None


def package_dir(sites, package):
    for site in sites:
        path = os.path.join(site, package)
        if os.path.isdir(path):
            return path
    return None


def version_key(version):
    """'0.5.15.post1' -> (0, 5, 15): release numbers only, for range checks."""
    match = re.match(r"\d+(?:\.\d+)*", version or "")
    return tuple(int(part) for part in match.group(0).split(".")) if match else ()


def cc_number(compute_capability):
    """'12.0' -> 120, FlashInfer's major * 10 + minor encoding."""
    major, minor = compute_capability.split(".")
    return int(major) * 10 + int(minor)


def _literal_assignments(tree):
    """Module-level NAME = <literal> assignments of a parsed file."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                found[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return found


def _parse(path):
    with open(path, encoding="utf-8") as handle:
        return ast.parse(handle.read(), filename=path)


def choice_lists(sglang_dir):
    """(source file, {NAME_CHOICES: [values]}) as the installed sglang declares them."""
    choices_py = os.path.join(sglang_dir, "srt", "arg_groups", "choices.py")
    if os.path.isfile(choices_py):
        spec = importlib.util.spec_from_file_location("infertune_sglang_choices", choices_py)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        source, values = choices_py, vars(module)
    else:
        source = os.path.join(sglang_dir, "srt", "server_args.py")
        values = _literal_assignments(_parse(source))
    lists = {}
    for name, value in values.items():
        if name.endswith("_CHOICES") and isinstance(value, (list, tuple, set, frozenset)):
            items = [item for item in value if isinstance(item, str)]
            lists[name] = items if isinstance(value, (list, tuple)) else sorted(items)
    return source, lists


def choice_list_name(flag):
    """'--moe-runner-backend' -> 'MOE_RUNNER_BACKEND_CHOICES', sglang's naming for a flag's choice list."""
    return flag.lstrip("-").replace("-", "_").upper() + "_CHOICES"


def check_argv_choices(argv, lists):
    """Values in argv that the installed choice lists refuse; flags without a list are not judged."""
    errors = []
    index = 0
    while index < len(argv):
        flag, eq, value = argv[index].partition("=")
        index += 1
        if not flag.startswith("--") or choice_list_name(flag) not in lists:
            continue
        if not eq:
            if index >= len(argv):
                errors.append("%s needs a value" % flag)
                break
            value = argv[index]
            index += 1
        allowed = lists[choice_list_name(flag)]
        if value not in allowed:
            errors.append("%s %s is not one of %s" % (flag, value, ", ".join(allowed)))
    return errors


def _find_def(body, path):
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == path[0]:
            return node if len(path) == 1 else _find_def(node.body, path[1:])
    return None


def _call_name(node):
    func = node.func
    return func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)


def _declaration(node, constants):
    """The @supported_compute_capability list on a definition, or None."""
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Call) and _call_name(decorator) == "supported_compute_capability" and decorator.args:
            arg = decorator.args[0]
            value = constants.get(arg.id) if isinstance(arg, ast.Name) else ast.literal_eval(arg)
            if value is not None:
                return sorted(int(cc) for cc in value)
    return None


def _dispatch(node):
    """Architectures an `if arg in ("120", ...): ... elif arg == "90": ... else: raise` chain on the first argument builds."""
    if not node.args.args:
        return None
    param = node.args.args[0].arg
    for stmt in node.body:
        found, branch = [], stmt
        while isinstance(branch, ast.If):
            test = branch.test
            if not (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name) and test.left.id == param
                    and isinstance(test.comparators[0], (ast.Constant, ast.Tuple, ast.List))):
                break
            value = ast.literal_eval(test.comparators[0])
            found.extend([value] if isinstance(value, str) else value)
            branch = branch.orelse[0] if len(branch.orelse) == 1 else None
        if found and isinstance(branch, ast.Raise):
            return sorted(int(cc) for cc in found)
    return None


def kernel_ccs(flashinfer_dir, kernel):
    """What FlashInfer says about compute capabilities for 'file.py:Qualified.name'; None when it says nothing.

    {"kind": "declared", "ccs", "enforced"}: @supported_compute_capability, enforced only where
    @backend_requirement wraps the function (on it, or on its common_check);
    {"kind": "dispatch", "ccs", "enforced": True}: an if/elif chain over architectures ending in raise;
    {"kind": "compiled", "majors", "enforced": True}: the majors a JIT module is compiled for.
    Raises LookupError when the file or the definition is absent from this FlashInfer.
    """
    relpath, sep, qualname = kernel.partition(":")
    path = os.path.join(flashinfer_dir, relpath)
    if not os.path.isfile(path):
        raise LookupError("%s is not in this FlashInfer" % relpath)
    tree = _parse(path)
    node = _find_def(tree.body, qualname.split("."))
    if node is None:
        raise LookupError("%s defines no %s" % (relpath, qualname))
    constants = _literal_assignments(tree)
    ccs = _declaration(node, constants)
    if ccs is not None:
        enforced = any(isinstance(d, ast.Call) and _call_name(d) == "backend_requirement" for d in node.decorator_list)
        return {"kind": "declared", "ccs": ccs, "enforced": enforced}
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Call) and _call_name(decorator) == "backend_requirement":
            for keyword in decorator.keywords:
                check = _find_def(tree.body, [keyword.value.id]) if keyword.arg == "common_check" \
                    and isinstance(keyword.value, ast.Name) else None
                ccs = _declaration(check, constants) if check is not None else None
                if ccs is not None:
                    return {"kind": "declared", "ccs": ccs, "enforced": True}
    ccs = _dispatch(node)
    if ccs is not None:
        return {"kind": "dispatch", "ccs": ccs, "enforced": True}
    for sub in ast.walk(node):
        if isinstance(sub, ast.keyword) and sub.arg == "supported_major_versions":
            return {"kind": "compiled", "majors": sorted(ast.literal_eval(sub.value)), "enforced": True}
    return None


def _admits(said, compute_capability):
    if said["kind"] == "compiled":
        return int(compute_capability.split(".")[0]) in said["majors"]
    return cc_number(compute_capability) in said["ccs"]


def _said(said):
    if said["kind"] == "compiled":
        return "compiles it for compute capability majors %s only" % ", ".join(str(m) for m in said["majors"])
    verb = {"declared": "declares it", "dispatch": "builds it"}[said["kind"]]
    return "%s for compute capabilities %s only" % (verb, ", ".join(str(cc) for cc in said["ccs"]))


def quantization_label(quantization):
    """sglang's --quantization, or 'bf16' for an unquantized model (no flag, bf16 or fp16 weights)."""
    return UNQUANTIZED if quantization in (None, "", "bf16", "fp16", "none") else quantization


class Installed:
    """The installed sglang and FlashInfer and the rules read from them, once per module run."""

    def __init__(self, sglang_dir, sglang_version, flashinfer_dir=None, flashinfer_version=None, quantizations=()):
        self.sglang_dir, self.sglang_version = sglang_dir, sglang_version
        self.flashinfer_dir, self.flashinfer_version = flashinfer_dir, flashinfer_version
        wanted = [q for q in quantizations if q != UNQUANTIZED]
        self.min_capability = sglang_rules.min_capabilities(sglang_dir, wanted) if sglang_dir else {}
        self.backend_quantizations = sglang_rules.backend_quantizations(sglang_dir) if sglang_dir else {}
        self.auto_rules = sglang_rules.auto_rules(sglang_dir) if sglang_dir else []
        self.runner_rules = sglang_rules.runner_rules(sglang_dir, wanted) if sglang_dir else {}

    def cite(self, where):
        return "sglang %s %s" % (self.sglang_version, where)

    def has(self, evidence):
        """Whether the installed sglang holds the text a matrix row rests on (in any of the files named)."""
        files = evidence["file"] if isinstance(evidence["file"], list) else [evidence["file"]]
        for relpath in files:
            path = os.path.join(self.sglang_dir or "", relpath)
            if os.path.isfile(path):
                with open(path, encoding="utf-8") as handle:
                    if evidence["contains"] in handle.read():
                        return True
        return False


def matching_row(matrix, key, name, compute_capability, quantization, installed):
    """First row for this backend (key 'backends') or feature (key 'feature') that applies to this release.

    A row with `evidence` applies only where the installed sglang still holds that text.
    """
    for row in matrix:
        names = row.get("backends", []) if key == "backends" else [row.get("feature")]
        if name not in names or compute_capability not in row.get("compute_capabilities", []):
            continue
        if "quantizations" in row and quantization not in row["quantizations"]:
            continue
        if "sglang_min" in row and version_key(installed.sglang_version) < version_key(row["sglang_min"]):
            continue
        if "evidence" in row and not installed.has(row["evidence"]):
            continue
        return row
    return None


def _judge_cc(backend, cc, quantization, installed, matrix, kernels):
    """{verdict, resolved_backend, fallback, reasons, sources} for one compute capability."""
    found = {"resolved_backend": backend, "fallback": None, "reasons": [], "sources": []}
    reasons, sources = found["reasons"], found["sources"]

    def verdict(value):
        return dict(found, verdict=value)

    sglang_quantization = None if quantization == UNQUANTIZED else quantization
    minimum = installed.min_capability.get(sglang_quantization, {}).get("min")
    if minimum is not None and cc_number(cc) < minimum:
        reasons.append("sglang's model loader refuses --quantization %s below compute capability %d" % (
            quantization, minimum))
        sources.append(installed.cite(installed.min_capability[sglang_quantization]["source"]))
        return verdict(UNSUPPORTED)

    resolved = backend
    if backend == "auto":
        major = int(cc.split(".")[0])
        rule = next((r for r in installed.auto_rules
                     if r["quantization"] == sglang_quantization and major in r["majors"]), None)
        row = None if rule else matching_row(matrix, "backends", "auto", cc, quantization, installed)
        if rule:
            resolved = rule["resolves_to"]
            reasons.append("'auto' resolves to %s (sglang's own rule for %s on SM%s)" % (
                resolved, quantization, "/SM".join("%d" % m for m in rule["majors"])))
            sources.append(installed.cite(rule["source"]))
        elif row is not None and "resolves_to" in row:
            resolved = row["resolves_to"]
            found["fallback"] = row.get("fallback")
            reasons.append("'auto' resolves to %s: %s" % (resolved, row["reason"]))
            sources.append(row["source"])
        else:
            reasons.append("nothing in sglang %s or the support matrix says what 'auto' picks for %s here" % (
                installed.sglang_version, quantization))
            return verdict(UNKNOWN)
        found["resolved_backend"] = resolved

    accepted = installed.backend_quantizations.get(resolved)
    if accepted and sglang_quantization not in accepted["quantizations"]:
        reasons.append("sglang asserts that %s runs only with --quantization %s" % (
            resolved, ", ".join(q or "none (bf16/fp16)" for q in accepted["quantizations"])))
        sources.append(installed.cite(accepted["source"]))
        return verdict(UNSUPPORTED)
    runners = installed.runner_rules.get(sglang_quantization)
    if runners and resolved not in runners["backends"]:
        reasons.append("sglang's %s builds a MoE runner only for %s and raises for any other backend" % (
            runners["method"], ", ".join(runners["backends"])))
        sources.append(installed.cite(runners["source"]))
        return verdict(UNSUPPORTED)

    positive = False
    row = matching_row(matrix, "backends", resolved, cc, quantization, installed)
    if row is not None:
        reasons.append(row["reason"])
        sources.append(row["source"])
        found["fallback"] = found["fallback"] or row.get("fallback")
        if row["verdict"] == UNSUPPORTED:
            return verdict(UNSUPPORTED)
        positive = True

    if kernels.get(resolved) and installed.flashinfer_dir is None:
        reasons.append("%s runs FlashInfer kernels and FlashInfer is not installed" % resolved)
        return verdict(UNSUPPORTED)
    undeclared = False
    for kernel in kernels.get(resolved, []):
        try:
            said = kernel_ccs(installed.flashinfer_dir, kernel)
        except LookupError as exc:
            reasons.append(str(exc))
            continue
        if said is None:
            continue
        where = "flashinfer-python %s flashinfer/%s" % (installed.flashinfer_version, kernel)
        if _admits(said, cc):
            if said["kind"] != "compiled":  # a compile target list is no statement that the kernel runs
                positive = True
                reasons.append("FlashInfer %s this compute capability (%s)" % (
                    {"declared": "declares", "dispatch": "builds"}[said["kind"]], kernel))
                sources.append(where)
            continue
        sources.append(where)
        if said["enforced"]:
            reasons.append("FlashInfer %s (%s)" % (_said(said), kernel))
            return verdict(UNSUPPORTED)
        undeclared = True
        reasons.append("FlashInfer %s (%s), a declaration nothing enforces (no @backend_requirement)" % (
            _said(said), kernel))
    if undeclared:
        return verdict(UNDECLARED)
    if positive:
        return verdict(SUPPORTED)
    reasons.append("no rule in sglang %s, FlashInfer or the support matrix covers %s with %s here" % (
        installed.sglang_version, resolved, quantization))
    return verdict(UNKNOWN)


def _gpu_list(gpus):
    return ", ".join(str(gpu["index"]) for gpu in gpus)


def assess(backend, quantization, gpus, installed, accepted_backends, matrix, kernels, allreduce_fusion=False):
    """Verdict for the backend on these GPUs: {verdict, findings: [per compute capability], sources, reasons}."""
    quantization = quantization_label(quantization)
    if installed.sglang_version is None:
        return {"verdict": UNKNOWN, "findings": [], "sources": [],
                "reasons": ["sglang is not installed, so neither its choices nor its version can be read"]}
    if accepted_backends is not None and backend not in accepted_backends:
        return {"verdict": UNSUPPORTED, "findings": [], "sources": [], "reasons": [
            "sglang %s does not accept --moe-runner-backend %s (it accepts: %s)"
            % (installed.sglang_version, backend, ", ".join(accepted_backends))]}

    findings, sources = [], []
    for cc in sorted({gpu["compute_capability"] for gpu in gpus}, key=version_key):
        on_cc = [gpu for gpu in gpus if gpu["compute_capability"] == cc]
        finding = _judge_cc(backend, cc, quantization, installed, matrix, kernels)
        if allreduce_fusion:
            row = matching_row(matrix, "feature", "flashinfer_allreduce_fusion", cc, quantization, installed)
            if row is not None and row["verdict"] == UNSUPPORTED:
                finding["verdict"] = UNSUPPORTED
                finding["reasons"].append("FlashInfer all-reduce fusion: %s" % row["reason"])
                finding["sources"].append(row["source"])
        finding.update(gpus=_gpu_list(on_cc), gpu_name=on_cc[0]["name"], compute_capability=cc,
                       quantization=quantization)
        findings.append(finding)
        sources.extend(source for source in finding.pop("sources") if source not in sources)

    verdicts = [finding["verdict"] for finding in findings] or [UNKNOWN]
    overall = min(verdicts, key=SEVERITY.index)
    return {"verdict": overall, "findings": findings, "sources": sources,
            "reasons": ["GPUs %s (%s, compute capability %s): %s%s%s: %s" % (
                f["gpus"], f["gpu_name"], f["compute_capability"], f["verdict"],
                "" if f["resolved_backend"] == backend else ", runs %s" % f["resolved_backend"],
                ", through the fallback %s" % f["fallback"] if f["fallback"] else "",
                "; ".join(f["reasons"])) for f in findings]}


class ReadError(Exception):
    """The installed sglang or FlashInfer cannot be read; the message says which and why."""


def check_argv(run, venv, argv, lists, sglang_dir):
    """The server command line judged by the installed sglang's own parser, else its choice lists."""
    python = os.path.join(venv, "bin", "python3")
    if sglang_dir is None:
        parser_error = "sglang is not installed in %s" % venv
    elif not os.path.exists(python):
        parser_error = "%s does not exist" % python
    else:
        rc, out, err = run([python, "-c", PARSER_PROBE, json.dumps(argv)])
        try:
            probe = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            probe = {"imported": False, "error": "parser probe failed (rc %d): %s" % (rc, err.strip())}
        if probe["imported"]:
            return {"method": "parser", "ok": probe["ok"], "errors": [] if probe["ok"] else [probe["error"]]}
        parser_error = "sglang does not import: %s" % probe["error"]
    if lists is None:
        return {"method": "none", "ok": False, "errors": [parser_error], "parser_error": parser_error}
    errors = check_argv_choices(argv, lists)
    return {"method": "choices", "ok": not errors, "errors": errors, "parser_error": parser_error}


def judge_host(run, host, venv="/opt/sglang/venv", backend=None, quantization=None, gpus=(), matrix=(),
               kernels=None, allreduce_fusion=False, argv=None):
    """What moe_backend_support returns: the installed versions; the choices and the verdict
    with its findings and reason when backend is given; the command line check when argv is."""
    sites = site_dirs(venv)
    sglang_version = dist_version(sites, "sglang")
    sglang_dir = package_dir(sites, "sglang") if sglang_version else None
    flashinfer_version = dist_version(sites, "flashinfer-python")
    flashinfer_dir = package_dir(sites, "flashinfer") if flashinfer_version else None
    result = dict(sglang_version=sglang_version, flashinfer_version=flashinfer_version,
                  moe_runner_backends=None, verdict=None, findings=[], sources=[])
    lists = None
    # The versions alone are cheap; the choice lists and the rules are read when judged.
    if sglang_dir is not None and (backend or argv is not None):
        try:
            result["choices_source"], lists = choice_lists(sglang_dir)
        except (OSError, SyntaxError, ImportError) as exc:
            raise ReadError("host %s: cannot read the choice lists of sglang %s: %s" % (host, sglang_version, exc))
        result["moe_runner_backends"] = lists.get("MOE_RUNNER_BACKEND_CHOICES")
    if backend:
        try:
            installed = Installed(sglang_dir, sglang_version, flashinfer_dir, flashinfer_version,
                                  [quantization_label(quantization)])
        except (OSError, SyntaxError, ValueError) as exc:
            raise ReadError("host %s: cannot read the rules of sglang %s: %s" % (host, sglang_version, exc))
        judged = assess(backend, quantization, list(gpus), installed, result["moe_runner_backends"], list(matrix),
                        kernels or {}, allreduce_fusion)
        result.update(verdict=judged["verdict"], findings=judged["findings"], sources=judged["sources"])
        result["reason"] = "host %s: MoE runner backend %s is %s with sglang %s and flashinfer %s. %s" % (
            host, backend, judged["verdict"], sglang_version or "not installed",
            flashinfer_version or "not installed", " ".join(judged["reasons"]))
    if argv is not None:
        result["argv_check"] = check_argv(run, venv, argv, lists, sglang_dir)
    return result
