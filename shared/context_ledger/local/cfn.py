"""CloudFormation YAML and the intrinsic functions the local runtime can evaluate.

The YAML loader accepts every short-form tag (``!Ref``, ``!GetAtt``, ``!Sub``, ...) and turns it
into the long form (``{"Ref": x}``, ``{"Fn::GetAtt": [x, y]}``), so the rest of the code reads one
shape. :class:`Resolver` evaluates what is knowable on one machine: parameter defaults, conditions
over them, mappings, and the references the runtime provides itself (local queue URLs and ARNs).
Everything else (pseudo parameters, cloud resources) raises :class:`UnresolvedError`.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

_SUB_VARIABLE = re.compile(r"\$\{([^}]*)\}")


class UnresolvedError(Exception):
    """A value depends on something only AWS knows (a pseudo parameter, a cloud resource)."""


class _CfnLoader(yaml.SafeLoader):
    """SafeLoader that reads CloudFormation short-form tags."""


def _construct_intrinsic(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    if suffix in ("Ref", "Condition"):
        return {suffix: value}
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {f"Fn::{suffix}": value}


_CfnLoader.add_multi_constructor("!", _construct_intrinsic)


def load_yaml(path: Path) -> Any:
    """Parse a CloudFormation/SAM YAML file into plain Python values (long-form intrinsics)."""
    with path.open(encoding="utf-8") as stream:
        return yaml.load(stream, Loader=_CfnLoader)  # noqa: S506 - a SafeLoader subclass


def ref_target(value: Any) -> str | None:
    """The logical id a ``Ref``/``Fn::GetAtt`` points at, or None for anything else."""
    if isinstance(value, dict) and len(value) == 1:
        if isinstance(value.get("Ref"), str):
            return value["Ref"]
        attr = value.get("Fn::GetAtt")
        if isinstance(attr, list) and attr and isinstance(attr[0], str):
            return attr[0]
    return None


@dataclass(frozen=True)
class Resolver:
    """Evaluates intrinsic functions against what the local runtime knows.

    ``refs`` maps a logical id to its ``Ref`` value, ``attributes`` maps ``(logical id, name)`` to
    its ``Fn::GetAtt`` value; parameters resolve to their ``Default``.
    """

    parameters: Mapping[str, Any] = field(default_factory=dict)
    conditions: Mapping[str, Any] = field(default_factory=dict)
    mappings: Mapping[str, Any] = field(default_factory=dict)
    refs: Mapping[str, Any] = field(default_factory=dict)
    attributes: Mapping[tuple[str, str], Any] = field(default_factory=dict)

    def resolve(self, value: Any) -> Any:
        """The value with every intrinsic evaluated; raises UnresolvedError if one cannot be."""
        if isinstance(value, dict):
            if len(value) == 1:
                ((key, argument),) = value.items()
                if key == "Ref":
                    return self._ref(argument)
                if key == "Condition":
                    return self.condition(argument)
                if key.startswith("Fn::"):
                    function = _FUNCTIONS.get(key)
                    if function is None:
                        raise UnresolvedError(f"{key} is not evaluated locally")
                    try:
                        return function(self, argument)
                    except (ValueError, TypeError, IndexError) as exc:
                        raise UnresolvedError(f"malformed {key}: {exc}") from None
            return {k: self.resolve(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.resolve(item) for item in value]
        return value

    def condition(self, name: str) -> bool:
        """Evaluate the named template condition."""
        if name not in self.conditions:
            raise UnresolvedError(f"unknown condition {name!r}")
        result = self.resolve(self.conditions[name])
        if not isinstance(result, bool):
            raise UnresolvedError(f"condition {name!r} is not a boolean")
        return result

    def _ref(self, name: Any) -> Any:
        if not isinstance(name, str):
            raise UnresolvedError("Ref needs a name")
        if name in self.refs:
            return self.refs[name]
        if name in self.parameters:
            return self.parameters[name]
        raise UnresolvedError(f"Ref {name} is only known in AWS")

    def _get_att(self, argument: Any) -> Any:
        resource, attribute = self.resolve(argument)
        if (resource, attribute) in self.attributes:
            return self.attributes[(resource, attribute)]
        raise UnresolvedError(f"GetAtt {resource}.{attribute} is only known in AWS")

    def _sub(self, argument: Any) -> str:
        if isinstance(argument, list):
            text, variables = argument[0], self.resolve(argument[1])
        else:
            text, variables = argument, {}

        def replace(match: re.Match[str]) -> str:
            name = match.group(1)
            if name.startswith("!"):
                return "${" + name[1:] + "}"
            if name in variables:
                return str(variables[name])
            if "." in name:
                return str(self._get_att(name.split(".", 1)))
            return str(self._ref(name))

        return _SUB_VARIABLE.sub(replace, text)

    def _join(self, argument: Any) -> str:
        delimiter, items = self.resolve(argument)
        return str(delimiter).join(str(item) for item in items)

    def _select(self, argument: Any) -> Any:
        index, items = self.resolve(argument)
        return items[int(index)]

    def _split(self, argument: Any) -> list[str]:
        delimiter, text = self.resolve(argument)
        return str(text).split(delimiter)

    def _if(self, argument: Any) -> Any:
        name, when_true, when_false = argument
        return self.resolve(when_true if self.condition(name) else when_false)

    def _equals(self, argument: Any) -> bool:
        left, right = self.resolve(argument)
        return str(left) == str(right)

    def _not(self, argument: Any) -> bool:
        (value,) = self.resolve(argument)
        return not value

    def _and(self, argument: Any) -> bool:
        return all(self.resolve(argument))

    def _or(self, argument: Any) -> bool:
        return any(self.resolve(argument))

    def _find_in_map(self, argument: Any) -> Any:
        name, top, second = self.resolve(argument)[:3]
        try:
            return self.mappings[name][top][second]
        except (KeyError, TypeError):
            raise UnresolvedError(f"FindInMap {name}.{top}.{second} is not defined") from None

    def _base64(self, argument: Any) -> str:
        return base64.b64encode(str(self.resolve(argument)).encode()).decode()


_FUNCTIONS: dict[str, Callable[[Resolver, Any], Any]] = {
    "Fn::GetAtt": Resolver._get_att,
    "Fn::Sub": Resolver._sub,
    "Fn::Join": Resolver._join,
    "Fn::Select": Resolver._select,
    "Fn::Split": Resolver._split,
    "Fn::If": Resolver._if,
    "Fn::Equals": Resolver._equals,
    "Fn::Not": Resolver._not,
    "Fn::And": Resolver._and,
    "Fn::Or": Resolver._or,
    "Fn::FindInMap": Resolver._find_in_map,
    "Fn::Base64": Resolver._base64,
}
