"""Rules the installed sglang states in its own source, read with ast (never imported: it needs torch).

Four kinds, each returned with the file and line it was read from:
- the compute-capability majors behind sglang's platform predicates (`is_sm100_supported = ...
  partial(_check_cuda_device_version, device_capability_majors=[10], ...)` in srt/utils/common.py);
- each quantization method's minimum capability (`get_min_capability()` of the class that
  srt/layers/quantization/__init__.py registers; the model loader raises below it);
- the quantizations each MoE runner backend accepts (the `assert ...quantization in [...]` under
  `if ...moe_runner_backend == "X":`);
- the `auto` resolutions that depend only on quantization and architecture
  (`if ...moe_runner_backend == "auto" and ...quantization == "Q" and is_sm120_supported(): ... = "B"`).
- the backends a quantization's MoE method builds a runner for, where its `create_moe_runner`
  ends in `if backend.is_x() ...: elif ...: else: raise` (any backend it never names raises).
Rules written in any other shape (model-specific resolutions, runtime checks) are not guessed
here: the support matrix carries them, each row with its source.
"""

import ast
import os

PREDICATES_FILE = "srt/utils/common.py"
QUANTIZATION_INIT = "srt/layers/quantization/__init__.py"
MOE_UTILS = "srt/layers/moe/utils.py"  # the MoeRunnerBackend enum
# Where releases keep the server-argument resolution: 0.5.9-0.5.19 in server_args.py, later in arg_groups.
RESOLUTION_FILES = ("srt/server_args.py", "srt/arg_groups/moe_hook.py", "srt/arg_groups/overrides.py")


def _parse(sglang_dir, relpath):
    path = os.path.join(sglang_dir, relpath)
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as handle:
        return ast.parse(handle.read(), filename=path)


def _where(relpath, node):
    return "sglang/%s:%d" % (relpath, node.lineno)


def arch_predicates(sglang_dir):
    """{predicate name: [compute capability majors]}, e.g. {'is_sm100_supported': [10]}."""
    tree = _parse(sglang_dir, PREDICATES_FILE)
    found = {}
    for node in tree.body if tree else []:
        if not isinstance(node, ast.Assign):
            continue
        for sub in ast.walk(node.value):
            if isinstance(sub, ast.keyword) and sub.arg == "device_capability_majors":
                majors = ast.literal_eval(sub.value)
                for target in node.targets:
                    # `is_blackwell_supported = is_blackwell = ...` assigns through a chain of names.
                    for name in ast.walk(target):
                        if isinstance(name, ast.Name):
                            found[name.id] = list(majors)
    return found


def _quantization_classes(tree):
    """{quantization name: class name}, first registration wins (the CUDA one precedes NPU overrides)."""
    classes = {}

    def take(mapping):
        for key, value in zip(mapping.keys, mapping.values):
            if isinstance(key, ast.Constant) and isinstance(value, ast.Name):
                classes.setdefault(key.value, value.id)

    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Dict):
            take(node.value)
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "update" and node.args \
                and isinstance(node.args[0], ast.Dict):
            take(node.args[0])
    return classes


def _class_modules(tree):
    """{class name: module path relative to the sglang package} from the file's `from ... import` lines."""
    modules = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sglang."):
            relpath = node.module[len("sglang."):].replace(".", "/") + ".py"
            for alias in node.names:
                modules[alias.asname or alias.name] = relpath
    return modules


def _min_capability(tree, class_name, quantization, seen=()):
    """Evaluate the last return of Class.get_min_capability() for CUDA; None when it is not a literal rule."""
    for cls in tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name == class_name):
            continue
        for method in cls.body:
            if isinstance(method, ast.FunctionDef) and method.name == "get_min_capability":
                # Earlier returns serve NPU/MUSA/HIP; the final one is the CUDA rule.
                returns = [stmt for stmt in method.body if isinstance(stmt, ast.Return)]
                return _evaluate(tree, returns[-1].value, quantization, seen + (class_name,)) if returns else None
    return None


def _evaluate(tree, value, quantization, seen):
    if isinstance(value, ast.Constant) and isinstance(value.value, int):
        return value.value
    if isinstance(value, ast.IfExp) and isinstance(value.test, ast.Attribute) \
            and value.test.attr.startswith("use_"):
        # Fp8Config: `100 if self.use_mxfp8 else 80`, the flag being the quantization's own name.
        taken = value.body if value.test.attr == "use_" + quantization else value.orelse
        return _evaluate(tree, taken, quantization, seen)
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) \
            and value.func.attr == "get_min_capability" and isinstance(value.func.value, ast.Name) \
            and value.func.value.id not in seen:
        return _min_capability(tree, value.func.value.id, quantization, seen)
    return None


def min_capabilities(sglang_dir, quantizations):
    """{quantization: {"min": int or None, "source": "sglang/file.py:Class.get_min_capability"}}."""
    init = _parse(sglang_dir, QUANTIZATION_INIT)
    if init is None:
        return {}
    classes, modules = _quantization_classes(init), _class_modules(init)
    found = {}
    for quantization in quantizations:
        class_name = classes.get(quantization)
        relpath = modules.get(class_name)
        tree = _parse(sglang_dir, relpath) if relpath else None
        if tree is not None:
            found[quantization] = {"min": _min_capability(tree, class_name, quantization),
                                   "source": "sglang/%s:%s.get_min_capability" % (relpath, class_name)}
    return found


def _field(node):
    """'quantization' for self.quantization / view.quantization / quantization, else None."""
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _compared(test, field):
    """Literal values `<field> == "x"` or `<field> in [...]` compares against; None for any other test."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and _field(test.left) == field):
        return None
    try:
        value = ast.literal_eval(test.comparators[0])
    except ValueError:
        return None
    if isinstance(test.ops[0], ast.Eq):
        return [value]
    if isinstance(test.ops[0], ast.In) and isinstance(value, (list, tuple, set)):
        return list(value)
    return None


def backend_quantizations(sglang_dir):
    """{backend: {"quantizations": [...], None for bf16/fp16], "source": file:line}} from sglang's asserts."""
    found = {}
    for relpath in RESOLUTION_FILES:
        tree = _parse(sglang_dir, relpath)
        for node in ast.walk(tree) if tree else []:
            backends = _compared(node.test, "moe_runner_backend") if isinstance(node, ast.If) else None
            for stmt in node.body if backends else []:
                test = stmt.test if isinstance(stmt, ast.Assert) else None
                # 0.5.23 adds `or <model-specific condition>` after the list.
                if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
                    test = test.values[0]
                allowed = _compared(test, "quantization") if test is not None else None
                if allowed is not None:
                    for backend in backends:
                        found.setdefault(backend, {"quantizations": allowed, "source": _where(relpath, stmt)})
    return found


def _arch(test, predicates):
    """Majors an architecture test admits (`is_sm120_supported()`, `get_platform().is_sm120`, or-ed); None otherwise."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        parts = [_arch(value, predicates) for value in test.values]
        return None if None in parts else sorted({major for part in parts for major in part})
    name = None
    if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and not test.args:
        name = test.func.id
    elif isinstance(test, ast.Attribute) and test.attr.startswith("is_sm"):
        name = test.attr + "_supported"
    return predicates.get(name)


def auto_rules(sglang_dir):
    """[{quantization, majors, resolves_to, source}]: `auto` resolutions keyed on quantization and architecture only."""
    predicates = arch_predicates(sglang_dir)
    rules = []
    for relpath in RESOLUTION_FILES:
        tree = _parse(sglang_dir, relpath)
        for node in ast.walk(tree) if tree else []:
            if not (isinstance(node, ast.If) and isinstance(node.test, ast.BoolOp) and isinstance(node.test.op, ast.And)):
                continue
            rule = {}
            for part in node.test.values:
                if _compared(part, "moe_runner_backend") == ["auto"]:
                    rule["auto"] = True
                elif _compared(part, "quantization") and len(_compared(part, "quantization")) == 1:
                    rule["quantization"] = _compared(part, "quantization")[0]
                elif _arch(part, predicates) is not None:
                    rule["majors"] = _arch(part, predicates)
                else:
                    rule = None  # another condition (model, a2a backend): not a rule of this shape
                    break
            if not rule or set(rule) != {"auto", "quantization", "majors"}:
                continue
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and _field(stmt.targets[0]) == "moe_runner_backend" \
                        and isinstance(stmt.value, ast.Constant):
                    rules.append({"quantization": rule["quantization"], "majors": rule["majors"],
                                  "resolves_to": stmt.value.value, "source": _where(relpath, node)})
    return rules


def backend_values(sglang_dir):
    """{predicate: --moe-runner-backend value} from the MoeRunnerBackend enum (`is_triton_kernels` for
    TRITON_KERNELS = "triton_kernel"); empty when the release keeps no such enum there."""
    tree = _parse(sglang_dir, MOE_UTILS)
    found = {}
    for cls in tree.body if tree else []:
        if isinstance(cls, ast.ClassDef) and cls.name == "MoeRunnerBackend":
            for stmt in cls.body:
                if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) \
                        and isinstance(stmt.value.value, str):
                    found.update({"is_" + t.id.lower(): stmt.value.value for t in stmt.targets
                                  if isinstance(t, ast.Name)})
    return found


def _predicates(node, values):
    """Backends the `<backend>.is_x()` calls under node name, through the enum (else `is_x` names x)."""
    return {values.get(sub.func.attr, sub.func.attr[3:]) for sub in ast.walk(node)
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute)
            and sub.func.attr.startswith("is_") and not sub.args}


def _raising_chain(method):
    """The raise that ends create_moe_runner's last if/elif chain, or None when the chain ends otherwise or an
    earlier `return` can leave without a backend test (then other backends may escape the raise)."""
    chains = [stmt for stmt in method.body if isinstance(stmt, ast.If)]
    if not chains or chains[-1] is not method.body[-1]:
        return None
    for stmt in chains[:-1]:
        returns = any(isinstance(sub, ast.Return) for sub in ast.walk(stmt))
        if returns and not _predicates(stmt.test, {}):
            return None
    branch = chains[-1]
    while len(branch.orelse) == 1 and isinstance(branch.orelse[0], ast.If):
        branch = branch.orelse[0]
    if len(branch.orelse) == 1 and isinstance(branch.orelse[0], ast.Raise):
        return branch.orelse[0]
    return None


def runner_rules(sglang_dir, quantizations):
    """{quantization: {"backends": [...], "method", "source"}}: the backends the quantization's MoE method
    (the class named like its config, Mxfp4Config -> Mxfp4MoEMethod) may build a runner for, where every
    other backend reaches a raise."""
    init = _parse(sglang_dir, QUANTIZATION_INIT)
    if init is None:
        return {}
    classes, modules, values = _quantization_classes(init), _class_modules(init), backend_values(sglang_dir)
    found = {}
    for quantization in quantizations:
        config = classes.get(quantization) or ""
        relpath = modules.get(config)
        tree = _parse(sglang_dir, relpath) if relpath and config.endswith("Config") else None
        wanted = config[:-len("Config")] + "MoEMethod"
        for cls in tree.body if tree else []:
            if not (isinstance(cls, ast.ClassDef) and cls.name == wanted):
                continue
            for method in cls.body:
                raised = _raising_chain(method) if isinstance(method, ast.FunctionDef) \
                    and method.name == "create_moe_runner" else None
                if raised is not None:
                    backends = _predicates(method, values) - {"auto"}
                    found[quantization] = {"backends": sorted(backends), "method": wanted,
                                           "source": _where(relpath, raised)}
    return found
