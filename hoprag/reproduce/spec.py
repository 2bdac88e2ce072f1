"""A paper table as its config describes it (`conf/table/<name>.yaml`, read whole and checked by `Table.parse`):
rows (a method or baseline with its `eval.py` overrides), column groups (a dataset, or what else sets the paper's
columns apart) × metrics (how a cell is read from a run's metrics.json), the paper's figure per cell with the
digest's caveats, and per scale the overrides every job shares and what is skipped there and why.

    name, title, digest, baseline (a row id: the paired tests' reference), notes (caveats shown under the table)
    scales: {smoke, paper}: label (what the scale shows), overrides (every job), vars (e.g. {judge: rule}, for the
            metric keys), settings (the paper's data settings, shown with the table)
    groups: <id>: label, overrides, skip; or mean_of: [group ids] (an average over groups, e.g. the paper's Avg)
    metrics: <id>: label, key (metrics.json; may name a var: crag/acc@{judge}), per (a denominator key),
             scale (to the paper's unit), digits, missing (why a run may report no such figure)
    columns: [[group, metric], ...] in the paper's order (default: every group × metric)
    rows: - id, name, overrides, groups (<group>: {overrides, skip}), skip, requires ([{path, command}]),
            run (read another row's runs instead of running), keys (<metric>: its own key), paper (<group>/<metric>:
            the figure, or {value, note} with the digest's caveat; value null where the paper's is not recoverable)

An override list may be given for every scale (a list) or per scale (`{all: [...], smoke: [...], paper: [...]}`);
so may a skip reason (a string, or `{smoke: reason}`) and a row's requirements. A row's overrides may also name
`rehearsal: [...]`: search widths (`REHEARSAL_WIDTHS`) narrowed for the rehearsal only, after the paper's, so
that a search too wide for a CPU still runs every code path; the rehearsal's report lists them.

A third scale, `rehearsal`, is no section of a table config: it is the paper scale's every job, settings and
file layout, run here with stand-ins for what needs a GPU, the hub, a served model or the full data
(`hoprag/reproduce/rehearsal.py`): its overrides are the paper's with the question count swapped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hoprag.reproduce import rehearsal
from hoprag.utils.refusals import Refusal

SCALES = ("smoke", "paper", "rehearsal")
GIVEN = ("smoke", "paper")  # the scales a table config writes; rehearsal is the paper scale's, rehearsed
# the settings a row may narrow for the rehearsal: how wide a search is, never how deep or what it reads
REHEARSAL_WIDTHS = ("method.branching", "method.breadth", "method.evaluations", "method.samples")


class TableError(Refusal, ValueError):
    """A table config that does not describe a table: an unknown id, scale or key, named with the table."""


def _per_scale(value: Any, what: str) -> dict[str, tuple]:
    """`value` per scale: a list (every scale) or `{all, smoke, paper}` (all's items first); the rehearsal
    takes the paper scale's."""
    if value is None:
        return {s: () for s in SCALES}
    if isinstance(value, (list, tuple)):
        return {s: tuple(value) for s in SCALES}
    if not isinstance(value, Mapping) or set(value) - {"all", *GIVEN}:
        raise TableError(f"{what}: a list, or a mapping of all / {' / '.join(GIVEN)} to lists, not {value!r}")
    given = {s: (*value.get("all", ()), *value.get(s, ())) for s in GIVEN}
    return {**given, "rehearsal": given["paper"]}


def _reasons(value: Any, what: str) -> dict[str, str]:
    """A skip reason per scale ("" where nothing is skipped): one string for every scale, or per scale."""
    if value is None:
        return {s: "" for s in SCALES}
    if isinstance(value, str):
        return {s: value for s in SCALES}
    if not isinstance(value, Mapping) or set(value) - set(GIVEN):
        raise TableError(f"{what}: a reason, or a mapping of {' / '.join(GIVEN)} to reasons, not {value!r}")
    given = {s: str(value.get(s) or "") for s in GIVEN}
    return {**given, "rehearsal": given["paper"]}


@dataclass(frozen=True)
class Reading:
    """How a cell is read from a run's metrics.json: `key` (divided by `per`'s value when given: a micro ratio
    such as TreeHop's gold titles found over gold titles), times `scale`, shown with `digits` decimals. `key` and
    `per` may name a scale variable (`crag/acc@{judge}`); `missing` says why a run may report no such figure."""

    key: str
    per: str | None = None
    scale: float = 1.0
    digits: int = 1
    missing: str = ""

    def at(self, variables: Mapping[str, str]) -> Reading:
        per = self.per.format(**variables) if self.per else None
        return Reading(self.key.format(**variables), per, self.scale, self.digits, self.missing)

    def value(self, metrics: Mapping[str, float]) -> float | None:
        """The cell's figure from a run's metrics (None when the run does not report it)."""
        if self.key not in metrics or (self.per is not None and not metrics.get(self.per)):
            return None
        value = float(metrics[self.key]) / (float(metrics[self.per]) if self.per is not None else 1.0)
        return value * self.scale


@dataclass(frozen=True)
class Metric:
    id: str
    label: str
    reading: Reading


@dataclass(frozen=True)
class Figure:
    """A figure the paper prints (None: printed as not recoverable), and the digest's caveat on it."""

    value: float | None
    note: str = ""


@dataclass(frozen=True)
class Group:
    """A column group: its jobs' overrides per scale and where it is skipped; an aggregate (`mean_of`) runs
    nothing and averages its row's cells in those groups."""

    id: str
    label: str
    overrides: dict[str, tuple]
    skip: dict[str, str]
    mean_of: tuple[str, ...] = ()


@dataclass(frozen=True)
class Requirement:
    """A file a row needs (a trained export), and the command that makes it."""

    path: str
    command: str


@dataclass(frozen=True)
class Row:
    """A table row: its own `eval.py` run per group, or (`run`) another row's runs read with other `keys`."""

    id: str
    name: str
    run: str
    overrides: dict[str, tuple]
    group_overrides: dict[str, dict[str, tuple]]
    skip: dict[str, str]
    group_skip: dict[str, dict[str, str]]
    requires: dict[str, tuple[Requirement, ...]]
    keys: dict[str, Reading]
    paper: dict[tuple[str, str], Figure]
    narrowed: tuple[str, ...] = ()  # the rehearsal's narrower search widths (already in overrides["rehearsal"])


@dataclass(frozen=True)
class Scale:
    label: str
    overrides: tuple[str, ...]
    variables: dict[str, str]
    settings: dict[str, Any]
    stand_ins: tuple[str, ...] = ()  # what a rehearsal stood in for (the table's footer)


@dataclass
class Table:
    name: str
    title: str
    digest: str
    baseline: str
    notes: list[str]
    scales: dict[str, Scale]
    groups: dict[str, Group]
    metrics: dict[str, Metric]
    columns: list[tuple[str, str]]
    rows: list[Row]

    @classmethod
    def parse(cls, config: Mapping[str, Any]) -> Table:
        """The table of a resolved config (`OmegaConf.to_container(cfg.table, resolve=True)`), checked."""
        name = str(config.get("name") or "?")
        try:
            return cls._parse(name, config)
        except (KeyError, TypeError, ValueError) as e:
            raise TableError(f"conf/table/{name}.yaml: {e}") from e

    @classmethod
    def _parse(cls, name: str, c: Mapping[str, Any]) -> Table:
        scales = {
            s: Scale(str(c["scales"][s]["label"]), tuple(c["scales"][s].get("overrides") or ()),
                     dict(c["scales"][s].get("vars") or {}), dict(c["scales"][s].get("settings") or {}))
            for s in GIVEN
        }  # fmt: skip
        paper = scales["paper"]
        scales["rehearsal"] = Scale(rehearsal.label(paper.label), rehearsal.swap(paper.overrides),
                                    rehearsal.variables(paper.variables), paper.settings, rehearsal.STAND_INS)  # fmt: skip
        groups = {
            g: Group(g, str(spec.get("label", g)), _per_scale(spec.get("overrides"), f"groups.{g}.overrides"),
                     _reasons(spec.get("skip"), f"groups.{g}.skip"), tuple(spec.get("mean_of") or ()))
            for g, spec in c["groups"].items()
        }  # fmt: skip
        metrics = {m: Metric(m, str(spec.get("label", m)), _reading(spec)) for m, spec in c["metrics"].items()}
        columns = [tuple(col) for col in c.get("columns") or [(g, m) for g in groups for m in metrics]]
        rows = [_row(spec, groups, metrics) for spec in c["rows"]]
        table = cls(name, str(c["title"]), str(c["digest"]), str(c["baseline"]), list(c.get("notes") or []),
                    scales, groups, metrics, columns, rows)  # fmt: skip
        table._check()
        return table

    def _check(self) -> None:
        for g, m in self.columns:
            if g not in self.groups or m not in self.metrics:
                raise ValueError(f"column {g}/{m}: unknown group or metric")
        ids = [r.id for r in self.rows]
        if len(ids) != len(set(ids)):
            raise ValueError(f"row ids repeat: {ids}")
        own = {r.id for r in self.rows if r.run == r.id}
        for row in self.rows:
            given = {s: row.overrides[s] or any(o[s] for o in row.group_overrides.values()) for s in GIVEN}
            bare = [s for s in GIVEN if row.run == row.id and not given[s] and not row.skip[s]]
            if bare:
                raise ValueError(f"row {row.id!r} has no overrides at scale {bare[0]} and no reason to skip it there")
            if row.run not in own:
                raise ValueError(f"row {row.id!r} reads the runs of {row.run!r}, which is no row with runs of its own")
            for g, m in row.paper:
                if (g, m) not in self.columns:
                    raise ValueError(f"row {row.id!r}: a paper figure for {g}/{m}, which is no column")
        for group in self.groups.values():
            if any(member not in self.groups or self.groups[member].mean_of for member in group.mean_of):
                raise ValueError(f"group {group.id!r} averages {group.mean_of}: each must be a group that runs")
        if self.baseline not in ids:
            raise ValueError(f"baseline {self.baseline!r} is no row")
        aided = [o for o in self._overrides("paper") if o.lstrip("+~").startswith("aids=") and o != "aids=none"]
        if aided or "aids=none" not in self.scales["paper"].overrides:
            raise ValueError(f"scale paper must run without the small-model overlay (aids=none in its overrides, "
                             f"nothing else): {aided or 'aids=none missing'}")  # fmt: skip

    def _overrides(self, scale: str) -> list[str]:
        """Every override the table gives at `scale`: the scale's, each row's and each group's."""
        found = [*self.scales[scale].overrides, *(o for g in self.groups.values() for o in g.overrides[scale])]
        for row in self.rows:
            found += [*row.overrides[scale], *(o for ov in row.group_overrides.values() for o in ov[scale])]
        return found

    def row(self, row_id: str) -> Row:
        return next(r for r in self.rows if r.id == row_id)

    def reading(self, row: Row, metric: str, scale: str) -> Reading:
        """How `row`'s cells of `metric` are read at `scale` (the row's own key, else the metric's)."""
        return row.keys.get(metric, self.metrics[metric].reading).at(self.scales[scale].variables)

    def run_groups(self) -> list[str]:
        """The groups that run jobs, in column order: those of a column and those an aggregate column averages."""
        found: dict[str, None] = {}
        for g, _ in self.columns:
            for member in self.groups[g].mean_of or (g,):
                found.setdefault(member)
        return list(found)


def _reading(spec: Any) -> Reading:
    if isinstance(spec, str):
        return Reading(spec)
    return Reading(str(spec["key"]), spec.get("per"), float(spec.get("scale", 1.0)), int(spec.get("digits", 1)),
                   str(spec.get("missing") or ""))  # fmt: skip


def _figure(value: Any) -> Figure:
    if isinstance(value, Mapping):
        return Figure(None if value.get("value") is None else float(value["value"]), str(value.get("note") or ""))
    return Figure(None if value is None else float(value))


def _row(spec: Mapping[str, Any], groups: Mapping[str, Group], metrics: Mapping[str, Metric]) -> Row:
    row_id = str(spec["id"])
    per_group = dict(spec.get("groups") or {})
    unknown = (set(per_group) - set(groups)) | (set(spec.get("keys") or {}) - set(metrics))
    if unknown:
        raise ValueError(f"row {row_id!r} names unknown groups or metrics: {sorted(unknown)}")
    requires = _per_scale(spec.get("requires"), f"rows.{row_id}.requires")
    given, narrowed = _narrowed(spec.get("overrides"), row_id)
    overrides = _per_scale(given, f"rows.{row_id}.overrides")
    overrides["rehearsal"] += narrowed
    return Row(
        id=row_id,
        name=str(spec.get("name", row_id)),
        run=str(spec.get("run", row_id)),
        overrides=overrides,
        group_overrides={g: _per_scale(v.get("overrides"), f"rows.{row_id}.groups.{g}") for g, v in per_group.items()},
        skip=_reasons(spec.get("skip"), f"rows.{row_id}.skip"),
        group_skip={g: _reasons(v.get("skip"), f"rows.{row_id}.groups.{g}.skip") for g, v in per_group.items()},
        requires={s: tuple(Requirement(str(r["path"]), str(r["command"])) for r in items) for s, items in requires.items()},
        keys={m: _reading({**_as_mapping(metrics[m].reading), **_as_mapping(v)}) for m, v in (spec.get("keys") or {}).items()},
        paper={_cell(k): _figure(v) for k, v in (spec.get("paper") or {}).items()},
        narrowed=narrowed,
    )  # fmt: skip


def _narrowed(overrides: Any, row_id: str) -> tuple[Any, tuple[str, ...]]:
    """A row's overrides without their `rehearsal` list, and that list: each a search width set to a positive
    integer (`REHEARSAL_WIDTHS`), as nothing else may differ between a rehearsal and the paper's run."""
    if not isinstance(overrides, Mapping) or "rehearsal" not in overrides:
        return overrides, ()
    narrowed = tuple(str(o) for o in overrides["rehearsal"] or ())
    for item in narrowed:
        key, _, value = item.partition("=")
        if key not in REHEARSAL_WIDTHS or not value.isdigit() or int(value) < 1:
            raise ValueError(f"row {row_id!r}: rehearsal override {item!r}: only a search width ("
                             f"{', '.join(REHEARSAL_WIDTHS)}) set to a positive integer")  # fmt: skip
    return {k: v for k, v in overrides.items() if k != "rehearsal"}, narrowed


def _as_mapping(reading: Reading | str | Mapping[str, Any]) -> dict[str, Any]:
    """A row's key (a string or a mapping) over its metric's reading: the row's key, the metric's scale."""
    if isinstance(reading, Reading):
        return {"key": reading.key, "per": reading.per, "scale": reading.scale, "digits": reading.digits,
                "missing": reading.missing}  # fmt: skip
    if isinstance(reading, str):
        return {"key": reading, "per": None}
    return dict(reading)


def _cell(key: str) -> tuple[str, str]:
    group, _, metric = key.partition("/")
    if not metric:
        raise ValueError(f"paper figure {key!r}: expected <group>/<metric>")
    return group, metric


def as_lines(items: Sequence[str]) -> str:
    """Overrides as one shell-ready line (each quoted when it holds a space or a brace)."""
    return " ".join(f"'{o}'" if any(ch in o for ch in " {}[]$") else o for o in items)
