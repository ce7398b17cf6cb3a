"""The offline mode is passed in (the offline commands' config), never read off the mocks' `<...>` markers."""

from typing import Any

import pulumi
import pytest

from components.cli import charts, mockrun, render
from components.cli.mocks import FakeReservation, SymbolicMocks
from tests.harness import Mocks, run_program
from tests.stack_config import CLOCK, stack_file_config

VERSIONS = "gcp:container/getEngineVersions:getEngineVersions"
MARKERS = "read from no API (offline render: the sub-blocks are markers, taken as ready and free)"


class CountingMocks(SymbolicMocks):
    def __init__(self) -> None:
        super().__init__()
        self.tokens: list[str] = []

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[Any]]:
        self.tokens.append(args.token)
        return super().call(args)


def sub_block_table(logs: list[tuple[str, str]]) -> str:
    (table,) = [msg for level, msg in logs if level == "info" and "SUB-BLOCKS" in msg]
    return table


def test_the_offline_run_asks_gke_nothing_and_says_its_sub_blocks_are_markers() -> None:
    mocks = CountingMocks()
    run = mockrun.execute(stack_file_config("dev"), stack="dev", mocks=mocks, now=CLOCK)
    assert run.error is None, run.error
    assert VERSIONS not in mocks.tokens and mocks.tokens  # the reservation and the bucket are still read
    table = sub_block_table(run.logs)
    assert MARKERS in table and "<sub-block 001>  tpu7-pool-1" in table


def test_a_run_under_other_mocks_is_online_whatever_its_answers_look_like() -> None:
    # Self links that look like the offline markers: the program still reports the Compute API as the source.
    reservation = FakeReservation.healthy()
    reservation.self_link_prefix = "<selfLink of "
    run = run_program(mocks=Mocks(reservation=reservation))
    assert run.error is None, run.error
    table = sub_block_table(run.logs)
    assert MARKERS not in table and "the Compute API (at preview)" in table
    assert VERSIONS in [c.token for c in run.mocks.calls]


def test_render_says_once_that_helms_engine_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    # The same line for each of the four charts told the user nothing more.
    def missing(release: charts.Release) -> None:
        raise charts.ChartUnavailable("the chart objects need helm-python-sdk")

    monkeypatch.setattr(charts, "render_release", missing)
    run = run_program()
    assert run.error is None, run.error
    _, counts, warnings = render.chart_files(run.registrations)
    assert warnings == ["chart objects not rendered: the chart objects need helm-python-sdk"] and counts == {}
