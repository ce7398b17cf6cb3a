"""The program's PromQL evaluated by Prometheus' own engine on synthetic series: `promtool test rules`.

Cloud Monitoring evaluates a PromQL alert condition as a Prometheus alerting rule, its `query` the rule's `expr` and
its `duration` the rule's `for` (AlertPolicy.Condition.PrometheusQueryLanguageCondition, "the semantics of a
Prometheus alerting rule"), so Prometheus' rule unit tester says when a policy fires; a `promql_expr_test` says what
a dashboard chart plots. Managed Prometheus' query engine is not Prometheus' (its differences:
https://cloud.google.com/stackdriver/docs/managed-prometheus/promql-differences), but the functions used here
(`increase`, `max_over_time`, `last_over_time`, `offset`, `or`, `and`, `unless`, `count`, `sum`) are not among them.

promtool comes from $PROMTOOL or PATH; `.ci/run` unpacks it from Debian's `prometheus` package (2.42). Missing, the
tests that need it skip with one line, or fail where $CI is set. Prometheus 2 reads no quoted name inside the braces
(`{"__name__"="up",...}`, the UTF-8 form Managed Prometheus and Prometheus 3 accept): `legacy` writes the same
selector as `up{...}`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
import yaml

from tests.upstream import in_ci

SKIP = "promtool not found (set $PROMTOOL or put it on PATH; .ci/run unpacks Debian's prometheus package)"
_QUOTED_NAME = re.compile(r'\{"__name__"="([A-Za-z_:][A-Za-z0-9_:]*)",?')


def promtool() -> str:
    found = os.environ.get("PROMTOOL") or shutil.which("promtool")
    if found and Path(found).is_file():
        return found
    if in_ci():
        pytest.fail(f"CI={os.environ.get('CI')}: {SKIP}", pytrace=False)
    pytest.skip(SKIP)
    raise AssertionError("unreachable")  # pragma: no cover (pytest.skip raises)


def legacy(query: str) -> str:
    """`{"__name__"="m",a="b"}` as `m{a="b"}`: the one syntax Prometheus 2 lacks."""
    return _QUOTED_NAME.sub(lambda m: m.group(1) + "{", query)


def _run(rules: list[dict[str, object]], test: dict[str, object]) -> None:
    with tempfile.TemporaryDirectory(prefix="promql-") as tmp:
        Path(tmp, "rules.yaml").write_text(yaml.safe_dump({"groups": [{"name": "program", "rules": rules}]}))
        suite = {"rule_files": ["rules.yaml"], "evaluation_interval": "1m", "tests": [test]}
        Path(tmp, "test.yaml").write_text(yaml.safe_dump(suite, sort_keys=False))
        done = subprocess.run(
            [promtool(), "test", "rules", "test.yaml"], cwd=tmp, capture_output=True, text=True, check=False
        )
    assert done.returncode == 0, done.stdout + done.stderr


def assert_alert(
    query: str, duration_s: int, series: Mapping[str, str], *, firing: Sequence[str] = (), quiet: Sequence[str] = ()
) -> None:
    """The alert of `query` held `duration_s` fires (one alert, no labels but its name) at each `firing` time and
    not at each `quiet` one (promtool durations such as `70m`); `series` in promtool's notation, one sample a minute
    (`1x30 _x10 0x60`: 31 ones, 10 minutes without a sample, 61 zeros)."""
    rule = {"alert": "program", "expr": legacy(query), "for": f"{duration_s}s"}
    checks = [{"eval_time": t, "alertname": "program", "exp_alerts": [{"exp_labels": {}}]} for t in firing]
    checks += [{"eval_time": t, "alertname": "program", "exp_alerts": []} for t in quiet]
    inputs = [{"series": legacy(s), "values": v} for s, v in series.items()]
    _run([rule], {"interval": "1m", "input_series": inputs, "alert_rule_test": checks})


def assert_samples(query: str, series: Mapping[str, str], at: str, samples: Mapping[str, float]) -> None:
    """`query` at `at` gives exactly `samples` ({labels in braces: value})."""
    inputs = [{"series": legacy(s), "values": v} for s, v in series.items()]
    expected = [{"labels": labels, "value": value} for labels, value in samples.items()]
    test = {"expr": legacy(query), "eval_time": at, "exp_samples": expected}
    _run([], {"interval": "1m", "input_series": inputs, "promql_expr_test": [test]})


def assert_values(series: Mapping[str, str], checks: Sequence[tuple[str, str, float]], interval: str = "1m") -> None:
    """Each (query, time, value): the query gives exactly one series without labels, of that value (one promtool
    run for all of them; `interval` is the series' sample interval)."""
    inputs = [{"series": legacy(s), "values": v} for s, v in series.items()]
    tests = [
        {"expr": legacy(query), "eval_time": at, "exp_samples": [{"labels": "{}", "value": value}]}
        for query, at, value in checks
    ]
    _run([], {"interval": interval, "input_series": inputs, "promql_expr_test": tests})
