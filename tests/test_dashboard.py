"""The dashboard as the Monitoring API takes it: valid for the API, and unchanged by its round trip (the second
`pulumi up` shows no change).

What the API stores is its proto (googleapis/googleapis google/monitoring/dashboard/v1/*.proto at f8291d2b, the
subset below, transcribed with its field types), and what it answers is that message in proto3 JSON: lowerCamelCase
names, and no field at its default value (https://protobuf.dev/programming-guides/json/, "JSON Options": "If a
field has the default value in the protocol buffer, it will be omitted in the JSON-encoded data by default";
defaults per type: https://protobuf.dev/programming-guides/proto3/#default). The provider then compares that answer
with the configured JSON after removing only the keys the configuration lacks
(terraform-provider-google-beta google-beta/services/monitoring/resource_monitoring_dashboard.go,
`removeComputedKeys` and `monitoringDashboardDiffSuppress`, at v7.45.0 and main 93c65b2d). A configured field the
API drops is therefore a change on every `up` (hashicorp/terraform-provider-google#16173).

The defaults below come from those rules and the proto's types, never from what the program emits.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections import Counter
from typing import Any

import jsonschema
import pytest

from components.model.observability.dashboard import without_defaults
from tests.graph_queries import NO_DEMOS, emitted, tiles
from tests.harness import Run, run_program
from tests.stack_config import P

# Enums: their first value (number 0) is the default (proto3 requires it).
ENUMS: dict[str, tuple[str, ...]] = {
    "XyChart.DataSet.PlotType": ("PLOT_TYPE_UNSPECIFIED", "LINE", "STACKED_AREA", "STACKED_BAR", "HEATMAP"),
    "XyChart.DataSet.TargetAxis": ("TARGET_AXIS_UNSPECIFIED", "Y1", "Y2"),
    "XyChart.Axis.Scale": ("SCALE_UNSPECIFIED", "LINEAR", "LOG10"),
    "ChartOptions.Mode": ("MODE_UNSPECIFIED", "COLOR", "X_RAY", "STATS"),
    "Threshold.Color": ("COLOR_UNSPECIFIED", "YELLOW", "RED"),
    "Threshold.Direction": ("DIRECTION_UNSPECIFIED", "ABOVE", "BELOW"),
    "Threshold.TargetAxis": ("TARGET_AXIS_UNSPECIFIED", "Y1", "Y2"),
}

# proto3 scalar defaults (https://protobuf.dev/programming-guides/proto3/#default).
SCALAR_DEFAULTS: dict[str, Any] = {"string": "", "bool": False, "int32": 0, "double": 0.0}
# The fields of the messages this program can write as their proto declares them, `[repeated] type jsonName
# [oneof name]`; an unknown field fails the walk.
PROTO = {
    # dashboard.proto
    "Dashboard": "string name; string displayName; string etag; MosaicLayout mosaicLayout oneof layout; "
    "map<string,string> labels",
    # layouts.proto
    "MosaicLayout": "int32 columns; repeated MosaicLayout.Tile tiles",
    "MosaicLayout.Tile": "int32 xPos; int32 yPos; int32 width; int32 height; Widget widget",
    # widget.proto
    "Widget": "string title; XyChart xyChart oneof content; SectionHeader sectionHeader oneof content; string id",
    # section_header.proto
    "SectionHeader": "string subtitle; bool dividerBelow",
    # xychart.proto
    "XyChart": "repeated XyChart.DataSet dataSets; repeated Threshold thresholds; XyChart.Axis xAxis; "
    "XyChart.Axis yAxis; XyChart.Axis y2Axis; ChartOptions chartOptions",
    "XyChart.DataSet": "TimeSeriesQuery timeSeriesQuery; XyChart.DataSet.PlotType plotType; string legendTemplate; "
    "XyChart.DataSet.TargetAxis targetAxis",
    "XyChart.Axis": "string label; XyChart.Axis.Scale scale",
    "ChartOptions": "ChartOptions.Mode mode",
    # metrics.proto
    "TimeSeriesQuery": "string prometheusQuery oneof source; string timeSeriesQueryLanguage oneof source; "
    "string unitOverride; bool outputFullDuration",
    "Threshold": "string label; double value; Threshold.Color color; Threshold.Direction direction; "
    "Threshold.TargetAxis targetAxis",
}
Field = tuple[str, str, str | None]  # kind ("scalar", "enum", "message", "repeated" or "map"), type, oneof


def field(declaration: str) -> tuple[str, Field]:
    """A declaration of PROTO as (JSON name, Field); a repeated field's type is its elements', a map's its values'."""
    repeated = declaration.startswith("repeated ")
    type_, name, *oneof = declaration.removeprefix("repeated ").split()  # oneof: ["oneof", its name]
    if type_.startswith("map<"):
        kind, type_ = "map", type_.removesuffix(">").split(",")[1]
    else:
        kind = "enum" if type_ in ENUMS else "scalar" if type_ in SCALAR_DEFAULTS else "message"
    return name, ("repeated" if repeated else kind, type_, oneof[1] if oneof else None)


MESSAGES: dict[str, dict[str, Field]] = {message: dict(map(field, spec.split("; "))) for message, spec in PROTO.items()}


# The fields of MESSAGES this program writes; the schema derived from them is closed to every other (the API's
# reference, https://cloud.google.com/monitoring/api/ref_v3/rest/v1/projects.dashboards). A required field ("!")
# is never empty: a string of one character or more, a list of one item or more, an int32 of 1 or more (the
# others, positions, 0 or more). Every chart is PromQL: no filter, no MQL.
WRITTEN = {
    "Dashboard": "displayName! labels mosaicLayout!",
    "MosaicLayout": "columns! tiles!",
    "MosaicLayout.Tile": "xPos yPos width! height! widget!",
    "Widget": "title! xyChart sectionHeader",
    "SectionHeader": "subtitle dividerBelow",
    "XyChart": "dataSets! thresholds yAxis",
    "XyChart.DataSet": "timeSeriesQuery! plotType! legendTemplate targetAxis",
    "XyChart.Axis": "label scale",
    "TimeSeriesQuery": "prometheusQuery! unitOverride",
    "Threshold": "value label targetAxis",  # a double has no presence in proto3: a 0 threshold is sent as none
}
JSON_TYPES = {"string": "string", "bool": "boolean", "int32": "integer", "double": "number"}


def field_schema(kind: str, type_: str, required: bool) -> dict[str, Any]:
    if kind == "message":
        return {"$ref": f"#/$defs/{type_}"}
    if kind == "enum":
        return {"enum": list(ENUMS[type_][1:])}  # the default, UNSPECIFIED, is dropped by the API (module docstring)
    if kind == "map":
        return {"type": "object", "additionalProperties": {"type": JSON_TYPES[type_]}}
    if kind == "repeated":
        items = field_schema("message" if type_ in MESSAGES else "scalar", type_, False)
        return {"type": "array", "items": items, **({"minItems": 1} if required else {})}
    out: dict[str, Any] = {"type": JSON_TYPES[type_]}
    if type_ == "string" and required:
        out["minLength"] = 1
    if type_ == "int32":
        out["minimum"] = 1 if required else 0
    return out


def message_schema(message: str) -> dict[str, Any]:
    names = [name.rstrip("!") for name in WRITTEN[message].split()]
    required = [name.rstrip("!") for name in WRITTEN[message].split() if name.endswith("!")]
    fields = {name: MESSAGES[message][name] for name in names}
    schema: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": {name: field_schema(kind, type_, name in required) for name, (kind, type_, _) in fields.items()},
        "required": required,
    }
    oneofs: dict[str, list[str]] = {}
    for name, (_, _, oneof) in fields.items():
        oneofs.setdefault(oneof or "", []).append(name)
    # A oneof is a union (a widget is exactly one kind); one written member of it is just a field.
    unions = [
        {"oneOf": [{"required": [m]} for m in members]} for o, members in oneofs.items() if o and len(members) > 1
    ]
    if unions:
        schema["allOf"] = unions
    return schema


DASHBOARD_SCHEMA = {"$ref": "#/$defs/Dashboard", "$defs": {message: message_schema(message) for message in WRITTEN}}
DASHBOARD_SCHEMA["$defs"]["MosaicLayout"]["properties"]["columns"]["maximum"] = 48  # the API's grid


def dashboard_problems(d: dict[str, Any]) -> list[str]:
    """Schema errors, then what the schema cannot say: tiles inside the grid, no overlaps, no duplicate charts."""
    problems = [
        f"{list(e.absolute_path)}: {e.message}"
        for e in jsonschema.Draft202012Validator(DASHBOARD_SCHEMA).iter_errors(d)
    ]
    if problems:
        return problems
    columns = d["mosaicLayout"]["columns"]
    cells: Counter[tuple[int, int]] = Counter()
    for i, t in enumerate(tiles(d)):
        x0, y0 = t.get("xPos", 0), t.get("yPos", 0)
        if x0 + t["width"] > columns:
            problems.append(f"tile {i} ends at column {x0 + t['width']} > {columns}")
        cells.update(itertools.product(range(x0, x0 + t["width"]), range(y0, y0 + t["height"])))
    problems += [f"tiles overlap at {cell}" for cell, count in cells.items() if count > 1]
    charts = [t["widget"]["xyChart"]["dataSets"] for t in tiles(d) if "xyChart" in t["widget"]]
    queries = Counter(json.dumps([ds["timeSeriesQuery"]["prometheusQuery"] for ds in chart]) for chart in charts)
    problems += [f"{count} charts show {query}" for query, count in queries.items() if count > 1]
    return problems


def _is_default(kind: str, type_: str, value: Any) -> bool:
    if kind == "scalar":
        default = SCALAR_DEFAULTS[type_]
        return type(value) is type(default) and value == default if type_ == "bool" else value == default
    if kind == "enum":
        return value in (ENUMS[type_][0], 0)
    if kind in ("repeated", "map"):
        return len(value) == 0
    return False  # a message field that is set is present, even when empty


def defaults_in(value: dict[str, Any], message: str = "Dashboard", path: str = "") -> list[str]:
    """Paths of every field at its proto3 default (oneof members excepted: they have presence)."""
    found = []
    for key, item in value.items():
        where = f"{path}.{key}" if path else key
        if key not in MESSAGES[message]:
            raise AssertionError(f"{where}: no field {key!r} in {message} (transcribe it from the proto first)")
        kind, type_, oneof = MESSAGES[message][key]
        if oneof is None and _is_default(kind, type_, item):
            found.append(f"{where} = {json.dumps(item)}")
        if kind == "message":
            found += defaults_in(item, type_, where)
        elif kind == "repeated" and type_ in MESSAGES:
            for i, element in enumerate(item):
                found += defaults_in(element, type_, f"{where}[{i}]")
    return found


def api_answer(value: dict[str, Any], message: str = "Dashboard") -> dict[str, Any]:
    """What the API returns for a message it stored: proto3 JSON, defaults dropped, enums by name."""
    out: dict[str, Any] = {}
    for key, item in value.items():
        kind, type_, oneof = MESSAGES[message][key]
        if oneof is None and _is_default(kind, type_, item):
            continue
        if kind == "message":
            out[key] = api_answer(item, type_)
        elif kind == "repeated" and type_ in MESSAGES:
            out[key] = [api_answer(e, type_) for e in item]
        elif kind == "enum":
            out[key] = ENUMS[type_][item] if isinstance(item, int) else item
        elif kind == "scalar" and type_ == "double":
            out[key] = float(item)
        else:
            out[key] = copy.deepcopy(item)
    return out


def stored(config: dict[str, Any]) -> dict[str, Any]:
    """The dashboard as the provider's Read puts it in the state: the API's answer, with its own name and etag."""
    return {"name": "projects/123456789012/dashboards/0b1c2d3e", "etag": "5d1b7b2f", **api_answer(config)}


def remove_computed_keys(old: Any, new: Any) -> Any:
    """resource_monitoring_dashboard.go `removeComputedKeys`: drops from `old` (the state) every key `new` (the
    configuration) lacks or holds null, recursing into objects and, element by element, into lists of objects."""
    for key in list(old):
        value = old[key]
        if new.get(key) is None:
            del old[key]
            continue
        if isinstance(value, dict):
            old[key] = remove_computed_keys(value, new[key])
        elif isinstance(value, list):
            for i, element in enumerate(value):
                if isinstance(element, dict) and len(new[key]) > i:
                    value[i] = remove_computed_keys(element, new[key][i])
    return old


def diff_suppressed(state: dict[str, Any], config: dict[str, Any]) -> bool:
    """`monitoringDashboardDiffSuppress`: no change when the trimmed state deep-equals the configuration."""
    return _deep_equal(remove_computed_keys(copy.deepcopy(state), config), config)


def _deep_equal(a: Any, b: Any) -> bool:
    # Go's reflect.DeepEqual on encoding/json values: numbers are float64, "1" is not 1, true is not 1.
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return float(a) == float(b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_deep_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_deep_equal(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


CASES = {
    "dev": {},
    "no-serving": {f"{P}:serving": {"enabled": False}},
    "no-demos": NO_DEMOS,
    "four-cubes": {f"{P}:tpu": {"cubes": 4}},
    # no chips: the provisioned-chips threshold is at 0, the default of its `value`
    "no-cubes": {
        f"{P}:tpu": {"cubes": 0},
        f"{P}:zone": "us-central1-ai1a",
        f"{P}:serving": {"enabled": False},
        **NO_DEMOS,
    },
}


@pytest.fixture(scope="module", params=[*CASES, "staging", "prod"])
def dashboard(request: pytest.FixtureRequest) -> dict[str, Any]:
    if request.param in CASES:
        return emitted(run_program(CASES[request.param]))
    return emitted(run_program(stack=request.param))


def test_the_dashboard_is_valid_and_no_field_is_at_its_default(dashboard: dict[str, Any]) -> None:
    problems = dashboard_problems(dashboard)
    assert problems == []
    assert defaults_in(dashboard) == []
    # Not vacuous: the walk reaches every tile and data set (a dashboard has dozens of fields).
    assert len(tiles(dashboard)) >= 6 and any("xyChart" in t["widget"] for t in tiles(dashboard))


def test_what_the_api_returns_shows_no_change_on_the_second_up(dashboard: dict[str, Any]) -> None:
    assert diff_suppressed(stored(dashboard), dashboard)


def first_query(d: dict[str, Any]) -> dict[str, Any]:
    """The first data set's query of tile 1 (tile 0 is a section header)."""
    return tiles(d)[1]["widget"]["xyChart"]["dataSets"][0]["timeSeriesQuery"]


BREAKAGES = {
    "outside-grid": lambda d: tiles(d)[1].update(xPos=40),  # past column 48
    "overlap": lambda d: tiles(d)[2].update(xPos=0, yPos=tiles(d)[1]["yPos"]),
    "no-promql": lambda d: first_query(d).pop("prometheusQuery"),
    "filter-not-promql": lambda d: first_query(d).update(timeSeriesFilter={"filter": "metric.type=x"}),
    "too-many-columns": lambda d: d["mosaicLayout"].update(columns=64),
    "duplicate": lambda d: tiles(d).append(copy.deepcopy(tiles(d)[1]) | {"yPos": 10_000}),
    "two-kinds": lambda d: tiles(d)[0]["widget"].update(xyChart={"dataSets": []}),
    "extra-layout": lambda d: d.update(gridLayout={}),
}


@pytest.mark.parametrize("breakage", BREAKAGES.values(), ids=BREAKAGES.keys())
def test_a_broken_dashboard_is_caught(dev: Run, breakage: Any) -> None:
    d = emitted(dev)
    breakage(d)
    assert dashboard_problems(d) != []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        # The first tile of a row sits at column 0, the first row at line 0: written out, each is a change forever.
        (("mosaicLayout", "tiles", 0, "xPos"), 0),
        (("mosaicLayout", "tiles", 0, "yPos"), 0),
        (("mosaicLayout", "tiles", 0, "widget", "sectionHeader", "dividerBelow"), False),
        (("mosaicLayout", "tiles", 1, "widget", "xyChart", "dataSets", 0, "legendTemplate"), ""),
        (("mosaicLayout", "tiles", 1, "widget", "xyChart", "thresholds"), []),
        (("mosaicLayout", "tiles", 1, "widget", "xyChart", "yAxis", "scale"), "SCALE_UNSPECIFIED"),
        (("mosaicLayout", "tiles", 1, "widget", "xyChart", "dataSets", 0, "timeSeriesQuery", "unitOverride"), ""),
    ],
    ids=["zero-x", "zero-y", "false", "empty-string", "empty-list", "default-enum", "empty-unit"],
)
def test_every_kind_of_default_is_found_and_would_diff(dev: Run, path: tuple[Any, ...], value: Any) -> None:
    broken = emitted(dev)
    node: Any = broken
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    assert len(defaults_in(broken)) == 1
    assert not diff_suppressed(stored(broken), broken)
    # ... and the program's own clean-up takes each out again.
    assert defaults_in(without_defaults(broken)) == []


def test_keys_the_api_adds_are_no_change() -> None:
    """The reverse direction is the provider's business and works: state keys the config lacks are ignored."""
    config = {"displayName": "d", "mosaicLayout": {"columns": 48, "tiles": [{"width": 48, "height": 4}]}}
    state = stored(config)
    state["mosaicLayout"]["tiles"][0]["widget"] = {"id": "abc"}
    assert diff_suppressed(state, config)
    # A changed value is still a change (the model is not blind).
    changed = copy.deepcopy(config)
    changed["mosaicLayout"]["tiles"][0]["width"] = 24
    assert not diff_suppressed(state, changed)


def test_an_empty_label_value_is_kept() -> None:
    """A map's entries are data: proto3 JSON writes every entry, an empty value too, so the tag label stays."""
    config = {"displayName": "d", "labels": {P: ""}}
    assert defaults_in(config) == []
    assert stored(config)["labels"] == {P: ""}
    assert without_defaults(config) == config
