"""τ²-bench tool schemas (``tools.json`` / ``user_tools.json``) derived from tau2-bench's source, never run.

τ²-bench does not ship its tool schemas as files: it builds them at run time from its toolkit classes
(``src/tau2/domains/<domain>/tools.py`` and ``user_tools.py``).  Each method decorated with
``@is_tool(...)`` becomes one OpenAI function schema: the name is the method's name, the description
and the parameter descriptions come from its Google-style docstring, and the parameters object is the
JSON schema pydantic (2.x) generates for a model with one field per parameter (annotation, default).

This module reads that source with :mod:`ast` (nothing of it is imported or executed) and writes the
same JSON, in the same order and layout.  What it understands, and nothing more (anything else raises
:class:`SchemaDeriveError`, so an unknown construct is never guessed):

* toolkits: one class per file deriving (through ``tau2`` classes) from ``ToolKitBase``; its tools
  are its decorated methods in source order, then those of its base classes not already listed;
* annotations: ``str int float bool dict list Any None``, ``List/list[X]``, ``Dict/dict[str, X]``,
  ``Optional[X]``, ``Union[...]``, ``X | Y``, ``Literal[...]``, module-level type aliases, and
  classes of the ``tau2`` package that are pydantic models (fields with ``Field(default,
  description=...)``, ``model_config = ConfigDict(extra=...)``, single inheritance) or enums;
* defaults: literals and enum members;
* docstrings: the Google style, read by :mod:`trace_gym.data.tau2_schema_docstrings`.

``read(path)`` gives the bytes of a repository file (``src/tau2/...``) or ``None``;
:func:`derive_domain` returns the file bytes for one domain.
"""

from __future__ import annotations

import ast
import inspect
import json
from collections.abc import Callable
from typing import Any

from .tau2_schema_docstrings import DocstringStyleError, parse_docstring

__all__ = ["SchemaDeriveError", "derive_domain", "toolkit_source"]

Reader = Callable[[str], "bytes | None"]
_PKG = "tau2"
_SRC = "src"
_TOOLKIT_FILES = {"tools.json": "tools.py", "user_tools.json": "user_tools.py"}
_SCALARS = {"str": "string", "int": "integer", "float": "number", "bool": "boolean"}


class SchemaDeriveError(ValueError):
    """The source cannot be turned into tool schemas; the message names the file and construct."""


def toolkit_source(domain: str, filename: str) -> str:
    """Repository path of the toolkit module that yields ``filename`` (``tools.json``/``user_tools.json``)."""
    return f"{_SRC}/{_PKG}/domains/{domain}/{_TOOLKIT_FILES[filename]}"


# --------------------------------------------------------------------------- modules and names


class _Module:
    def __init__(self, name: str, path: str, tree: ast.Module):
        self.name, self.path = name, path
        self.imports: dict[str, tuple[str, str | None]] = {}  # local name -> (module, attribute or None)
        self.classes: dict[str, ast.ClassDef] = {}
        self.aliases: dict[str, ast.expr] = {}
        for node in tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    self.imports[a.asname or a.name] = (node.module, a.name)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    self.imports[a.asname or a.name.split(".")[0]] = (a.name if a.asname else a.name.split(".")[0], None)
            elif isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.aliases[node.targets[0].id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                self.aliases[node.target.id] = node.value


class _Source:
    """The ``tau2`` package's modules, parsed on first use."""

    def __init__(self, read: Reader):
        self._read, self._modules = read, {}
        self.used: list[str] = []

    def module(self, name: str) -> _Module:
        if name not in self._modules:
            base = f"{_SRC}/{name.replace('.', '/')}"
            for path in (f"{base}.py", f"{base}/__init__.py"):
                data = self._read(path)
                if data is not None:
                    break
            else:
                raise SchemaDeriveError(f"{base}.py: not in the source (needed to derive the tool schemas)")
            try:
                tree = ast.parse(data.decode("utf-8"), filename=path)
            except (SyntaxError, UnicodeDecodeError) as exc:
                raise SchemaDeriveError(f"{path}: not readable Python ({exc})") from None
            self._modules[name] = _Module(name, path, tree)
            self.used.append(path)
        return self._modules[name]

    def resolve(self, mod: _Module, node: ast.expr) -> tuple:
        """What a name or dotted name means: ``("builtin"|"typing"|"pydantic"|"enum", name)``,
        ``("class", module, ClassDef)`` or ``("alias", module, expr)``."""
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            target = mod.imports.get(node.value.id)
            if target is None or target[1] is not None:
                raise SchemaDeriveError(f"{mod.path}:{node.lineno}: cannot resolve {ast.unparse(node)}")
            return self._in_module(target[0], node.attr, mod, node)
        if not isinstance(node, ast.Name):
            raise SchemaDeriveError(f"{mod.path}:{node.lineno}: unsupported type expression {ast.unparse(node)}")
        name = node.id
        if name in mod.classes:
            return ("class", mod, mod.classes[name])
        if name in mod.aliases:
            return ("alias", mod, mod.aliases[name])
        if name in mod.imports:
            module, attr = mod.imports[name]
            if attr is None:
                raise SchemaDeriveError(f"{mod.path}:{node.lineno}: module {module} used as a type")
            return self._in_module(module, attr, mod, node)
        if name in (*_SCALARS, "dict", "list", "None", "object"):
            return ("builtin", name)
        raise SchemaDeriveError(f"{mod.path}:{node.lineno}: unknown name {name}")

    def _in_module(self, module: str, attr: str, mod: _Module, node: ast.expr) -> tuple:
        if module in ("typing", "typing_extensions"):
            return ("typing", attr)
        if module == "pydantic" or module.startswith("pydantic."):
            return ("pydantic", attr)
        if module == "enum":
            return ("enum", attr)
        if module == _PKG or module.startswith(_PKG + "."):
            other = self.module(module)
            return self.resolve(other, ast.Name(id=attr, lineno=node.lineno))
        raise SchemaDeriveError(f"{mod.path}:{node.lineno}: {attr} comes from {module}, which is not understood")


# --------------------------------------------------------------------------- classes: toolkits, models, enums


def _bases(src: _Source, mod: _Module, cls: ast.ClassDef) -> list[tuple]:
    return [src.resolve(mod, b) for b in cls.bases]


def _class_kind(src: _Source, mod: _Module, cls: ast.ClassDef) -> str:
    """``model`` (pydantic), ``enum``, or ``other``."""
    for base in _bases(src, mod, cls):
        if base in (("pydantic", "BaseModel"),):
            return "model"
        if base[0] == "enum" and base[1] in ("Enum", "StrEnum", "IntEnum"):
            return "enum"
        if base[0] == "class":
            kind = _class_kind(src, base[1], base[2])
            if kind != "other":
                return kind
    return "other"


def _docstring(cls: ast.ClassDef) -> str | None:
    doc = ast.get_docstring(cls, clean=False)
    return inspect.cleandoc(doc) if doc else None


def _literal(src: _Source, mod: _Module, node: ast.expr) -> Any:
    """A default or Literal value: a Python literal, or an enum member (its value)."""
    if isinstance(node, ast.Attribute):
        kind = src.resolve(mod, node.value)
        if kind[0] == "class" and _class_kind(src, kind[1], kind[2]) == "enum":
            members = _enum_members(kind[1], kind[2])
            if node.attr in members:
                return members[node.attr]
        raise SchemaDeriveError(f"{mod.path}:{node.lineno}: unsupported value {ast.unparse(node)}")
    try:
        return ast.literal_eval(node)
    except ValueError:
        raise SchemaDeriveError(f"{mod.path}:{node.lineno}: unsupported value {ast.unparse(node)}") from None


def _enum_members(mod: _Module, cls: ast.ClassDef) -> dict[str, Any]:
    out = {}
    for node in cls.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if not name.startswith("_"):
                try:
                    out[name] = ast.literal_eval(node.value)
                except ValueError:
                    raise SchemaDeriveError(f"{mod.path}:{node.lineno}: enum member {name} is not a literal") from None
    return out


def _field_spec(src: _Source, mod: _Module, value: ast.expr | None, where: str) -> tuple[bool, Any, str | None]:
    """``(has_default, default, description)`` of a model field's right-hand side."""
    if value is None:
        return False, None, None
    if isinstance(value, ast.Call) and src.resolve(mod, value.func) == ("pydantic", "Field"):
        kw = {k.arg: k.value for k in value.keywords}
        unknown = set(kw) - {"default", "description"}
        if unknown or len(value.args) > 1:
            raise SchemaDeriveError(f"{where}: Field({', '.join(sorted(unknown)) or '...'}) is not understood")
        desc = _literal(src, mod, kw["description"]) if "description" in kw else None
        default = value.args[0] if value.args else kw.get("default")
        if default is None or (isinstance(default, ast.Constant) and default.value is Ellipsis):
            return False, None, desc
        return True, _literal(src, mod, default), desc
    return True, _literal(src, mod, value), None


def _model_fields(src: _Source, mod: _Module, cls: ast.ClassDef) -> tuple[list, str | None]:
    """Fields ``(name, module, annotation, has_default, default, description)`` (bases first) and the
    ``extra`` setting of ``model_config``."""
    fields: dict[str, tuple] = {}
    extra = None
    for base in _bases(src, mod, cls):
        if base[0] == "class" and _class_kind(src, base[1], base[2]) == "model":
            inherited, base_extra = _model_fields(src, base[1], base[2])
            fields.update((f[0], f) for f in inherited)
            extra = base_extra or extra
    for node in cls.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "model_config" for t in node.targets):
            call = node.value
            if not (isinstance(call, ast.Call) and src.resolve(mod, call.func) == ("pydantic", "ConfigDict")):
                raise SchemaDeriveError(f"{mod.path}:{node.lineno}: model_config must be ConfigDict(...)")
            for k in call.keywords:
                if k.arg != "extra":
                    raise SchemaDeriveError(f"{mod.path}:{node.lineno}: ConfigDict({k.arg}=...) is not understood")
                extra = _literal(src, mod, k.value)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and not node.target.id.startswith("_"):
            where = f"{mod.path}:{node.lineno}"
            if "ClassVar" in ast.unparse(node.annotation):
                continue
            has, default, desc = _field_spec(src, mod, node.value, where)
            fields[node.target.id] = (node.target.id, mod, node.annotation, has, default, desc)
    return list(fields.values()), extra


# --------------------------------------------------------------------------- JSON schema (pydantic 2 rules)


class _Schemas:
    """JSON schemas of annotations, collecting referenced models and enums under ``$defs``."""

    def __init__(self, src: _Source):
        self.src = src
        self.defs: dict[str, dict] = {}
        self._def_ids: dict[str, tuple] = {}

    def of(self, mod: _Module, node: ast.expr | None) -> dict:
        if node is None:
            return {}
        if isinstance(node, ast.Constant) and node.value is None:
            return {"type": "null"}
        if isinstance(node, ast.Constant) and isinstance(node.value, str):  # a forward reference
            return self.of(mod, ast.parse(node.value, mode="eval").body)
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self._union(mod, self._members(mod, node))
        if isinstance(node, ast.Subscript):
            return self._generic(mod, node)
        kind = self.src.resolve(mod, node)
        if kind[0] == "builtin":
            if kind[1] in _SCALARS:
                return {"type": _SCALARS[kind[1]]}
            return {"type": "null"} if kind[1] == "None" else self._container(kind[1], mod, [])
        if kind[0] == "typing" and kind[1] in ("Any",):
            return {}
        if kind[0] == "typing" and kind[1] in ("List", "Dict"):
            return self._container(kind[1].lower(), mod, [])
        if kind[0] == "alias":
            return self.of(kind[1], kind[2])
        if kind[0] == "class":
            return self._class_ref(kind[1], kind[2])
        raise SchemaDeriveError(f"{mod.path}:{node.lineno}: unsupported annotation {ast.unparse(node)}")

    def _members(self, mod: _Module, node: ast.expr) -> list[tuple[_Module, ast.expr]]:
        """Union members, nested unions and aliases of unions flattened (as typing does)."""
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            return self._members(mod, node.left) + self._members(mod, node.right)
        if isinstance(node, ast.Subscript) and self.src.resolve(mod, node.value)[:2] == ("typing", "Union"):
            elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            return [m for e in elts for m in self._members(mod, e)]
        if isinstance(node, ast.Subscript) and self.src.resolve(mod, node.value)[:2] == ("typing", "Optional"):
            return self._members(mod, node.slice) + [(mod, ast.Constant(value=None))]
        return [(mod, node)]

    def _union(self, mod: _Module, members: list[tuple[_Module, ast.expr]]) -> dict:
        schemas = [self.of(m, n) for m, n in members]
        nullable = {"type": "null"} in schemas
        inner = _dedupe([s for s in schemas if s != {"type": "null"}])
        if not inner:
            return {"type": "null"}
        body = _any_of(inner)
        return _any_of([body, {"type": "null"}]) if nullable else body

    def _generic(self, mod: _Module, node: ast.Subscript) -> dict:
        head = self.src.resolve(mod, node.value)
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        name = head[1] if head[0] in ("typing", "builtin") else None
        if name in ("Union", "Optional"):
            return self._union(mod, self._members(mod, node))
        if name == "Literal":
            values = [_literal(self.src, mod, a) for a in args]
            out: dict[str, Any] = {"const": values[0]} if len(values) == 1 else {"enum": values}
            types = {type(v) for v in values}
            for py, js in ((str, "string"), (int, "integer"), (float, "number"), (bool, "boolean"), (type(None), "null")):
                if types == {py}:
                    out["type"] = js
            return out
        if name in ("List", "list", "Dict", "dict"):
            return self._container(name.lower(), mod, args)
        raise SchemaDeriveError(f"{mod.path}:{node.lineno}: unsupported annotation {ast.unparse(node)}")

    def _container(self, kind: str, mod: _Module, args: list[ast.expr]) -> dict:
        if kind == "list":
            if len(args) > 1:
                raise SchemaDeriveError(f"{mod.path}: list takes one type argument")
            return {"items": self.of(mod, args[0]) if args else {}, "type": "array"}
        if kind == "dict":
            if args and (len(args) != 2 or self.of(mod, args[0]) != {"type": "string"}):
                raise SchemaDeriveError(f"{mod.path}: only dict[str, X] is understood")
            values = dict(self.of(mod, args[1])) if args else {}
            values.pop("title", None)
            return {"additionalProperties": values or True, "type": "object"}
        raise SchemaDeriveError(f"{mod.path}: {kind} is not a type")

    def _class_ref(self, mod: _Module, cls: ast.ClassDef) -> dict:
        ident = (mod.name, cls.name)
        if cls.name in self._def_ids:
            if self._def_ids[cls.name] != ident:
                raise SchemaDeriveError(f"{mod.path}: two classes named {cls.name} in one tool's parameters")
            return {"$ref": f"#/$defs/{cls.name}"}
        kind = _class_kind(self.src, mod, cls)
        if kind == "other":
            raise SchemaDeriveError(f"{mod.path}:{cls.lineno}: {cls.name} is neither a pydantic model nor an Enum")
        self._def_ids[cls.name] = ident
        doc = _docstring(cls)
        if kind == "enum":
            values = list(_enum_members(mod, cls).values())
            schema: dict[str, Any] = {"enum": values, "title": cls.name}
            types = {type(v) for v in values}
            if types == {str} or any(self.src.resolve(mod, b) == ("builtin", "str") for b in cls.bases):
                schema["type"] = "string"
            elif types == {int}:
                schema["type"] = "integer"
        else:
            self.defs[cls.name] = {}  # reserve (a model may refer to itself)
            fields, extra = _model_fields(self.src, mod, cls)
            schema = self.object_schema(cls.name, fields)
            if extra == "forbid":
                schema["additionalProperties"] = False
            elif extra == "allow":
                schema["additionalProperties"] = True
        if doc and doc != "An enumeration.":
            schema["description"] = doc
        self.defs[cls.name] = schema
        return {"$ref": f"#/$defs/{cls.name}"}

    def object_schema(self, title: str, fields: list[tuple]) -> dict:
        """The schema of a model with ``fields`` ``(name, module, annotation, has_default, default, description)``."""
        props: dict[str, dict] = {}
        required = []
        for name, mod, anno, has_default, default, desc in fields:
            prop = dict(self.of(mod, anno))
            if has_default:
                prop["default"] = default
            if desc is not None:
                prop["description"] = desc
            if self._titled(mod, anno):
                prop["title"] = name.title().replace("_", " ").strip()
            props[name] = prop
            if not has_default:
                required.append(name)
        out: dict[str, Any] = {"properties": props}
        if required:
            out["required"] = required
        out.update(title=title, type="object")
        return out

    def _titled(self, mod: _Module, anno: ast.expr | None) -> bool:
        """pydantic titles a field unless its type is (an optional) model or enum, which carry their own."""
        if anno is None:
            return True
        real = _dedupe([s for s in (self.of(m, n) for m, n in self._members(mod, anno)) if s != {"type": "null"}])
        return not (len(real) == 1 and list(real[0]) == ["$ref"])


def _dedupe(schemas: list[dict]) -> list[dict]:
    out: list[dict] = []
    for s in schemas:
        if s not in out:
            out.append(s)
    return out


def _any_of(schemas: list[dict]) -> dict:
    flat: list[dict] = []
    for s in schemas:
        flat.extend(s["anyOf"] if len(s) == 1 and "anyOf" in s else [s])
    flat = _dedupe(flat)
    return flat[0] if len(flat) == 1 else {"anyOf": flat}


def _sorted(value: Any, parent: str | None = None) -> Any:
    """pydantic's key order: alphabetical, except inside ``properties`` and ``default``."""
    if isinstance(value, dict):
        keys = list(value) if parent in ("properties", "default") else sorted(value)
        return {k: _sorted(value[k], k) for k in keys}
    if isinstance(value, list):
        return [_sorted(v, parent) for v in value]
    return value


# --------------------------------------------------------------------------- toolkits


def _tool_decorator(src: _Source, mod: _Module, fn: ast.FunctionDef) -> tuple[str, bool] | None:
    """``(tool_type, mutates_state)`` of an ``@is_tool(...)`` method; ``None`` if not a listed tool."""
    for dec in fn.decorator_list:
        func = dec.func if isinstance(dec, ast.Call) else dec
        if not isinstance(func, (ast.Name, ast.Attribute)):
            continue
        name = func.attr if isinstance(func, ast.Attribute) else func.id
        if name not in ("is_tool", "is_discoverable_tool"):
            continue
        if not isinstance(dec, ast.Call):
            raise SchemaDeriveError(f"{mod.path}:{dec.lineno}: @{name} without arguments")
        if name == "is_discoverable_tool":  # callable, but not listed to the model
            return None
        args = dict(zip(("tool_type", "mutates_state"), dec.args, strict=False))
        args.update((k.arg, k.value) for k in dec.keywords)
        tool_type = "read" if "tool_type" not in args else _literal(src, mod, args["tool_type"])
        mutates = _literal(src, mod, args["mutates_state"]) if "mutates_state" in args else None
        return tool_type, (tool_type == "write") if mutates is None else bool(mutates)
    return None


def _toolkit_chain(src: _Source, mod: _Module, cls: ast.ClassDef) -> list[tuple[_Module, ast.ClassDef]]:
    chain = [(mod, cls)]
    bases = [b for b in _bases(src, mod, cls) if b[0] == "class"]
    if len(bases) > 1:
        raise SchemaDeriveError(f"{mod.path}:{cls.lineno}: a toolkit with several base classes is not understood")
    return chain + (_toolkit_chain(src, bases[0][1], bases[0][2]) if bases else [])


def _find_toolkit(src: _Source, mod: _Module) -> list[tuple[_Module, ast.ClassDef]]:
    found = []
    for cls in mod.classes.values():
        try:
            chain = _toolkit_chain(src, mod, cls)
        except SchemaDeriveError:  # a helper class with bases from elsewhere is not a toolkit
            continue
        if len(chain) > 1 and chain[-1][1].name == "ToolKitBase":
            found.append(chain)
    inner = {id(c) for chain in found for _, c in chain[1:]}
    found = [chain for chain in found if id(chain[0][1]) not in inner]  # the most derived toolkit
    if len(found) != 1:
        names = ", ".join(c[0][1].name for c in found) or "none"
        raise SchemaDeriveError(f"{mod.path}: expected one ToolKitBase subclass, found {names}")
    return found[0]


def _tool_entry(src: _Source, mod: _Module, fn: ast.FunctionDef, tool_type: str, mutates: bool) -> dict:
    where = f"{mod.path}:{fn.lineno} ({fn.name})"
    a = fn.args
    if a.vararg or a.kwarg or a.posonlyargs:
        raise SchemaDeriveError(f"{where}: *args, **kwargs and positional-only parameters are not understood")
    try:
        short, long, documented = parse_docstring(ast.get_docstring(fn, clean=False))
    except DocstringStyleError as exc:
        raise SchemaDeriveError(f"{where}: {exc}") from None
    positional = a.args[1:]  # the bound method drops self
    defaults: list[ast.expr | None] = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
    params = [*zip(positional, defaults[1:], strict=True), *zip(a.kwonlyargs, a.kw_defaults, strict=True)]
    fields = []
    for arg, default in params:
        desc, written_type = documented.get(arg.arg, (None, None))
        if arg.annotation is None and written_type is not None:
            raise SchemaDeriveError(f"{where}: parameter {arg.arg} is typed only in the docstring")
        has = default is not None
        fields.append((arg.arg, mod, arg.annotation, has, _literal(src, mod, default) if has else None, desc))
    schemas = _Schemas(src)
    parameters = schemas.object_schema("parameters", fields)
    if schemas.defs:
        parameters["$defs"] = schemas.defs
    description = fn.name if not short else (short + "\n\n" + long if long else short)
    return {"name": fn.name, "tool_type": tool_type, "mutates_state": mutates,
            "openai_schema": {"type": "function", "function": {"name": fn.name, "description": description,
                                                               "parameters": _sorted(parameters)}}}


def _is_marked(fn: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Call) and isinstance(d.func, (ast.Name, ast.Attribute))
               and (d.func.attr if isinstance(d.func, ast.Attribute) else d.func.id) in ("is_tool", "is_discoverable_tool")
               for d in fn.decorator_list)


def toolkit_tools(src: _Source, module: str) -> list[dict]:
    """The tool entries of the one toolkit class in ``module``, in the order tau2 lists them: a class's
    own tools in source order, then its base classes' tools not already listed."""
    order: list[str] = []
    first: dict[str, tuple[_Module, ast.FunctionDef]] = {}  # the definition attribute lookup finds
    for mod, cls in _find_toolkit(src, src.module(module)):
        for node in cls.body:
            if isinstance(node, ast.FunctionDef):
                first.setdefault(node.name, (mod, node))
                if _is_marked(node) and node.name not in order:
                    order.append(node.name)
    out = []
    for name in order:
        mod, fn = first[name]
        if not _is_marked(fn):
            raise SchemaDeriveError(f"{mod.path}:{fn.lineno}: {name} overrides a tool without @is_tool")
        deco = _tool_decorator(src, mod, fn)
        if deco is not None:
            out.append(_tool_entry(src, mod, fn, *deco))
    return out


def derive_domain(read: Reader, domain: str, filenames: list[str] | tuple[str, ...] = ("tools.json",)) -> tuple[dict[str, bytes], list[str]]:
    """The bytes of ``filenames`` (``tools.json``, ``user_tools.json``) for ``domain``, and the repository
    paths of every source file read.  Raises :class:`SchemaDeriveError`."""
    src = _Source(read)
    out = {}
    for filename in filenames:
        if filename not in _TOOLKIT_FILES:
            raise SchemaDeriveError(f"{filename}: not a tool-schema file (expected {', '.join(_TOOLKIT_FILES)})")
        module = f"{_PKG}.domains.{domain}.{_TOOLKIT_FILES[filename][:-3]}"
        try:
            tools = toolkit_tools(src, module)
        except RecursionError:
            raise SchemaDeriveError(f"{module}: circular class bases or type aliases") from None
        out[filename] = (json.dumps(tools, indent=2) + "\n").encode("utf-8")
    return out, list(src.used)
