"""Judge an sglang MoE runner backend against the host's GPUs, from the installed sources alone.

Nothing here imports sglang, FlashInfer or torch: versions come from dist-info
directory names, choice lists from sglang's own files (choices.py is importable
by path with no dependencies since 0.5.20; older releases keep literal lists in
server_args.py, read with ast), and FlashInfer's declared compute capabilities
from the `@supported_compute_capability([...])` decorators in its sources.
"""

import ast
import glob
import importlib.util
import os
import re

SUPPORTED, UNSUPPORTED, UNKNOWN = "supported", "unsupported", "unknown"

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
            name, _, version = os.path.basename(info)[: -len(".dist-info")].rpartition("-")
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


def declared_ccs(flashinfer_dir, kernel):
    """Compute capabilities FlashInfer declares for 'file.py:Qualified.name'; None when it declares none.

    Raises LookupError when the file or the definition is absent from this FlashInfer.
    """
    relpath, _, qualname = kernel.partition(":")
    path = os.path.join(flashinfer_dir, relpath)
    if not os.path.isfile(path):
        raise LookupError("%s is not in this FlashInfer" % relpath)
    tree = _parse(path)
    node = _find_def(tree.body, qualname.split("."))
    if node is None:
        raise LookupError("%s defines no %s" % (relpath, qualname))
    constants = _literal_assignments(tree)
    for decorator in node.decorator_list:
        if isinstance(decorator, ast.Call) and _call_name(decorator) == "supported_compute_capability" and decorator.args:
            arg = decorator.args[0]
            value = constants.get(arg.id) if isinstance(arg, ast.Name) else ast.literal_eval(arg)
            if value is not None:
                return sorted(int(cc) for cc in value)
    return None


def matching_row(matrix, key, name, compute_capability, quantization, sglang_version):
    """First row for this backend (key='backend') or feature (key='feature') that covers the situation."""
    for row in matrix:
        if row.get(key) != name or compute_capability not in row.get("compute_capabilities", []):
            continue
        if row.get("quantization") not in (None, quantization):
            continue
        if "sglang_min" in row and version_key(sglang_version) < version_key(row["sglang_min"]):
            continue
        return row
    return None


def _judge_cc(backend, cc, quantization, sglang_version, flashinfer_dir, matrix, kernels):
    """(verdict, reasons, sources) for one compute capability."""
    reasons, sources = [], []
    resolved = backend
    if backend == "auto":
        row = matching_row(matrix, "backend", "auto", cc, quantization, sglang_version)
        if row is None or "resolves_to" not in row:
            return UNKNOWN, ["no support-matrix row says what 'auto' picks here"], sources
        resolved = row["resolves_to"]
        reasons.append("'auto' resolves to %s (%s)" % (resolved, row["reason"]))
        sources.append(row["source"])

    declared_yes = False
    if flashinfer_dir is None and kernels.get(resolved):
        reasons.append("FlashInfer is not installed, so its declarations for %s cannot be read" % resolved)
    for kernel in kernels.get(resolved, []) if flashinfer_dir else []:
        try:
            ccs = declared_ccs(flashinfer_dir, kernel)
        except LookupError as exc:
            reasons.append(str(exc))
            continue
        if ccs is None:
            continue
        if cc_number(cc) not in ccs:
            reasons.append("FlashInfer declares %s for compute capabilities %s only" % (
                kernel, ", ".join(str(c) for c in ccs)))
            return UNSUPPORTED, reasons, sources + ["flashinfer/" + kernel]
        declared_yes = True
        sources.append("flashinfer/" + kernel)

    row = matching_row(matrix, "backend", resolved, cc, quantization, sglang_version)
    if row is not None:
        reasons.append(row["reason"])
        return row["verdict"], reasons, sources + [row["source"]]
    if declared_yes:
        reasons.append("FlashInfer declares %s's kernels for this compute capability" % resolved)
        return SUPPORTED, reasons, sources
    reasons.append("no support-matrix row or FlashInfer declaration covers %s here" % resolved)
    return UNKNOWN, reasons, sources


def _gpu_list(gpus):
    return ", ".join(str(gpu["index"]) for gpu in gpus)


def assess(backend, quantization, gpus, sglang_version, accepted_backends, flashinfer_dir, matrix, kernels,
           allreduce_fusion=False):
    """Verdict for the backend on these GPUs: {verdict, findings: [{gpus, compute_capability, verdict, reasons}], sources}."""
    if sglang_version is None:
        return {"verdict": UNKNOWN, "findings": [], "sources": [],
                "reasons": ["sglang is not installed, so neither its choices nor its version can be read"]}
    if accepted_backends is not None and backend not in accepted_backends:
        return {"verdict": UNSUPPORTED, "findings": [], "sources": [], "reasons": [
            "sglang %s does not accept --moe-runner-backend %s (it accepts: %s)"
            % (sglang_version, backend, ", ".join(accepted_backends))]}

    findings, sources = [], []
    for cc in sorted({gpu["compute_capability"] for gpu in gpus}):
        on_cc = [gpu for gpu in gpus if gpu["compute_capability"] == cc]
        verdict, reasons, cc_sources = _judge_cc(
            backend, cc, quantization, sglang_version, flashinfer_dir, matrix, kernels)
        if allreduce_fusion:
            row = matching_row(matrix, "feature", "flashinfer_allreduce_fusion", cc, quantization, sglang_version)
            if row is not None and row["verdict"] == UNSUPPORTED:
                verdict = UNSUPPORTED
                reasons.append("FlashInfer all-reduce fusion: %s" % row["reason"])
                cc_sources.append(row["source"])
        findings.append({"gpus": _gpu_list(on_cc), "gpu_name": on_cc[0]["name"], "compute_capability": cc,
                         "verdict": verdict, "reasons": reasons})
        sources.extend(source for source in cc_sources if source not in sources)

    verdicts = {finding["verdict"] for finding in findings}
    overall = UNSUPPORTED if UNSUPPORTED in verdicts else UNKNOWN if UNKNOWN in verdicts or not findings else SUPPORTED
    return {"verdict": overall, "findings": findings, "sources": sources,
            "reasons": ["GPUs %s (%s, compute capability %s): %s: %s" % (
                f["gpus"], f["gpu_name"], f["compute_capability"], f["verdict"], "; ".join(f["reasons"]))
                for f in findings]}
