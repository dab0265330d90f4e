"""What a Kubernetes API server does with a custom resource on create, offline, given the CRD.

The order is the API server's (k8s.io/apiextensions-apiserver, customresource handler):
  1. ObjectMeta: metadata.name or metadata.generateName (a DNS-1123 subdomain, or a prefix of one).
  2. Non-nullable nulls pruned, then the schema's `default:` values applied (structural defaulting,
     pkg/apiserver/schema/defaulting), so a field the CRD both requires and defaults may be omitted.
  3. The openAPIV3Schema (as JSON Schema, see openapi_to_jsonschema) on the defaulted object, closed
     wherever the server would prune: what `kubectl apply` (strict field validation) calls an unknown
     field is an error here.
  4. The CRD's own CEL rules (`x-kubernetes-validations`), read from the CRD and evaluated with a CEL
     library (common-expression-language); each failing rule's `message` is the error. Transition rules
     (those that read `oldSelf`) only run on update, so on a create they are skipped and reported.

Nothing here knows KubeRay: CrdSchema(crd).admit(doc) works for any CRD; validate/kuberay.py adds the
operator's own rules on top of the defaulted object admit() returns.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from rlaunch.errors import CheckError

# OpenAPI keys that JSON Schema does not need (or that the steps above check some other way).
_DROP = {
    "description", "default", "format", "example", "nullable", "x-kubernetes-validations",
    "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
    "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
}
# The ObjectMeta fields a client may set on create; step 1 checks name/generateName themselves.
OBJECT_META = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string"},
        "generateName": {"type": "string"},
        "namespace": {"type": "string"},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "annotations": {"type": "object", "additionalProperties": {"type": "string"}},
        "finalizers": {"type": "array", "items": {"type": "string"}},
    },
}
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
# apiserver's names.SimpleNameGenerator: generateName[:58] + 5 random characters of this alphabet.
GENERATED_SUFFIX_LEN, MAX_GENERATE_NAME_PREFIX = 5, 58
GENERATED_SUFFIX_STAND_IN = "x" * GENERATED_SUFFIX_LEN


def where(path: Iterable[object]) -> str:
    """A JSON path as Kubernetes prints it: spec.workerGroupSpecs[0].maxReplicas."""
    parts = []
    for part in path:
        if isinstance(part, int):
            parts.append(f"[{part}]")
        else:
            parts.append(("." if parts else "") + str(part))
    return "".join(parts) or "(top level)"


# ---------------------------------------------------------------- 1. ObjectMeta


def effective_name(meta: dict[str, Any]) -> str:
    """metadata.name, or the name the server would generate (a stand-in for its random suffix)."""
    if meta.get("name"):
        return str(meta["name"])
    prefix = str(meta.get("generateName") or "")
    return prefix[:MAX_GENERATE_NAME_PREFIX] + GENERATED_SUFFIX_STAND_IN if prefix else ""


def object_meta_problems(meta: dict[str, Any]) -> list[str]:
    """apimachinery's ValidateObjectMeta for a create, with NameIsDNSSubdomain (custom resources)."""
    name, prefix = meta.get("name"), meta.get("generateName")
    if not name and not prefix:
        return ["metadata.name: Required value: name or generateName is required"]
    out = []
    if name and (len(str(name)) > 253 or not DNS1123_SUBDOMAIN.match(str(name))):
        out.append(f"metadata.name: '{name}' is not a DNS-1123 subdomain (at most 253 lower-case letters, "
                   "digits, '-' and '.', starting and ending with a letter or digit)")
    # A prefix is checked with its trailing '-' masked, as the server's NameIsDNSSubdomain(prefix=true).
    if prefix and not DNS1123_SUBDOMAIN.match(re.sub(r"-$", "a", str(prefix))):
        out.append(f"metadata.generateName: '{prefix}' is not the prefix of a DNS-1123 subdomain")
    return out


# ---------------------------------------------------------------- 2. defaults


@dataclass(frozen=True)
class Default:
    path: str
    value: object
    required: bool  # the CRD also lists the field as required: omitting it is valid only thanks to this

    def __str__(self) -> str:
        text = json.dumps(self.value, separators=(",", ":"))
        return f"{self.path}={text if len(text) <= 40 else text[:37] + '...'}"


def apply_defaults(value: Any, schema: dict[str, Any], path: tuple[Any, ...] = (),
                   applied: list[Default] | None = None) -> list[Default]:
    """Default in place like the API server: a missing field, or a null one that is not nullable, gets
    the schema's default; a non-nullable null without one is pruned. Then recurse into what is there.
    (apiextensions-apiserver pkg/apiserver/schema/defaulting: PruneNonNullableNullsWithoutDefaults, Default.)"""
    applied = [] if applied is None else applied
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        required = set(schema.get("required") or ())
        for key, prop in props.items():
            if key in value and value[key] is None and not prop.get("nullable") and "default" not in prop:
                del value[key]
            elif "default" in prop and (key not in value or (value[key] is None and not prop.get("nullable"))):
                value[key] = copy.deepcopy(prop["default"])
                applied.append(Default(where((*path, key)), prop["default"], key in required))
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            if key in props:
                apply_defaults(sub, props[key], (*path, key), applied)
            elif isinstance(extra, dict):
                apply_defaults(sub, extra, (*path, key), applied)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            apply_defaults(item, schema["items"], (*path, i), applied)
    return applied


# ---------------------------------------------------------------- 3. schema


def openapi_to_jsonschema(node: dict[str, Any]) -> dict[str, Any]:
    """One CRD openAPIV3Schema node as JSON Schema, closed wherever the API server would prune:
    `x-kubernetes-int-or-string` -> integer or string, `nullable` -> also null, and
    `additionalProperties: false` on every object that does not preserve unknown fields."""
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROP:
            continue
        if key == "properties":
            out[key] = {name: openapi_to_jsonschema(sub) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not") and isinstance(value, dict):
            out[key] = openapi_to_jsonschema(value)
        elif key in ("anyOf", "allOf", "oneOf"):
            out[key] = [openapi_to_jsonschema(sub) for sub in value]
        else:
            out[key] = copy.deepcopy(value)
    if node.get("x-kubernetes-int-or-string"):
        # The CRD spells it as anyOf integer/string plus the flag; one type list says the same.
        out.pop("anyOf", None)
        out["type"] = ["integer", "string"]
    if node.get("nullable") and "type" in out:
        kinds = out["type"] if isinstance(out["type"], list) else [out["type"]]
        out["type"] = [*kinds, "null"]
    kinds = out["type"] if isinstance(out.get("type"), list) else [out.get("type")]
    if "object" in kinds and not node.get("x-kubernetes-preserve-unknown-fields") \
            and "additionalProperties" not in out:
        out["additionalProperties"] = False  # strict field validation: unknown fields are errors
    return out


def schema_problem(schema: dict[str, Any], doc: dict[str, Any], validator: Any = None) -> str | None:
    """The most relevant violation as 'path: message', or None."""
    import jsonschema

    validator = validator or jsonschema.Draft202012Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(doc))
    return None if error is None else f"{where(error.absolute_path)}: {error.message}"


# ---------------------------------------------------------------- 4. CEL rules


@dataclass
class CelReport:
    evaluated: int = 0
    skipped: list[str] = field(default_factory=list)   # "path: `rule` (why)"
    failures: list[str] = field(default_factory=list)  # "path: message"
    reached: set[int] = field(default_factory=set)     # the rules (by id) at a node the object has


@lru_cache(maxsize=None)
def _compiled(rule: str) -> tuple[Any, str | None]:
    """(program, None) or (None, why the library cannot run it)."""
    import cel

    try:
        return cel.compile(rule), None
    except Exception as err:  # noqa: BLE001 - the library raises ValueError and RuntimeError alike
        return None, f"does not compile offline: {str(err).splitlines()[0]}"


_UNDEFINED = re.compile(r"Undefined variable or function: '([^']+)'")


class _NotOffline(Exception):
    """A rule the CEL library cannot compile."""


def _evaluate(text: str, self_value: Any, old: Any) -> Any:
    program, why = _compiled(text)
    if program is None:
        raise _NotOffline(why)
    context = {"self": self_value}
    if old is not None:
        context["oldSelf"] = old
    return program.execute(context)


def check_rules(schema: dict[str, Any], value: Any, path: tuple[Any, ...], report: CelReport,
                root: bool = True) -> CelReport:
    """Evaluate every x-kubernetes-validations rule at every node the object has, outermost first."""
    if value is None:
        return report  # the server validates no rule on an absent or null value
    for rule in schema.get("x-kubernetes-validations") or ():
        report.reached.add(id(rule))
        _check_rule(rule, _cel_self(value, root), path, report)
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            node = props[key] if key in props else extra
            if isinstance(node, dict) and not (root and key == "metadata"):
                check_rules(node, sub, (*path, key), report, root=False)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            check_rules(schema["items"], item, (*path, i), report, root=False)
    return report


def _cel_self(value: Any, root: bool) -> Any:
    # At the top level CEL sees only metadata.name and metadata.generateName of ObjectMeta.
    if root and isinstance(value, dict) and isinstance(value.get("metadata"), dict):
        meta = {k: v for k, v in value["metadata"].items() if k in ("name", "generateName")}
        return {**value, "metadata": meta}
    return value


def _check_rule(rule: dict[str, Any], self_value: Any, path: tuple[Any, ...], report: CelReport) -> None:
    import cel

    text, at = rule["rule"], where(path)
    program, _ = _compiled(text)
    old = None
    if program is not None and "oldSelf" in program.variables():
        if not rule.get("optionalOldSelf"):
            report.skipped.append(f"{at}: `{text}` (transition rule: reads oldSelf, checked on update only)")
            return
        old = cel.OptionalValue.none()  # optionalOldSelf: on create, oldSelf is an empty optional
    try:
        result = _evaluate(text, self_value, old)
    except _NotOffline as err:
        report.skipped.append(f"{at}: `{text}` ({err})")
        return
    except Exception as err:  # noqa: BLE001 - a runtime error (no such key, bad type) fails the rule
        reason = f"no such key: {err}" if isinstance(err, KeyError) else str(err).splitlines()[0]
        missing = _UNDEFINED.search(reason)
        if missing:  # a Kubernetes CEL library function this CEL library does not have
            report.skipped.append(f"{at}: `{text}` (calls {missing.group(1)}(), not in the offline CEL library)")
            return
        report.evaluated += 1
        report.failures.append(f"{_field(at, rule)}: {_message(rule, self_value)} (the rule could not be "
                               f"evaluated: {reason})")
        return
    report.evaluated += 1
    if result is not True:
        suffix = "" if result is False else f" (the rule gave {result!r}, not a boolean)"
        report.failures.append(f"{_field(at, rule)}: {_message(rule, self_value)}{suffix}")


def _field(at: str, rule: dict[str, Any]) -> str:
    extra = str(rule.get("fieldPath") or "")
    return at + extra if at != "(top level)" else (extra.lstrip(".") or at)


def _message(rule: dict[str, Any], self_value: Any) -> str:
    if rule.get("messageExpression"):
        try:
            text = _evaluate(rule["messageExpression"], self_value, None)
        except Exception:  # noqa: BLE001 - the server falls back to message, as here
            text = None
        if isinstance(text, str) and text.strip():
            return text
    return str(rule.get("message") or f"failed rule: {rule['rule']}")


def count_rules(schema: object) -> int:
    if isinstance(schema, dict):
        return len(schema.get("x-kubernetes-validations") or ()) + sum(count_rules(v) for v in schema.values())
    if isinstance(schema, list):
        return sum(count_rules(v) for v in schema)
    return 0


# ---------------------------------------------------------------- all four


@dataclass
class Admission:
    """What the server would store (defaults applied), and what it did to get there."""

    doc: dict[str, Any]
    defaults: list[Default]
    cel: CelReport
    rules_in_crd: int

    def summary(self) -> str:
        required = [str(d) for d in self.defaults if d.required]
        parts = [f"{len(self.defaults)} defaults applied"]
        if required:
            parts.append("required and defaulted: " + ", ".join(required))
        skipped = f", {len(self.cel.skipped)} skipped: " + "; ".join(self.cel.skipped) if self.cel.skipped else \
            ", 0 skipped"
        unset = self.rules_in_crd - len(self.cel.reached)
        parts.append(f"CEL rules: {self.cel.evaluated} evaluated{skipped}"
                     + (f"; {unset} of the CRD's {self.rules_in_crd} guard fields this object leaves unset" if unset else ""))
        return "; ".join(parts)


class CrdSchema:
    """One served version of a CRD, ready to admit objects: CrdSchema(crd).admit(doc, 'where')."""

    def __init__(self, crd: dict[str, Any], version: str = "v1", label: str = "", check: str = "crd-schema"):
        group, self.kind = crd["spec"]["group"], crd["spec"]["names"]["kind"]
        served = {v["name"]: v for v in crd["spec"]["versions"] if v.get("served")}
        if version not in served:
            raise CheckError(check, f"{self.kind} CRD does not serve {version} (serves {', '.join(served)})")
        self.api_version, self.check, self.label = f"{group}/{version}", check, label or f"{self.kind} CRD"
        self.openapi = served[version]["schema"]["openAPIV3Schema"]
        schema = openapi_to_jsonschema(self.openapi)
        schema["properties"]["apiVersion"] = {"const": self.api_version}
        schema["properties"]["kind"] = {"const": self.kind}
        schema["properties"]["metadata"] = OBJECT_META
        schema["required"] = sorted({*schema.get("required", []), "apiVersion", "kind", "metadata"})
        self.jsonschema = schema
        self.rules = count_rules(self.openapi)
        self._validator = None

    def _problem(self, doc: dict[str, Any]) -> str | None:
        if self._validator is None:
            import jsonschema

            self._validator = jsonschema.Draft202012Validator(self.jsonschema)
        return schema_problem(self.jsonschema, doc, self._validator)

    def defaulted(self, doc: dict[str, Any]) -> tuple[dict[str, Any], list[Default]]:
        """A copy with the schema's defaults applied (metadata is the server's own, never defaulted
        from the CRD), and which ones; no check."""
        stored = copy.deepcopy(doc)
        body = {k: v for k, v in self.openapi.get("properties", {}).items() if k != "metadata"}
        return stored, apply_defaults(stored, {**self.openapi, "properties": body})

    def admit(self, doc: dict[str, Any], at: str) -> Admission:
        """The object as the server would store it; CheckError naming the field and the CRD if not."""
        def reject(problem: str) -> CheckError:
            return CheckError(self.check, f"{at}: {problem} ({self.label})")

        meta = doc.get("metadata")
        problems = object_meta_problems(meta) if isinstance(meta, dict) else []
        if problems:
            raise reject("; ".join(problems))
        stored, defaults = self.defaulted(doc)
        problem = self._problem(stored)
        if problem:
            raise reject(problem)
        report = check_rules(self.openapi, stored, (), CelReport())
        if report.failures:
            raise reject("; ".join(report.failures))
        return Admission(stored, defaults, report, self.rules)
