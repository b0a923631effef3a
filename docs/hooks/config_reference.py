"""MkDocs hook: renders docs/reference/configuration.md's settings from the schema at build time.

Every setting of chorus's jobs is a field of a dataclass in chorus/config/schema.py (the simulator's:
SimConfig in chorus/sim/config.py). Each field is listed with its dotted name, its type, its default
and the comment written beside it in the source (the comment lines right above the field and the
trailing `# ...` on its line), so the page cannot drift from the code. The marker
`<!-- config-reference -->` in the page is replaced by the tables.
"""
from __future__ import annotations

import dataclasses
import enum
import inspect
import io
import re
import sys
import tokenize
import typing
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # this checkout's chorus, also without PYTHONPATH or an install
    sys.path.insert(0, str(ROOT))

MARKER = "<!-- config-reference -->"
PAGE = "reference/configuration.md"
# (module, config name, schema class name) of each job, in the order the page lists them
JOBS = (("chorus.train", "train", "TrainConf"), ("chorus.evaluate", "evaluate", "EvaluateConf"),
        ("chorus.analyze", "analyze", "AnalyzeConf"), ("chorus.pipeline", "pipeline", "PipelineConf"))


def on_page_markdown(markdown: str, page, config, files) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        raise ValueError(f"{PAGE} lacks the marker {MARKER} where the settings go")
    return markdown.replace(MARKER, render())


def render() -> str:
    from chorus.config import cli_help, schema

    groups = group_schemas()
    out = []
    for module, name, cls_name in JOBS:
        cls = getattr(schema, cls_name)
        picks = dict(cli_help.job_groups(name))
        out += [f"## {module}", "",
                f"`python -m {module}`: `{cls_name}` in chorus/config/schema.py, composed from conf/{name}.yaml.", ""]
        if picks:
            out += ["Its config groups (pick an option with `group=option`):", ""]
            out += [f"- [`{g}`](#{anchor(g)})" + (f": default option `{o}`" if o else ": no option by default")
                    for g, o in picks.items()]
            out.append("")
        rows = [r for r in field_rows(cls, cls(), "") if r[0].split(".")[0] not in groups]
        out += table(rows) + [""]
    out += ["## Config groups", "",
            "A group's option (`conf/<group>/<option>.yaml`) states only what differs from the defaults below "
            "(tests/test_config_defaults.py checks it); each option is listed with the first sentence of its "
            "comment, as `--help` shows it.", ""]
    used = {g for _, name, _ in JOBS for g, _ in cli_help.job_groups(name)}
    for group in [*groups, *sorted(used - set(groups))]:
        cls = groups.get(group)
        out += [f"### {group}", "", prose(cli_help.GROUPS.get(group, "")) + ".", ""]
        doc = inspect.getdoc(cls) if cls is not None and cls.__doc__ and \
            not cls.__doc__.startswith(cls.__name__ + "(") else None
        if doc:
            out += [prose(" ".join(doc.split())), ""]
        opts = cli_help.options(group)
        if opts:
            out += ["Options:", ""] + [f"- `{o}`" + (f": {prose(what)}" if what else "") for o, what in opts.items()]
            out.append("")
        if cls is not None:
            out += table(field_rows(cls, cls(), group + ".")) + [""]
        if group == "consolidation":  # a schema per method: each method's own settings
            for method, mcls in {**schema.MERGE_SCHEMAS, "opd": schema.OPDConf}.items():
                out += [f"#### consolidation={method}", "", prose(" ".join(inspect.getdoc(mcls).split())), ""]
                out += table([r for r in field_rows(mcls, mcls(), group + ".") if r[0] != "consolidation.name"])
                out.append("")
        else:
            out += ["This group has no settings of its own: each option sets other groups' settings.", ""]
    return "\n".join(out)


def group_schemas() -> dict[str, type]:
    """Each config group's schema dataclass, as register_configs stores it (group -> class)."""
    from hydra.core.config_store import ConfigStore
    from omegaconf import OmegaConf

    from chorus.config.schema import register_configs

    register_configs()
    found = {}
    for group, entries in ConfigStore.instance().repo.items():
        if not isinstance(entries, dict):
            continue
        for key, node in entries.items():
            if key == f"{group}_schema.yaml" or (group == "pipeline" and key == "pipeline_preset_schema.yaml"):
                found[group] = OmegaConf.get_type(node.node)
    return found


def anchor(group: str) -> str:
    """The id MkDocs' toc extension gives the heading `### <group>`."""
    return re.sub(r"[^\w-]", "", group.lower().replace(" ", "-"))


def table(rows: list[tuple[str, str, str, str]]) -> list[str]:
    lines = ["| setting | type | default | what it does |", "|---|---|---|---|"]
    for name, typ, default, comment in rows:
        lines.append(f"| `{name}` | {prose(typ)} | {code(default)} | {prose(comment)} |")
    return lines


def prose(text: str) -> str:
    """Source text as literal Markdown: no emphasis, code spans, links or HTML tags of its own."""
    text = re.sub(r"([\\`*_\[\]|])", r"\\\1", text)
    return text.replace("<", "&lt;").replace(">", "&gt;")


def code(text: str) -> str:
    return "`" + text.replace("|", "\\|") + "`" if text else ""


def field_rows(cls: type, value, prefix: str) -> list[tuple[str, str, str, str]]:
    """(dotted name, type, default, comment) of each field, nested dataclasses expanded in place."""
    hints = typing.get_type_hints(cls)
    notes = comments(cls)
    rows = []
    for f in dataclasses.fields(cls):
        typ, current = hints[f.name], getattr(value, f.name, None) if value is not None else None
        name = prefix + f.name
        if dataclasses.is_dataclass(typ):
            if notes.get(f.name):
                rows.append((name, "settings below", "", notes[f.name]))
            rows += field_rows(typ, current, name + ".")
            continue
        item = element_dataclass(typ)
        rows.append((name, type_name(typ), show(current if value is not None else default_of(f)),
                     notes.get(f.name, "")))
        if item is not None:
            rows += field_rows(item, None, name + ".N.")
    return rows


def element_dataclass(typ) -> type | None:
    """The dataclass a List[...] field holds (teacher_pool.teachers), else None."""
    if typing.get_origin(typ) in (list, typing.List):
        (arg,) = typing.get_args(typ) or (None,)
        return arg if dataclasses.is_dataclass(arg) else None
    return None


def default_of(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def type_name(typ) -> str:
    origin, args = typing.get_origin(typ), typing.get_args(typ)
    if typ is typing.Any:
        return "any"
    if origin is typing.Union:
        rest = [a for a in args if a is not type(None)]
        return " or ".join(type_name(a) for a in rest) + (" or null" if len(rest) < len(args) else "")
    if origin in (list, tuple):
        if not args:
            return "list"
        inner = type_name(args[0])
        return f"list, each {inner}" if inner.startswith("one of") else f"list of {inner}"
    if origin is dict:
        return "mapping"
    if isinstance(typ, type) and issubclass(typ, enum.Enum):
        return "one of " + ", ".join(m.value for m in typ)
    if dataclasses.is_dataclass(typ):
        return typ.__name__
    return getattr(typ, "__name__", str(typ))


def show(value) -> str:
    """A default as it is written in a YAML file or an override."""
    if value is dataclasses.MISSING:
        return "(required)"
    if value is None:
        return "null"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {show(v)}" for k, v in value.items()) + "}"
    return repr(value)


def comments(cls: type) -> dict[str, str]:
    """Field name -> the comment lines right above the field in the class body plus its trailing
    comment, read with tokenize (a `#` inside a string is not a comment). The simulator group's
    schema is built from SimConfig by schema._simulator_schema: its comments are SimConfig's, and
    `workers` has its comment on the line that adds it there."""
    from chorus.config import schema
    from chorus.sim.config import SimConfig

    if cls is schema.SimulatorConf:
        notes = comments(SimConfig)
        for line in inspect.getsource(schema._simulator_schema).splitlines():
            if '"workers"' in line:
                notes["workers"] = trailing(line)
        return notes
    lines = inspect.getsource(cls).splitlines()
    notes, above = {}, []
    for line in lines[1:]:
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("#").strip())
            continue
        m = re.match(r"    (\w+)\s*:", line)
        if m and not line.startswith("     "):
            text = " ".join(above + [trailing(line)]).strip()
            if text:
                notes[m.group(1)] = text
        above = []
    return notes


def trailing(line: str) -> str:
    """The `# ...` comment at the end of one source line, if any."""
    found = []
    try:  # a line that opens a bracket it does not close ends in a TokenError after its comment
        for t in tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline):
            if t.type == tokenize.COMMENT:
                found.append(t.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        pass
    return found[-1].lstrip("#").strip() if found else ""
